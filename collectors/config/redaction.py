"""The configuration as something safe to show: every secret value replaced by ``***``.

Secrets stay out of the file (``${VAR}`` substitution), and out of logs through this and through the models'
own ``repr()``/``str()`` (SecretStr, `KafkaSettings`), which never show them either. Problem messages ask
`is_secret_path` / `describe_safely` before they describe a bad value, so a message cannot quote one either.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, SecretStr

from collectors.model.secrets import NOT_HUNTED_KEYS, REDACTED, is_secret_key
from collectors.model.settings import describe_value

__all__ = ["describe_hidden", "describe_safely", "is_secret_path", "may_hold_secret", "redacted", "secret_values"]


def redacted(config: BaseModel) -> dict[str, Any]:
    """The whole config as a JSON-able dict with every secret value replaced by "***", for logs and --dump.

    Redacts by key name (see `is_secret_key`) anywhere in the tree, so the ZooKeeper password and any Kafka
    setting like sasl.password or sasl.jaas.config are covered, and so is any secret-named field added later.
    """
    return _redact(config.model_dump(mode="json"))


def _redact(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: (REDACTED if is_secret_key(str(k)) and v is not None else _redact(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact(v) for v in value]
    return value


def secret_values(config: BaseModel) -> list[str]:
    """Every secret text in a config (or a part of one, such as a cluster): SecretStr fields and text under
    secret-named keys, less the descriptive ones (`NOT_HUNTED_KEYS`). What a `Scrubber` hunts in error messages
    and logs, where no key name says what is secret."""
    found: list[str] = []

    def walk(value: Any, secret: bool) -> None:
        if isinstance(value, SecretStr):
            found.append(value.get_secret_value())
        elif isinstance(value, dict):
            for k, v in value.items():
                key = str(k)
                walk(v, secret or (is_secret_key(key) and key.lower() not in NOT_HUNTED_KEYS))
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v, secret)
        elif secret and isinstance(value, str) and value:
            found.append(value)

    walk(config.model_dump(mode="python"), False)
    return found


def is_secret_path(path: Iterable[object]) -> bool:
    """Whether the value at `path` (keys and indices from the top level) is secret: any key on the way is
    secret-named, so ``zookeeper.password`` counts and so does anything written below it."""
    return any(isinstance(part, str) and is_secret_key(part) for part in path)


def may_hold_secret(value: object, path: Iterable[object]) -> bool:
    """Whether a bad value must not be quoted: it sits at a secret path, or it is text naming a secret setting
    (``kafka:`` written as ``sasl.password:hunter2``, one space short of a mapping, is that text)."""
    return is_secret_path(path) or (isinstance(value, str) and is_secret_key(value))


def describe_hidden(value: object) -> str:
    """What kind of value it is, never the value: for a value that may be a secret (or a secret file's text)."""
    if isinstance(value, str):
        return "text (not quoted: it may be secret)"
    if isinstance(value, int) and not isinstance(value, bool):
        return "an integer (not quoted: it may be secret)"
    if isinstance(value, float):
        return "a number (not quoted: it may be secret)"
    return describe_value(value)  # null, true/false, "a mapping", "a list", a type name: nothing to hide


def describe_safely(value: object, path: Iterable[object]) -> str:
    """`describe_value`, or `describe_hidden` where `may_hold_secret` says the value must not be shown."""
    return describe_hidden(value) if may_hold_secret(value, path) else describe_value(value)
