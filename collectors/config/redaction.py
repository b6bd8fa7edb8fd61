"""The configuration as something safe to show: every secret value replaced by ``***``.

Secrets stay out of the file (``${VAR}`` substitution), and out of logs through this and through the models'
own ``repr()``/``str()`` (SecretStr, `KafkaSettings`), which never show them either.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from collectors.model.secrets import REDACTED, is_secret_key

__all__ = ["redacted"]


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
