"""The ``exporter:`` and ``history:`` sections of the configuration, beside the outputs they configure.

Defaults are chosen for a first run on a laptop (metrics on loopback only, roll-ups without per-partition
detail in history); ``collectors.config`` composes these sections into the whole configuration.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from collectors.model.settings import DAY, ConfigPath, Count, Seconds, StrictModel, is_host_name
from collectors.outputs.exceptions import DEFAULT_LIMIT

__all__ = ["ExporterConfig", "HistoryConfig"]


class ExporterConfig(StrictModel):
    """The Prometheus /metrics endpoint."""

    enabled: bool = True
    """Serve /metrics; off for --once runs or when only history is wanted."""
    host: str = "127.0.0.1"
    """Listen address; loopback by default so metrics are not exposed by accident. "0.0.0.0" or "::" for all."""
    port: Count = Field(9308, ge=1, le=65535)
    """Listen port (9308 is the port registered for Kafka exporters)."""
    granularity: Literal["exceptions", "partition", "topic"] = "exceptions"
    """Per-partition detail on /metrics. ``exceptions``: roll-ups per topic and group always, per-partition
    series only where something is not healthy (under one series a partition on a healthy cluster).
    ``partition``: every series for every partition. ``topic``: roll-ups only.
    See `collectors.outputs.exporter.GRANULARITIES`."""
    exceptions_limit: Count = Field(DEFAULT_LIMIT, ge=0)
    """With ``granularity: exceptions``, at most this many partitions, group partitions and open alerts (each)
    exported one by one per cluster, the most serious first (`collectors.outputs.exceptions`); the others are
    counted in ``kafka_monitor_detail_omitted``. Roll-ups, per-group series and incidents are never cut. 0: no
    limit. It bounds what a big outage adds to Prometheus (one broker down on 100,000 partitions: about 25,000
    partitions not healthy, a dozen series each)."""
    partition_series: bool | None = None
    """Deprecated (kept so older configs load): ``true`` means ``granularity: partition``, ``false``
    ``granularity: topic``, unless ``granularity`` is also given."""
    owner_labels: bool = False
    """Also export which member owns each group partition (``kafka_consumergroup_partition_owner`` with client
    id, host and member id). Off by default: member ids change at every rebalance, so each one is a new series;
    the snapshot, the dashboard and the API always have the owners."""

    @model_validator(mode="after")
    def _legacy_partition_series(self) -> ExporterConfig:
        if self.partition_series is not None and "granularity" not in self.model_fields_set:
            self.granularity = "partition" if self.partition_series else "topic"
        return self

    @field_validator("host")
    @classmethod
    def _check_host(cls, value: str) -> str:
        try:
            ipaddress.ip_address(value)
        except ValueError:
            if not is_host_name(value):
                raise ValueError("expected an IP address (e.g. 0.0.0.0, ::) or a host name, without brackets") from None
        return value


class HistoryConfig(StrictModel):
    """Snapshot history written as Parquet for the Spark report and the dashboard."""

    enabled: bool = True
    """Write history at all."""
    root: ConfigPath = Path("data/history")
    """Directory of the Parquet dataset (relative paths are relative to the working directory)."""
    flush_interval_s: Seconds = Field(60.0, gt=0, le=DAY)
    """Buffered rows are written at least this often; lower means less lost on a crash, more small files."""
    partition_detail: bool = False
    """Also store per-partition rows (large); by default only topic, group and cluster roll-ups."""
    retention_days: Count = Field(30, ge=1, le=3650)
    """Days of history kept; older files are deleted."""
    compact_min_files: Count = Field(10, ge=2, le=1_000_000)
    """Merge a day's small files once there are at least this many."""
