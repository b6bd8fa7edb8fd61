"""The whole configuration: the top level of the YAML file, composed of the sections the rooms define.

Each section lives beside the code it configures (clusters in ``collectors.sources``, thresholds in
``collectors.alerting``, exporter and history in ``collectors.outputs``); what is left here is what belongs to
the monitor as a whole: the poll cadence, the request budget, where state lives, the log level.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from collectors.alerting.thresholds import Thresholds
from collectors.model.policy import PolicyRule
from collectors.model.settings import DAY, ConfigPath, Count, Seconds, StrictModel
from collectors.outputs.settings import ExporterConfig, HistoryConfig
from collectors.sources.settings import ClusterConfig

__all__ = ["MonitorConfig"]


class MonitorConfig(StrictModel):
    """The whole monitor configuration (the top level of the YAML file)."""

    clusters: list[ClusterConfig] = Field(min_length=1)
    """Clusters to watch; names must be unique (ignoring case, since they become directory names)."""
    poll_interval_s: Seconds = Field(30.0, gt=0, le=3600)
    """Seconds between polls of each cluster."""
    request_timeout_s: Seconds = Field(10.0, ge=1, le=300)
    """Timeout of a single Kafka/ZooKeeper request; librdkafka accepts at most 300 s."""
    max_concurrent_requests: Count = Field(16, ge=1, le=1024)
    """The monitor's Kafka admin requests in flight at once, across all clusters, so a poll cannot swamp a
    struggling cluster (collectors/sources/limiter.py). Not counted: the clients' own connection housekeeping
    (ApiVersions, metadata refreshes) and ZooKeeper reads, which have their own window of 1000 per session."""
    thresholds: Thresholds = Field(default_factory=Thresholds)
    """Alert thresholds; every one has a default."""
    policies: list[PolicyRule] = Field(default_factory=list)
    """Per-group and per-topic refinements of the thresholds, owner teams, batch schedules; the first rule that
    matches a group (or topic) wins (`collectors.model.policy`). ``python -m collectors.config explain`` shows
    what applies to a name."""
    exporter: ExporterConfig = Field(default_factory=ExporterConfig)
    """Prometheus endpoint."""
    history: HistoryConfig = Field(default_factory=HistoryConfig)
    """Parquet history."""
    state_dir: ConfigPath = Path("data/state")
    """Where state that must survive restarts lives (lag windows, flap counters); relative to the working directory."""
    checkpoint_interval_s: Seconds = Field(60.0, gt=0, le=DAY)
    """How often the pollers' memory (lag windows, offset histories, open alerts) is saved under state_dir;
    a restart resumes from it. Also saved on a clean stop, and at once after a poll that proved a truncation or an
    unclean election or counted an epoch rise on a Transaction V2 cluster (`collectors.runtime.sinks`)."""
    checkpoint_max_age_s: Seconds = Field(3600.0, ge=0, le=30 * DAY)
    """A checkpoint older than this is not resumed (alerts open then would span the whole outage), except its loss
    evidence, up to a week (leader epochs and ZooKeeper zxids: proof across any gap); 0 never resumes anything."""
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    """Logging level (case-insensitive in the file)."""

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_level(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _unique_names(self) -> MonitorConfig:
        """Cluster names name files and metric labels, compared ignoring case. Each later cluster of a name already
        taken is placed at its own name (its line): a plain ValueError would be reported at ``clusters:``."""
        first: dict[str, int] = {}
        problems = []
        for i, cluster in enumerate(self.clusters):
            j = first.setdefault(cluster.name.casefold(), i)
            if j != i:
                taken = self.clusters[j].name
                how = "" if taken == cluster.name else " (names are compared ignoring case)"
                problems.append(InitErrorDetails(
                    type=PydanticCustomError("value_error", "clusters[{j}] is named {taken} too{how}",
                                             {"j": j, "taken": repr(taken), "how": how}),
                    loc=("clusters", i, "name"), input=cluster.name))
        if problems:
            raise ValidationError.from_exception_data(type(self).__name__, problems)
        return self

    @model_validator(mode="after")
    def _policy_windows_fit(self) -> MonitorConfig:
        """Each rule's lag_min_points against the window kept. A check across sections, so each problem is
        placed at the rule's own field: a plain ValueError here would be reported at the top level, on line 1."""
        window = self.thresholds.lag_window_points
        problems = [
            InitErrorDetails(type=PydanticCustomError("value_error", "must not exceed thresholds.lag_window_points "
                                                      "({window}): more points than are kept never arrive",
                                                      {"window": window}),
                             loc=("policies", i, "lag_min_points"), input=rule.lag_min_points)
            for i, rule in enumerate(self.policies) if rule.lag_min_points is not None and rule.lag_min_points > window
        ]
        if problems:
            raise ValidationError.from_exception_data(type(self).__name__, problems)
        return self
