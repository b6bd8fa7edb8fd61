"""One poll's rules as the poller runs them: pure evaluation, then the timers, then what fires.

The rules (`collectors.alerting.rules`) are pure; the timers of timed conditions ("under-replicated for
longer than the grace period", "seen on two polls") are the poller's memory, kept in
`ClusterState.condition_since` so that a checkpoint carries them across a restart. This module is the one
place that advances them.
"""

from __future__ import annotations

from collections.abc import Iterable

from collectors.alerting.catalogue import TIMED_RULES, rules_of
from collectors.alerting.rules import Candidate, Held, evaluate, families_evaluated
from collectors.alerting.thresholds import Thresholds
from collectors.model.records import ClusterSnapshot
from collectors.model.state import ClusterState


def firing(candidates: Iterable[Candidate]) -> list[Candidate]:
    """The candidates that are alerts (not pending)."""
    return [c for c in candidates if not c.pending]


def advance_timers(held: Held, candidates: Iterable[Candidate], families: Iterable[str], now: float
                   ) -> dict[tuple[str, str], float]:
    """The timers after this poll: a timed condition reported now keeps its start (or starts now); one not
    reported stopped holding and is dropped — unless its rule was not evaluated at all this poll (the cluster
    was unreachable), in which case nothing is known and the timer is kept as it was."""
    judged = set().union(*(rules_of(f) for f in families))
    out = {k: since for k, since in held.items() if k[0] not in judged}
    for c in candidates:
        if c.rule in TIMED_RULES:
            key = (c.rule, c.subject)
            out[key] = held.get(key, now)
    return out




def judge(snap: ClusterSnapshot, state: ClusterState, thresholds: Thresholds, now: float) -> list[Candidate]:
    """Evaluate the rules on this poll's snapshot, advance the timers kept in `state`, return the alerts that
    fire (pending conditions left out)."""
    held = state.condition_since
    candidates = evaluate(snap, state, held, thresholds, now)
    state.condition_since = advance_timers(held, candidates, families_evaluated(snap), now)
    return firing(candidates)
