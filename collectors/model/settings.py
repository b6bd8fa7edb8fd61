"""The building blocks every configuration section is made of: a strict base model and bounded value types.

Each section (cluster and ZooKeeper settings in ``collectors.sources``, thresholds in ``collectors.alerting``,
exporter and history in ``collectors.outputs``) lives beside the code it configures, and ``collectors.config``
composes them and owns the YAML. They all need the same strictness, so it is defined once, here in the centre
that every room may import:

* `StrictModel` forbids unknown keys. A misspelt threshold (``lag_secods_slo``) that silently falls back to its
  default is worse than a start-up error, because the monitor would then look healthy while alerting on the
  wrong numbers.
* `Number`/`Seconds`/`Count` refuse booleans and binary (pydantic's lax mode would turn ``port: true`` into
  port 1), `ConfigPath` refuses empty and NUL-carrying paths, and the limits keep the arithmetic done on the
  values later far from overflow.
* `describe_value` is the one way a bad value is described in an error message: by type for containers and
  cut short otherwise, so a message never dumps a whole mapping (or a secret inside it) onto one line.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Final

from pydantic import BaseModel, BeforeValidator, ConfigDict

__all__ = [
    "DAY",
    "MAX_DURATION_S",
    "MAX_OFFSET_DELTA",
    "ConfigPath",
    "Count",
    "Number",
    "Seconds",
    "StrictModel",
    "describe_value",
    "has_control",
    "is_host_name",
    "shorten",
]

DAY: Final = 86_400.0
MAX_DURATION_S: Final = 30 * DAY
"""Upper bound of every duration: keeps time arithmetic downstream (timedelta, timestamps) far from overflow."""
MAX_OFFSET_DELTA: Final = 2**63 - 1
"""Upper bound of every offset count: Kafka offsets are int64."""


class StrictModel(BaseModel):
    """Shared settings: unknown keys are errors, NaN/inf are not numbers, assignments are re-validated.

    Attribute docstrings become field descriptions, so the documentation of a setting is written once, beside it.
    """

    model_config = ConfigDict(
        extra="forbid",
        allow_inf_nan=False,
        validate_assignment=True,
        use_attribute_docstrings=True,
    )


# --------------------------------------------------------------------------- value types


def _number(value: object) -> object:
    """Reject booleans and binary before pydantic's lax mode turns ``port: true`` into port 1."""
    if isinstance(value, bool):
        raise ValueError("expected a number, got true/false")
    if isinstance(value, bytes | bytearray):
        raise ValueError("expected a number, got binary data")
    return value


def _path(value: object) -> object:
    """Paths must be non-empty text: ``Path("")`` is the current directory, a NUL byte fails later on open()."""
    if isinstance(value, Path):
        value = str(value)
    if not isinstance(value, str):
        raise ValueError(f"expected a path, got {describe_value(value)}")
    if not value.strip():
        raise ValueError("expected a path, got an empty string")
    if "\x00" in value:
        raise ValueError("a path cannot contain a NUL character")
    return value


Number = Annotated[float, BeforeValidator(_number)]
Seconds = Number
Count = Annotated[int, BeforeValidator(_number)]
ConfigPath = Annotated[Path, BeforeValidator(_path)]

_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]*[A-Za-z0-9_])?"
_HOST_NAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*\.?")


def is_host_name(text: str) -> bool:
    """A DNS name (or dotted IPv4 address): dot-separated labels of letters, digits, '-' and '_', at most 253 long.

    Checked at start-up because a space or a stray character otherwise surfaces only as a resolver error in a
    client log, poll after poll. '_' is accepted although RFC 1123 excludes it, as resolvers do (Docker Compose
    names such as ``project_kafka_1``).
    """
    return len(text) <= 253 and _HOST_NAME.fullmatch(text) is not None


# --------------------------------------------------------------------------- describing bad values


def describe_value(value: object) -> str:
    """Short, safe description of a bad value: containers by type only, long text and huge numbers cut."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | Mapping):
        return "a mapping"
    if isinstance(value, list | tuple | set):
        return "a list"
    if isinstance(value, int):
        return f"integer {value}" if abs(value) < 10**30 else "a very large integer"
    if isinstance(value, float):
        return f"number {value!r}"
    if isinstance(value, str):
        return f"text {json.dumps(shorten(value), ensure_ascii=False)}"
    return type(value).__name__


def shorten(text: str, limit: int = 60) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis, so one bad value cannot flood a message."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def has_control(text: str) -> bool:
    """Control characters, surrogates and line/paragraph separators break logs, labels and file names."""
    return any(unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp") for ch in text)
