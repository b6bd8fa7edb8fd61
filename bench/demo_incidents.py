"""The demo's incidents against the sandbox's ground truth: is every scripted incident an incident, and how many?

    .venv/bin/python -m bench.demo_incidents [--minutes 4] [--speed 10] [--poll-interval S] [--keep]

Runs ``python -m sandbox.demo`` (sandbox, real ZooKeeper ensemble, collector; no dashboard) for `--minutes`
real minutes, then reads what really happened from its output (the sandbox prints ``incident <type> start``
and ``... end`` on its simulated clock) and what the collector recorded from the history's
``incident_events`` table (the table the weekly report counts), and prints one line per scripted incident
with the collector incident(s) that explain it, then the totals: incidents opened vs scripted (issue 13:
at most 2x) and how many scripted ones were found.

A scripted incident is *found* when an incident of the kind it must cause (`EXPECTED`) and, where the kind
has one, its subject, was open at some time between the scripted start and its end plus `SLACK_S`
(detection takes a poll, and timed rules a hold). One that started and ended between two polls leaves
nothing to see for most kinds: it is reported as *between polls*, not as missed.

Then the loss ledger against the sandbox's ground truth: for every leader the sandbox lost ("leader lost ...:
N committed messages lost ..., M acks=1-only messages lost above it") and every clean leader change with a
high watermark dip, the ledger's truncation figure for that partition (from the history's ``loss_events``)
and how many polls after the loss it was recorded.

Last, each broker whose metadata cache lagged (the sandbox prints, when it catches up, "broker N: metadata cache
caught up after Ss; it had answered K partition(s) at an older leader epoch") against the collector's
``broker_metadata_lagging`` alert of that broker (the history's ``alert_events``): when it opened after the lag
began, and its lower bound and partition count, which must not exceed the truth.
"""

from __future__ import annotations

import argparse
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SLACK_S = 150.0  # simulated seconds after a scripted end in which its incident may still open
START_LINE = re.compile(r"simulated clock t\+0 = ([0-9.]+)")
EVENT_LINE = re.compile(r"\[sandbox t\+\s*([0-9.]+)s\] incident (\w+) (start|end)")


@dataclass
class Scripted:
    type: str
    start: float  # epoch seconds on the simulated clock
    end: float | None
    subject: str | None  # what the incident must name (group, transactional id, broker, topic-partition)
    found: list[str] = field(default_factory=list)  # "kind subject (id)" of the incidents that explain it
    between_polls: bool = False


def expected(s: Scripted) -> tuple[set[str], str | None]:
    """The incident kinds a scripted incident must cause, and the text its subject must contain (None: any)."""
    t = s.type
    if t in ("broker_crash", "broker_flap"):
        return {"broker"}, s.subject
    if t == "slow_follower":
        return {"topic", "broker"}, None  # partitions fall behind with no broker down: per topic
    if t.startswith("consumer_"):
        return {"group"}, s.subject
    if t == "hanging_transaction":
        return {"transaction"}, s.subject
    if t == "unclean_election":  # its partition is under min ISR, then truncated: one incident for the topic
        return {"topic", "broker"}, (s.subject or "").rsplit("-", 1)[0] or None
    if t in ("zk_leader_kill", "zk_follower_pause", "controller_failover", "metadata_lag"):
        return {"consensus"}, None  # a broker whose metadata lags is a symptom of the consensus layer's
    return set(), None


# Scripted incidents that must not open an incident, and why (the loss ledger section compares them instead).
NO_INCIDENT = {
    "producer_crash_in_txn": "no incident: the coordinator aborts at the timeout; in the loss ledger",
    "acks1_leader_loss": "no incident: the lost tail was never under a high watermark; invisible by design",
    "leader_change_hw_dip": "no incident: a clean leader change; the dip is not loss",
}
LOST_LINE = re.compile(r"\[sandbox t\+\s*([0-9.]+)s\] leader lost (\S+): .* ([\d,]+) committed messages? lost "
                       r".* ([\d,]+) acks=1-only")
DIP_LINE = re.compile(r"\[sandbox t\+\s*([0-9.]+)s\] leader change (\S+): .*0 messages lost")


@dataclass
class Truth:
    """One partition's ground truth from the sandbox's output, and what the ledger says about it."""

    at: float  # epoch seconds on the simulated clock
    partition: str  # topic-partition
    committed: int  # committed messages lost (what a reader of high watermarks can prove)
    tail: int  # acks=1-only messages lost above the high watermark (what nobody can see)
    ledger: int = 0  # messages the ledger's truncation rows give for it
    polls_to_report: int | None = None  # polls after `at` up to the one that recorded it (1: the next poll)


def losses_against_ledger(lines: list[str], t0: float, ledger: list[dict[str, object]], polls: list[float]
                          ) -> list[Truth]:
    """Each lost leader and each dip the sandbox printed, with the ledger's truncation figure for that partition
    in the following SLACK_S (a dip is a Truth with nothing lost: its ledger figure must be 0 too)."""
    out: list[Truth] = []
    for line in lines:
        if m := LOST_LINE.search(line):
            out.append(Truth(t0 + float(m.group(1)), m.group(2), int(m.group(3).replace(",", "")),
                             int(m.group(4).replace(",", ""))))
        elif m := DIP_LINE.search(line):
            out.append(Truth(t0 + float(m.group(1)), m.group(2), 0, 0))
    for tr in out:
        rows = [r for r in ledger if r["kind"] == "truncation" and f"{r['topic']}-{r['partition']}" == tr.partition
                and tr.at <= float(r["time"]) <= tr.at + SLACK_S]  # type: ignore[arg-type]
        tr.ledger = sum(int(r["messages"] or 0) for r in rows)  # type: ignore[call-overload]
        if rows:
            first = min(float(r["time"]) for r in rows)  # type: ignore[arg-type]
            tr.polls_to_report = sum(1 for p in polls if tr.at <= p <= first)
    return out


CAUGHT_UP_LINE = re.compile(r"\[sandbox t\+\s*([0-9.]+)s\] broker (\d+): metadata cache caught up after (\d+)s; "
                            r"it had answered (\d+) partition")
ANSWERED = re.compile(r"it answered ([\d,]+) partitions?")  # `wording.plural`: 1,234 partitions


@dataclass
class LagTruth:
    """A broker's metadata lag as the sandbox printed it, and what the collector's alert of it said."""

    broker: int
    start: float  # epoch seconds on the simulated clock: when its cache stopped following
    lagged_s: float  # how long it lagged
    behind: int  # partitions it answered at an older leader epoch than the controller's, when it caught up
    opened_after_s: float | None = None  # the alert's first_seen less `start` (None: no alert)
    bound_s: float | None = None  # the largest lower bound the alert reported
    answered: int | None = None  # the most partitions an alert summary said it answered at a replaced epoch

    @property
    def within_truth(self) -> bool | None:
        """The alert claims no more than happened: a bound up to the lag, a count up to the partitions behind (None:
        no alert, nothing claimed). A loose check: the bound runs from the first poll that saw a leadership move
        the broker missed, which is some time after its cache froze."""
        if self.opened_after_s is None:
            return None
        return (self.bound_s is None or self.bound_s <= self.lagged_s + 1.0) and \
            (self.answered is None or self.answered <= self.behind)


def lags_against_alerts(lines: list[str], t0: float, alert_events: list[dict[str, object]]) -> list[LagTruth]:
    """Each metadata lag the sandbox printed, with the ``broker_metadata_lagging`` alert events of that broker
    between its start and its end plus `SLACK_S` (the alert's value is the lower bound; its summary, the count)."""
    out: list[LagTruth] = []
    for line in lines:
        if m := CAUGHT_UP_LINE.search(line):
            end, lagged = t0 + float(m.group(1)), float(m.group(3))
            out.append(LagTruth(int(m.group(2)), end - lagged, lagged, int(m.group(4))))
    for tr in out:
        mine = [e for e in alert_events if e["rule"] == "broker_metadata_lagging"
                and e["subject"] == f"broker-{tr.broker}"
                and tr.start <= float(e["first_seen"]) <= tr.start + tr.lagged_s + SLACK_S]  # type: ignore[arg-type]
        if not mine:
            continue
        tr.opened_after_s = min(float(e["first_seen"]) for e in mine) - tr.start  # type: ignore[arg-type]
        bounds = [float(e["value"]) for e in mine if e["value"] is not None]  # type: ignore[arg-type]
        tr.bound_s = max(bounds) if bounds else None
        counts = [int(m.group(1).replace(",", "")) for e in mine if (m := ANSWERED.search(str(e["summary"] or "")))]
        tr.answered = max(counts) if counts else None
    return out


def scripted_from_output(lines: list[str], specs: list[object], repeat: float | None) -> list[Scripted]:
    """The scripted incidents that really started (and ended) per the demo's output, with their targets."""
    t0 = next((float(m.group(1)) for line in lines if (m := START_LINE.search(line))), None)
    if t0 is None:
        raise SystemExit("the demo did not print its clock origin: is this the demo of this checkout?")
    out: list[Scripted] = []
    open_by_type: dict[str, list[Scripted]] = {}
    for line in lines:
        m = EVENT_LINE.search(line)
        if not m:
            continue
        at, kind, what = float(m.group(1)), m.group(2), m.group(3)
        if what == "start":
            spec = _spec_for(specs, kind, at, repeat)
            sc = Scripted(kind, t0 + at, None, _subject(spec))
            out.append(sc)
            open_by_type.setdefault(kind, []).append(sc)
        elif open_by_type.get(kind):
            open_by_type[kind].pop(0).end = t0 + at
    return out


def _spec_for(specs: list[object], kind: str, at: float, repeat: float | None) -> object | None:
    same = [s for s in specs if getattr(s, "type", None) == kind]
    return min(same, key=lambda s: abs((at - s.at) % (repeat or 1e18)), default=None)  # type: ignore[attr-defined]


def _subject(spec: object | None) -> str | None:
    if spec is None:
        return None
    for attr, fmt in (("group", "{}"), ("transactional_id", "{}"), ("broker", "{}")):
        v = getattr(spec, attr, None)
        if v is not None and (attr != "broker" or spec.type in ("broker_crash", "broker_flap")):  # type: ignore[attr-defined]
            return fmt.format(v)
    topic, part = getattr(spec, "topic", None), getattr(spec, "partition", None)
    if topic is not None and part is not None:
        return f"{topic}-{part}"
    return None


def match(scripted: list[Scripted], incidents: dict[str, dict[str, object]], polls: list[float],
          run_end: float) -> None:
    """Fill `found` / `between_polls` of each scripted incident (see the module docstring)."""
    for s in scripted:
        kinds, subject = expected(s)
        end = s.end if s.end is not None else run_end
        for iid, inc in sorted(incidents.items(), key=lambda kv: float(kv[1]["opened"])):  # type: ignore[arg-type]
            opened = float(inc["opened"])  # type: ignore[arg-type]
            closed = inc.get("resolved_at")
            closed = run_end if closed is None else float(closed)  # type: ignore[arg-type]
            if inc["kind"] not in kinds or opened > end + SLACK_S or closed < s.start:
                continue
            if subject is not None and subject not in str(inc["subject"]):
                continue
            s.found.append(f"{inc['kind']} {inc['subject']} ({iid})")
        s.between_polls = not any(s.start <= p <= end for p in polls)


def incidents_from_history(history: Path) -> tuple[dict[str, dict[str, object]], list[float]]:
    """Each incident's last recorded state (by id), and the poll times, from the history the demo wrote."""
    from collectors.outputs.history.reader import read_arrow

    events = read_arrow(history, "incident_events").to_pylist()
    last: dict[str, dict[str, object]] = {}
    for e in sorted(events, key=lambda e: e["time"]):
        last[e["id"]] = e
    polls = sorted(r["time"] for r in read_arrow(history, "cluster", columns=["time"]).to_pylist())
    return last, polls


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=4.0, help="real minutes of demo")
    ap.add_argument("--speed", type=float, default=10.0)
    ap.add_argument("--poll-interval", type=float, help="real seconds between polls (default: the demo's)")
    ap.add_argument("--keep", action="store_true", help="keep the demo's data directory")
    a = ap.parse_args()
    from sandbox.scenario import load_scenario

    data = Path(tempfile.mkdtemp(prefix="kmon-demo-incidents-"))
    try:
        cmd = [sys.executable, "-m", "sandbox.demo", "--speed", str(a.speed), "--duration", str(a.minutes * 60),
               "--no-dashboard", "--data-dir", str(data), "--metrics-port", str(free_port()),
               "--dashboard-port", str(free_port())]
        if a.poll_interval:
            cmd += ["--poll-interval", str(a.poll_interval)]
        print(f"running the demo for {a.minutes:g} min at speed {a.speed:g}, polls every "
              f"{a.poll_interval or 'the demo default of 10 simulated '}s ...", flush=True)
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=a.minutes * 60 + 300)
        lines = proc.stdout.splitlines()
        if proc.returncode != 0:
            raise SystemExit(f"demo exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
        scenario = load_scenario(None)
        scripted = scripted_from_output(lines, list(scenario.incidents), scenario.repeat_every)
        incidents, polls = incidents_from_history(data / "history")
        from collectors.outputs.history.reader import read_arrow
        ledger = read_arrow(data / "history", "loss_events").to_pylist()
        alert_events = read_arrow(data / "history", "alert_events").to_pylist()
        run_end = max(polls) if polls else 0.0
        match(scripted, incidents, polls, run_end)
        t0 = scripted[0].start if scripted else 0.0
        print(f"\n{'t+ (sim s)':>10}  {'scripted':<26}{'subject':<14}{'collector incident(s)'}")
        for s in scripted:
            got = "; ".join(s.found) if s.found else (
                f"— ({NO_INCIDENT.get(s.type, 'no incident expected')})" if not expected(s)[0]
                else "— (started and ended between two polls)" if s.between_polls else "MISSED")
            print(f"{s.start - t0:>10.0f}  {s.type:<26}{s.subject or '':<14}{got}")
        found = sum(1 for s in scripted if s.found)
        seeable = sum(1 for s in scripted if expected(s)[0] and (s.found or not s.between_polls))
        print(f"\nscripted incidents: {len(scripted)}; found: {found}; no incident by design (ledger only): "
              f"{sum(1 for s in scripted if not expected(s)[0])}; between polls (nothing to see): "
              f"{sum(1 for s in scripted if expected(s)[0] and not s.found and s.between_polls)}; "
              f"missed: {seeable - found}")
        print(f"incidents opened (history incident_events, what the weekly report counts): {len(incidents)} "
              f"= {len(incidents) / max(1, len(scripted)):.2f}x scripted (target <= 2x); polls: {len(polls)}")
        print("by kind: " + ", ".join(f"{k} {sum(1 for i in incidents.values() if i['kind'] == k)}"
                                      for k in sorted({str(i['kind']) for i in incidents.values()})))
        truths = losses_against_ledger(lines, float(START_LINE.search("\n".join(lines)).group(1)),  # type: ignore[union-attr]
                                       ledger, polls)
        print(f"\n{'t+ (sim s)':>10}  {'partition':<16}{'committed lost':>15}{'acks=1 tail lost':>17}"
              f"{'ledger':>8}  reported")
        for tr in truths:
            when = f"at poll {tr.polls_to_report} after it" if tr.polls_to_report is not None else "-"
            print(f"{tr.at - t0:>10.0f}  {tr.partition:<16}{tr.committed:>15,}{tr.tail:>17,}{tr.ledger:>8,}  {when}")
        exact = sum(1 for tr in truths if tr.ledger == tr.committed)
        late = [tr.polls_to_report for tr in truths if tr.polls_to_report is not None]
        print(f"ledger = ground truth (committed loss) for {exact} of {len(truths)}; reported at poll "
              f"{max(late) if late else '-'} after the loss at worst (1 = the next poll); acks=1 tails lost "
              f"(invisible to any reader of "
              f"high watermarks): {sum(tr.tail for tr in truths):,} messages")
        lags = lags_against_alerts(lines, float(START_LINE.search("\n".join(lines)).group(1)),  # type: ignore[union-attr]
                                   alert_events)
        print(f"\n{'t+ (sim s)':>10}  {'broker':<8}{'lagged (s)':>11}{'partitions behind':>18}"
              f"{'alert after (s)':>16}{'bound (s)':>10}{'partitions said':>16}")
        for lg in lags:
            print(f"{lg.start - t0:>10.0f}  {lg.broker:<8}{lg.lagged_s:>11.0f}{lg.behind:>18}"
                  f"{_num(lg.opened_after_s):>16}{_num(lg.bound_s):>10}{_num(lg.answered):>16}")
        alerted = sum(lg.opened_after_s is not None for lg in lags)
        print(f"metadata lags alerted: {alerted} of {len(lags)}; of those, claims within the truth (bound <= lag, "
              f"partitions <= behind): {sum(bool(lg.within_truth) for lg in lags)} of {alerted}")
    finally:
        if a.keep:
            print(f"data kept in {data}")
        else:
            shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
