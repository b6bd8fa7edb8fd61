"""bench.demo_incidents' pure part: reading what the sandbox says happened, and finding it among the incidents."""

from __future__ import annotations

from bench.demo_incidents import (
    Scripted,
    expected,
    lags_against_alerts,
    losses_against_ledger,
    match,
    scripted_from_output,
)
from sandbox.spec import IncidentSpec

T0 = 1_800_000_000.0
SPECS = [IncidentSpec(type="broker_crash", at=60, duration=90, broker=3),
         IncidentSpec(type="consumer_stall", at=330, duration=120, group="analytics"),
         IncidentSpec(type="hanging_transaction", at=630, duration=90, topic="orders", partition=1),
         IncidentSpec(type="zk_follower_pause", at=520, duration=40)]
OUTPUT = f"""[demo] sandbox: simulated clock t+0 = {T0:.3f} (epoch seconds); the lines [sandbox t+...] below ...
  [sandbox t+   60.0s] incident broker_crash start
  [sandbox t+   60.0s] broker 3 crashed
  [sandbox t+  150.0s] incident broker_crash end
  [sandbox t+  330.1s] incident consumer_stall start
  [sandbox t+  450.1s] incident consumer_stall end
  [sandbox t+  520.0s] incident zk_follower_pause start
  [sandbox t+  560.0s] incident zk_follower_pause end
  [sandbox t+  960.0s] incident broker_crash start
""".splitlines()


def test_scripted_incidents_are_read_from_the_output_with_their_targets() -> None:
    got = scripted_from_output(OUTPUT, SPECS, repeat=900)
    assert [(s.type, round(s.start - T0, 1), None if s.end is None else round(s.end - T0, 1), s.subject)
            for s in got] == [("broker_crash", 60.0, 150.0, "3"), ("consumer_stall", 330.1, 450.1, "analytics"),
                              ("zk_follower_pause", 520.0, 560.0, None), ("broker_crash", 960.0, None, "3")]


def test_match_needs_the_kind_the_subject_and_an_overlap() -> None:
    scripted = scripted_from_output(OUTPUT, SPECS, repeat=900)
    incidents = {
        "b1": {"kind": "broker", "subject": "broker 3", "opened": T0 + 70, "resolved_at": T0 + 200},
        "g1": {"kind": "group", "subject": "billing", "opened": T0 + 340, "resolved_at": T0 + 460},  # other group
        "b2": {"kind": "broker", "subject": "broker 2", "opened": T0 + 970, "resolved_at": None},  # other broker
    }
    polls = [T0 + t for t in range(0, 1001, 100)]  # 100 s apart: the 40 s pause falls between two
    match(scripted, incidents, polls, run_end=T0 + 1000)
    assert [s.found for s in scripted] == [["broker broker 3 (b1)"], [], [], []]
    assert [s.between_polls for s in scripted] == [False, False, True, False]
    late = Scripted("consumer_stall", T0 + 330, T0 + 450, "analytics")
    match([late], {"g": {"kind": "group", "subject": "analytics", "opened": T0 + 700, "resolved_at": None}},
          polls, run_end=T0 + 1000)
    assert late.found == []  # opened long after the stall ended (+ slack): not its incident


def test_lost_leaders_are_compared_with_the_ledger_and_counted_in_polls() -> None:
    lines = [
        "  [sandbox t+  975.0s] leader lost clickstream-0: leader 1 (epoch 3) -> 2 (epoch 5); 1,604 committed "
        "messages lost (high watermark 9,000 -> 7,396), 0 acks=1-only messages lost above it",
        "  [sandbox t+ 1025.0s] leader lost clickstream-1: leader 2 (epoch 1) -> 3 (epoch 2); 0 committed messages "
        "lost (high watermark 500 -> 500), 121 acks=1-only messages lost above it",
        "  [sandbox t+ 1080.0s] leader change orders-2: leader 1 -> 2 (epoch 4); its high watermark reads 300, 100 "
        "below 400, for 15s until its followers fetch; 0 messages lost",
    ]
    ledger = [
        {"kind": "unclean_election", "topic": "clickstream", "partition": 0, "messages": None, "time": T0 + 990},
        {"kind": "truncation", "topic": "clickstream", "partition": 0, "messages": 1604, "time": T0 + 990},
        {"kind": "truncation", "topic": "clickstream", "partition": 0, "messages": 5, "time": T0 + 5000},  # later
    ]
    polls = [T0 + t for t in range(970, 1200, 10)]
    got = losses_against_ledger(lines, T0, ledger, polls)
    assert [(t.partition, t.committed, t.tail, t.ledger, t.polls_to_report) for t in got] == [
        ("clickstream-0", 1604, 0, 1604, 2), ("clickstream-1", 0, 121, 0, None), ("orders-2", 0, 0, 0, None)]


def test_a_metadata_lag_is_a_consensus_incident_and_its_alert_is_held_against_the_truth() -> None:
    """The sandbox's catch-up line against the broker's `broker_metadata_lagging` events: the first one opened in
    the lag's window, the largest bound and count said; another broker's, or one long after, is not its alert."""
    assert expected(Scripted("metadata_lag", T0 + 50, T0 + 140, None)) == ({"consensus"}, None)
    lines = ["  [sandbox t+  140.0s] broker 1: metadata cache caught up after 90s; it had answered 6 partition(s) at "
             "an older leader epoch: clickstream-2, orders-0, orders-3, payments-1, audit-trail-0"]

    def event(event: str, subject: str, first_seen: float, value: float | None, said: int | None) -> dict[str, object]:
        summary = None if said is None else f"broker 1's metadata cache lags ...: it answered {said} partitions at"
        return {"event": event, "rule": "broker_metadata_lagging", "subject": subject, "first_seen": T0 + first_seen,
                "value": value, "summary": summary}

    events = [event("open", "broker-1", 100, 32.0, 5), event("resolve", "broker-1", 100, 71.0, 6),
              event("open", "broker-2", 100, 40.0, 9),  # another broker
              event("open", "broker-1", 900, 500.0, 60)]  # long after: another lag
    (lag,) = lags_against_alerts(lines, T0, events)
    assert (lag.broker, lag.start - T0, lag.lagged_s, lag.behind) == (1, 50.0, 90.0, 6)
    assert (lag.opened_after_s, lag.bound_s, lag.answered, lag.within_truth) == (50.0, 71.0, 6, True)
    (over,) = lags_against_alerts(lines, T0, [event("open", "broker-1", 100, 95.0, 7)])
    assert over.within_truth is False  # a bound past the lag, a count past the partitions behind: claims too much
    many = [dict(event("open", "broker-1", 100, 40.0, None), summary="broker 1's ...: it answered 1,234 partitions at")]
    (counted,) = lags_against_alerts(lines, T0, many)
    assert (counted.answered, counted.within_truth) == (1234, False)  # the count as `wording.plural` writes it
    (none,) = lags_against_alerts(lines, T0, events[2:])
    assert (none.opened_after_s, none.bound_s, none.answered, none.within_truth) == (None, None, None, None)
