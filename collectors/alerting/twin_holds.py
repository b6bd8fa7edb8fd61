"""The hold each Prometheus twin carries over stale sections, derived from the catalogue.

The collector keeps an open alert while a section its rule depends on is stale (`RuleSpec.keep_when_stale`), for
the subjects that section failed for (`catalogue.kept_over_stale`). The exporter exports only what a poll read, so
the series behind the twin vanish then, and the twin used to resolve, to fire again a poll later: a flap on the
channel for every stale poll, and for the whole of an unreachable spell. Each twin's expression is therefore its
condition ``E`` followed by a hold::

    E
    or last_over_time(twin:X:condition[6h])
    and ignoring (alertname, alertstate, severity) (
      ALERTS{alertname="X", alertstate="firing"} and on (cluster) kafka_monitor_stale_whole{section=~"..."}
      or ALERTS{alertname="X", alertstate="firing", topic!=""}
      and on (cluster, topic) kafka_monitor_stale_subject{section=~"...", topic!=""}
    )

that is: an alert already firing stays firing, with the last value its condition had (so its summary still says
how many), while a section it depends on is stale as a whole, or for its own subject, on any monitor exporting
the cluster: the condition takes the worst of what the monitors read, and a monitor that cannot read keeps its
alert, as the incidents (also the worst over monitors) do. Its own earlier ``ALERTS`` series says it was firing;
``kafka_monitor_stale_whole`` and ``kafka_monitor_stale_subject`` (`collectors.outputs.stale_metrics`) say what
is unjudged. A section whose failures cannot name the twin's kind of
subject holds through ``kafka_monitor_stale`` (any failure of it), as the collector keeps every subject then; so
does a roll-up branch's alert, which has no topic (it counts partitions a failure may hide). Nothing new fires on a
stale section, and a hold lasts at most the 6 hours its value is looked up in.

The value comes from a recording rule per twin (``twin:X:condition``, the group `RECORD_GROUP` at the end of the
file) rather than from a subquery over ``E``: a subquery would evaluate ``E`` once a step over the whole window at
every evaluation, stale or not, and its steps, aligned on the clock, can miss a condition younger than a step.

`python -m collectors.alerting.twin_holds` rewrites the expressions in ``deploy/prometheus/alerts.yml`` (a test
keeps the file equal to what this module derives, so a rule gaining a section, or a new twin, fails until it runs).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

from collectors.alerting.catalogue import CATALOGUE, PASS_THROUGH
from collectors.model.stale_subjects import subject_kinds
from collectors.model.vocabulary import STALE_SUBJECT_KINDS

ALERTS_YML = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "alerts.yml"
HOLD_WINDOW = "6h"
MARKER = "or last_over_time(twin:"
"""Where a twin's hold starts in its expression."""
RECORD_GROUP = "twin-conditions"
_GROUP_HEAD = [
    "  # ------------------------------------------------------------------------------------------------",
    "  # Written by `python -m collectors.alerting.twin_holds`, do not edit: each twin's condition, recorded so",
    "  # that its hold keeps the value the condition last had before its section went stale. Keep it last.",
    f"  - name: {RECORD_GROUP}",
    "    rules:",
]


def recorded(alert: str) -> str:
    """The series recording `alert`'s condition."""
    return f"twin:{alert}:condition"


_KIND_OF_LABELS = {("topic",): "topic", ("partition", "topic"): "partition", ("consumergroup",): "group",
                   ("transactional_id",): "transactional_id", ("state", "transactional_id"): "transactional_id"}
_JOIN = {"topic": "topic", "group": "consumergroup", "transactional_id": "transactional_id"}


def twin_sections() -> dict[str, frozenset[str]]:
    """Each Prometheus twin of a rule kept over stale sections -> those sections (over all the rules it covers)."""
    out: dict[str, set[str]] = {}
    for r in CATALOGUE:
        if not r.keep_when_stale:
            continue
        for alert in r.prometheus:
            if alert != PASS_THROUGH:  # passes the collector's own alerts through: the collector keeps them
                out.setdefault(alert, set()).update(r.keep_when_stale)
    return {alert: frozenset(sections) for alert, sections in out.items()}


def twin_kind(condition: str) -> str | None:
    """The subject kind of a twin's alerts, read from its condition's first ``by (...)``; None: the cluster, a
    broker, a ZooKeeper server or a voter (kept over whole sections only)."""
    found = re.search(r"\bby\s*\(([^)]*)\)", condition)
    labels = tuple(sorted(x.strip() for x in found.group(1).split(",") if x.strip() != "cluster")) if found else ()
    return _KIND_OF_LABELS.get(labels)


def _regex(sections: list[str]) -> str:
    return f'="{sections[0]}"' if len(sections) == 1 else f'=~"{"|".join(sections)}"'


def hold(alert: str, condition: str) -> list[str]:
    """The lines of `alert`'s hold, after its `condition`."""
    sections = sorted(twin_sections()[alert])
    kind = twin_kind(condition)
    named = [s for s in sections if kind is not None and kind in subject_kinds(s)]
    anyhow = [s for s in sections if s not in named]
    firing = f'ALERTS{{alertname="{alert}", alertstate="firing"'
    whole = ([f"kafka_monitor_stale_whole{{section{_regex(named)}}}"] if named else []) + \
        ([f"kafka_monitor_stale{{section{_regex(anyhow)}}}"] if anyhow else [])
    lines = [f"{firing}}}", f"and on (cluster) ({' or '.join(whole)})" if len(whole) > 1 else
             f"and on (cluster) {whole[0]}"]
    joins: dict[str, list[str]] = {}
    for s in named:  # a partition twin joins a stale topic on the topic, a stale partition on both
        on = ("topic" if STALE_SUBJECT_KINDS[s] == "topic" else "topic, partition") if kind == "partition" \
            else _JOIN[kind or ""]
        joins.setdefault(on, []).append(s)
    for on, of in joins.items():
        labels = [x.strip() for x in on.split(",")]
        present = ", ".join(f'{x}!=""' for x in labels)
        lines += [f'or {firing}, {labels[0]}!=""}}',
                  f"and on (cluster, {on}) kafka_monitor_stale_subject{{section{_regex(of)}, {present}}}"]
    if kind in ("topic", "partition") and re.search(r"\bby\s*\(\s*cluster\s*\)", condition):
        # a roll-up branch: its alerts (no topic) count partitions, any of which a failure naming some may hide
        lines += [f'or {firing}, topic=""}}', f"and on (cluster) kafka_monitor_stale{{section{_regex(sections)}}}"]
    return [f"or last_over_time({recorded(alert)}[{HOLD_WINDOW}])",
            "and ignoring (alertname, alertstate, severity) (", *(f"  {x}" for x in lines), ")"]


def condition_lines(condition: str) -> list[str]:
    """A condition's non-blank lines, as written."""
    return [line.rstrip() for line in condition.strip().splitlines() if line.strip()]


def condition_of(expr: str) -> str:
    """A twin's expression without its hold."""
    at = expr.find(MARKER)
    return expr if at < 0 else expr[:at].rstrip()


def expression(alert: str, condition: str) -> str:
    """The whole expression `alert` should have (as YAML's folded scalar reads it back: lines joined by spaces)."""
    return " ".join(part.strip() for part in [*condition_lines(condition), *hold(alert, condition)])


def rewrite(text: str) -> str:
    """alerts.yml's `text` with every twin's ``expr`` rebuilt from its condition and its hold (a twin no longer
    held loses its hold), and the recording group of their conditions rebuilt at its end. Everything else is kept
    as written; a condition written as a block scalar keeps its lines, one written as a plain or quoted scalar is
    read as YAML reads it (its comment and quotes are not PromQL). Refused (`ValueError`): a condition with a PromQL
    comment (joined with its hold it would comment the hold out), and two held rules of one name."""
    lines = _without_group(text.splitlines())
    holds = twin_sections()
    out: list[str] = []
    conditions: dict[str, list[str]] = {}
    i = 0
    alert = None
    while i < len(lines):
        line = lines[i]
        found = re.match(r"\s*- alert: (\S+)", line)
        if found:
            alert = found.group(1)
        key = re.match(r"(\s*)expr:(.*)$", line)
        if not (key and alert is not None):
            out.append(line)
            i += 1
            continue
        indent, rest = key.group(1), key.group(2).strip()
        start = i
        i += 1
        while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > len(indent)):
            i += 1
        body = lines[start + 1:i]
        value = yaml.safe_load("\n".join([f"expr: {rest}", *(x[len(indent):] for x in body)]))["expr"]
        if alert not in holds and MARKER not in value:
            out.extend(lines[start:i])
            alert = None
            continue
        block = rest in (">-", ">", "|", "|-")
        condition = condition_of("\n".join(_dedent(body)) if block else value)
        commented = [x for x in condition_lines(condition) if _has_comment(x)]
        if commented:
            raise ValueError(f"{alert}: a PromQL comment in its condition ({commented[0].strip()!r}); "
                             "write it as a YAML comment above `expr:`")
        held = [*condition_lines(condition), *(hold(alert, condition) if alert in holds else [])]
        if alert in holds:
            if alert in conditions:  # its hold reads ALERTS{alertname} and one recorded condition
                raise ValueError(f"{alert}: two rules of that name; a hold cannot tell their alerts apart")
            conditions[alert] = condition_lines(condition)
        out.append(f"{indent}expr: >-")
        out.extend(f"{indent}  {x}" for x in held)
        alert = None
    while out and not out[-1].strip():
        out.pop()
    out += ["", *_GROUP_HEAD]
    for name, condition in conditions.items():
        out += [f"      - record: {recorded(name)}", "        expr: >-", *(f"          {x}" for x in condition)]
    return "\n".join(out) + "\n"


def _has_comment(line: str) -> bool:
    """Whether a PromQL line has a ``#`` comment (one outside its quoted strings)."""
    quote = None
    escaped = False
    for ch in line:
        if escaped:
            escaped = False
        elif ch == "\\" and quote is not None:
            escaped = True
        elif quote is not None:
            quote = None if ch == quote else quote
        elif ch in "\"'`":
            quote = ch
        elif ch == "#":
            return True
    return False


def _without_group(lines: list[str]) -> list[str]:
    """`lines` without the generated recording group (its comment included), whatever follows it."""
    if _GROUP_HEAD[1] not in lines:
        return lines
    start = lines.index(_GROUP_HEAD[1]) - 1
    end = start + len(_GROUP_HEAD)
    while end < len(lines) and not re.match(r"  (- name:|# -{8})", lines[end]):
        end += 1
    return lines[:start] + lines[end:]


def _dedent(body: list[str]) -> list[str]:
    strip = min((len(x) - len(x.lstrip()) for x in body if x.strip()), default=0)
    return [x[strip:] for x in body]


def main() -> int:
    text = ALERTS_YML.read_text()
    try:
        new = rewrite(text)
    except ValueError as e:
        print(f"{ALERTS_YML}: {e}", file=sys.stderr)
        return 2
    if new != text:
        ALERTS_YML.write_text(new)
        print(f"rewrote {ALERTS_YML}")
    else:
        print(f"{ALERTS_YML} already holds every twin")
    return 0


if __name__ == "__main__":
    sys.exit(main())
