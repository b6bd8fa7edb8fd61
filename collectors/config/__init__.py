"""Monitor configuration: the sections composed into one model, a YAML loader with environment overrides.

Why it is built this way:

* Every model forbids unknown keys (`collectors.model.settings.StrictModel`). A misspelt threshold
  (``lag_secods_slo``) that silently falls back to its default is worse than a start-up error, because the
  monitor would then look healthy while alerting on the wrong numbers.
* Every problem is reported as ``file:line: field.path: what was expected``, one line each, all at once, and
  never as a traceback (`problems`): the person reading it is editing YAML at 3 a.m., not debugging Python.
* Secrets stay out of the file (``${VAR}`` substitution, `loader`) and out of logs (`redacted`, and
  ``repr()``/``str()`` of the models never show them); what counts as a secret is `collectors.model.secrets`.
* Each section lives beside the code it configures, as in kminion: clusters, ZooKeeper and the client-setting
  translators in ``collectors.sources`` (librdkafka's own names passed through unchanged, so the documentation
  operators already know applies), thresholds in ``collectors.alerting``, exporter and history in
  ``collectors.outputs``. This package composes them (`models`) and owns the file format.

Load order: read file -> parse YAML -> substitute ``${VAR}`` in string values -> apply ``KMON__...``
environment overrides -> validate.

``python -m collectors.config FILE`` checks a file and prints it, redacted, as JSON (`cli`).

Everything importable from here before the sections moved still is, so ``from collectors.config import
Thresholds, load_config, confluent_settings`` keeps working.
"""

from __future__ import annotations

from collectors.alerting.thresholds import Thresholds
from collectors.config.cli import main
from collectors.config.loader import ENV_PREFIX, load_config, parse_config
from collectors.config.models import MonitorConfig
from collectors.config.problems import ConfigError, yaml_line_of
from collectors.config.redaction import redacted
from collectors.model.secrets import REDACTED, is_secret_key
from collectors.outputs.settings import ExporterConfig, HistoryConfig
from collectors.sources.client_settings import (
    CLIENT_ID,
    confluent_settings,
    kafka_python_settings,
    kafka_python_unsupported,
    kazoo_settings,
)
from collectors.sources.settings import ClusterConfig, KafkaSettings, ZooKeeperConfig

__all__ = [
    "CLIENT_ID",
    "ENV_PREFIX",
    "REDACTED",
    "ClusterConfig",
    "ConfigError",
    "ExporterConfig",
    "HistoryConfig",
    "KafkaSettings",
    "MonitorConfig",
    "Thresholds",
    "ZooKeeperConfig",
    "confluent_settings",
    "is_secret_key",
    "kafka_python_settings",
    "kafka_python_unsupported",
    "kazoo_settings",
    "load_config",
    "main",
    "parse_config",
    "redacted",
    "yaml_line_of",
]
