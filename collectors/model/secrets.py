"""What counts as a secret, decided once.

The configuration's redaction, the repr of the Kafka settings, the error messages that must not echo a bad
password back, and the Kafka clients' log filter all ask the same question ("may this value be shown?"), so they
ask it here: a setting added to librdkafka tomorrow under a secret-sounding name is hidden everywhere at once.
Matching is by key *name*, never by value, because the value is exactly what must not be looked at in a log.
"""

from __future__ import annotations

from typing import Final

__all__ = ["REDACTED", "SECRET_KEY_MARKERS", "is_secret_key"]

REDACTED: Final = "***"
"""What a secret value is replaced with wherever it would be shown."""

SECRET_KEY_MARKERS: Final = ("password", "secret", "sasl.jaas.config", "sasl.oauthbearer", "ssl.key.pem", "token",
                               "credential", "api_key", "apikey")
"""Substrings of setting names whose values are secret (librdkafka's own names, our ``password`` fields, and the
names a plugin's or a custom property's secret goes by: ``token``, ``credential``, ``api_key``; before the
fifty-first session those were shown)."""


def is_secret_key(key: str) -> bool:
    """True for setting names whose values must never reach a log (case-insensitive substring match)."""
    lowered = key.lower()
    return any(marker in lowered for marker in SECRET_KEY_MARKERS)
