"""The ``thresholds:`` section of the configuration: when a symptom becomes an alert.

It lives beside the rules it tunes, so whoever changes what a rule means sees, in the same room, the number
that decides when it fires and the default an operator gets without writing one. ``collectors.config``
composes it into the whole configuration; it knows nothing of YAML.
"""

from __future__ import annotations

from pydantic import Field, ValidationInfo, field_validator

from collectors.model.settings import DAY, MAX_DURATION_S, MAX_OFFSET_DELTA, Count, Number, Seconds, StrictModel

__all__ = ["Thresholds"]


class Thresholds(StrictModel):
    """When a symptom becomes an alert. Durations in seconds; counts are occurrences, messages or records."""

    under_replicated_grace_s: Seconds = Field(60.0, ge=0, le=MAX_DURATION_S)
    """A partition must stay under-replicated this long before alerting; rolling restarts cause short dips."""
    isr_flap_changes: Count = Field(4, ge=1, le=1_000_000)
    """ISR shrink/expand events within isr_flap_window_s that count as flapping (a sick or overloaded follower)."""
    isr_flap_window_s: Seconds = Field(600.0, gt=0, le=MAX_DURATION_S)
    """Sliding window for isr_flap_changes."""
    preferred_leader_imbalance_ratio: Number = Field(0.2, ge=0, le=1)
    """Alert when more than this share of a cluster's partitions is led by a broker other than the preferred one:
    leadership has piled up on some brokers (typically after a restart without preferred-leader election)."""
    lag_window_points: Count = Field(10, ge=2, le=10_000)
    """Lag samples kept per partition for Burrow-style evaluation (a trend needs at least two)."""
    lag_allowed_messages: Count = Field(0, ge=0, le=MAX_OFFSET_DELTA)
    """Lag at or below this is OK whatever its trend (e.g. a consumer that commits every N messages)."""
    lag_min_points: Count = Field(3, ge=1, le=10_000)
    """Samples needed before a lag status is judged at all; at most lag_window_points."""
    consumer_stop_after_s: Seconds = Field(300.0, ge=0, le=MAX_DURATION_S)
    """No commit for this long while lag is non-zero means the consumer stopped (STOP), not just slow."""
    lag_seconds_slo: Seconds = Field(300.0, ge=0, le=MAX_DURATION_S)
    """Time lag (age of the oldest unconsumed message) above this breaches the consumer SLO."""
    retention_risk_s: Seconds = Field(3600.0, ge=0, le=MAX_DURATION_S)
    """Alert when a consumer's position will fall off the log start within this long: data loss ahead."""
    txn_prepare_stuck_s: Seconds = Field(60.0, ge=0, le=MAX_DURATION_S)
    """A transaction in PrepareCommit/PrepareAbort longer than this is stuck (markers not written)."""
    txn_timeout_grace_s: Seconds = Field(30.0, ge=0, le=MAX_DURATION_S)
    """Extra time past a transaction's own timeout before calling it hanging (the coordinator aborts lazily)."""
    lso_gap_messages: Count = Field(10_000, ge=0, le=MAX_OFFSET_DELTA)
    """High watermark minus last stable offset above this means read_committed consumers are blocked."""
    producer_epoch_bumps: Count = Field(3, ge=1, le=1_000_000)
    """Producer epoch increases within producer_epoch_window_s that indicate a crash-looping or fenced producer."""
    producer_epoch_window_s: Seconds = Field(3600.0, gt=0, le=MAX_DURATION_S)
    """Sliding window for producer_epoch_bumps."""
    zk_follower_behind_s: Seconds = Field(30.0, ge=0, le=MAX_DURATION_S)
    """A ZooKeeper follower out of sync for this long is an alert (one more failure away from losing quorum)."""
    zk_quorum_lost_grace_s: Seconds = Field(30.0, ge=0, le=MAX_DURATION_S)
    """Fewer than a majority of ZooKeeper servers serving for this long, and over two polls, before zk_quorum_lost
    pages: while the ensemble elects a leader every surviving server answers "not currently serving" for a moment,
    and a poll that lands then is no lost quorum (the election is zk_leader_election, info)."""
    kraft_voter_lag_records: Count = Field(1000, ge=0, le=MAX_OFFSET_DELTA)
    """A KRaft voter this many metadata records behind the leader is lagging."""
    kraft_observer_lag_s: Seconds = Field(30.0, gt=0, le=MAX_DURATION_S)
    """A broker (a KRaft observer) whose metadata log last caught up with the leader's this long before the leader's
    latest time is lagging: it answers clients with metadata that old. A broker fetches all the time (the leader
    writes a record every `metadata.max.idle.interval.ms`, 500 ms), so one caught up seconds ago is healthy; 30 s
    is `replica.lag.time.max.ms`, the time Kafka gives a partition follower."""
    broker_metadata_lag_s: Seconds = Field(30.0, gt=0, le=MAX_DURATION_S)
    """Outside KRaft: a broker that answers Metadata with a leader epoch another answer had replaced at least this
    long before is lagging (`collectors.model.metadata_lag`). The controller pushes a change to every broker within a
    second or so; under a storm of changes (a broker of thousands of partitions restarting) a few seconds; 30 s is
    `replica.lag.time.max.ms`, as for `kraft_observer_lag_s`."""
    group_abandoned_after_s: Seconds = Field(7 * DAY, gt=0, le=MAX_DURATION_S)
    """A group without members and without a moving commit for this long is ABANDONED (info, never paging, hidden
    from the default dashboard views) until it comes back; counted from the monitor's first sight of it
    (`collectors.model.activity`)."""
    stale_after_polls: Count = Field(2, ge=1, le=1000)
    """Data not refreshed for this many polls is marked stale instead of being reported as current."""
    incident_hold_down_s: Seconds = Field(300.0, ge=0, le=MAX_DURATION_S)
    """A cause that comes back within this long of its incident resolving continues that incident (same id)
    instead of opening a new one: a flapping cause is one incident, not one per flap."""
    loss_alert_hold_s: Seconds = Field(3600.0, gt=0, le=MAX_DURATION_S)
    """How long a loss alert (`data_truncated`, `unclean_election`, `offset_beyond_log_end`, `zk_zxid_regressed`)
    stays open after the loss was seen: it is an event (nothing to fix would resolve it), shown and paged for
    this long; the ledger keeps it for good."""

    @field_validator("lag_min_points")
    @classmethod
    def _check_min_points(cls, value: int, info: ValidationInfo) -> int:
        window = info.data.get("lag_window_points")
        if isinstance(window, int) and value > window:
            raise ValueError(f"must not exceed lag_window_points ({window}); more points than are kept never arrive")
        return value
