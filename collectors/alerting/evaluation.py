"""One poll's rules as the poller runs them: pure evaluation, then the timers, then what fires.

The rules (`collectors.alerting.rules`) are pure; the timers of timed conditions ("under-replicated for
longer than the grace period", "seen on two polls") are the poller's memory, kept in
`ClusterState.condition_since` so that a checkpoint carries them across a restart. This module is the one
place that advances them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from collectors.alerting.catalogue import TIMED_RULES, Kept, is_kept, kept_over_stale, rules_of
from collectors.alerting.rules import (
    CONTROLLER_MISMATCH_GRACE_S,
    KRAFT_NO_LEADER_GRACE_S,
    Candidate,
    Held,
    evaluate,
    families_evaluated,
)
from collectors.alerting.thresholds import Thresholds
from collectors.model.records import AlertRecord, ClusterSnapshot
from collectors.model.state import ClusterState


def firing(candidates: Iterable[Candidate]) -> list[Candidate]:
    """The candidates that are alerts (not pending)."""
    return [c for c in candidates if not c.pending]


def advance_timers(held: Held, candidates: Iterable[Candidate], families: Iterable[str], now: float,
                   kept: frozenset[str] | Kept = frozenset()) -> dict[tuple[str, str], float]:
    """The timers after this poll: a timed condition reported now keeps its start (or starts now); one not
    reported stopped holding and is dropped — unless nothing is known of it this poll, in which case the timer is
    kept as it was: its rule was not evaluated at all (the cluster was unreachable), or its (rule, subject) is one
    of `kept`, whose open alerts are kept over this poll's stale sections (`kept_over_stale`; rule names: every
    subject). Dropping those would resolve the kept alert at the next good poll (its condition "pending" again)
    and open it anew after the grace."""
    judged = set().union(*(rules_of(f) for f in families))
    out = {k: since for k, since in held.items() if k[0] not in judged or is_kept(kept, k[0], k[1])}
    for c in candidates:
        if c.rule in TIMED_RULES:
            key = (c.rule, c.subject)
            out[key] = held.get(key, now)
    return out


GRACE_S: dict[str, Callable[[Thresholds], float]] = {
    "under_replicated": lambda th: th.under_replicated_grace_s,
    "preferred_leader_imbalance": lambda th: th.under_replicated_grace_s,
    "zk_follower_behind": lambda th: th.zk_follower_behind_s,
    "zk_quorum_lost": lambda th: th.zk_quorum_lost_grace_s,
    "controller_mismatch": lambda th: CONTROLLER_MISMATCH_GRACE_S,
    "kraft_no_leader": lambda th: KRAFT_NO_LEADER_GRACE_S,
    "kraft_observer_lagging": lambda th: th.kraft_observer_lag_s,  # its age is its grace; the timer remembers it
    "broker_metadata_lagging": lambda th: th.broker_metadata_lag_s,  # so is its lower bound
    "zk_isr_mismatch": lambda th: 0.0,  # fires on the second poll that sees it
}
"""How long each timed rule's condition holds before its alert fires (`collectors.alerting.rules`); a test keeps
its keys equal to `TIMED_RULES`."""


def seed_timers(held: dict[tuple[str, str], float], alerts: Iterable[AlertRecord], thresholds: Thresholds) -> None:
    """Give the open alerts of timed rules carried on from elsewhere (a history taken over without a checkpoint,
    `AlertTracker.adopt`) the timer their firing implies: the condition held for the grace when the alert first
    fired, so it started `GRACE_S` before ``first_seen`` — or earlier, if `held` says so. Carrying an alert on says
    its condition went on holding; without this the condition is "pending" at the next poll (no timer, or one our
    own polls started since), and the carried alert resolves, then opens again after the grace."""
    for a in alerts:
        if a.rule in TIMED_RULES:
            key, since = (a.rule, a.subject), a.first_seen - GRACE_S.get(a.rule, lambda th: 0.0)(thresholds)
            held[key] = min(held.get(key, since), since)


def judge(snap: ClusterSnapshot, state: ClusterState, thresholds: Thresholds, now: float,
          kept: Kept | None = None) -> list[Candidate]:
    """Evaluate the rules on this poll's snapshot, advance the timers kept in `state`, return the alerts that
    fire (pending conditions left out). `kept`: `kept_over_stale(snap)`, when the caller has it already."""
    held = state.condition_since
    candidates = evaluate(snap, state, held, thresholds, now)
    state.condition_since = advance_timers(held, candidates, families_evaluated(snap), now,
                                           kept_over_stale(snap) if kept is None else kept)
    return firing(candidates)
