"""What counts as a secret, decided once.

The configuration's redaction, the repr of the Kafka settings, the error messages that must not echo a bad
password back, and the Kafka clients' log filter all ask the same question ("may this value be shown?"), so they
ask it here: a setting added to librdkafka tomorrow under a secret-sounding name is hidden everywhere at once.
Matching is by key *name*, never by value, because the value is exactly what must not be looked at in a log.

Text the monitor did not write (a client library's error message, a traceback) has no key names to go by: the
`Scrubber` hunts the configured secret values themselves in it, as a second line behind the names.
"""

from __future__ import annotations

import json
import logging
import re
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

__all__ = ["NOT_HUNTED_KEYS", "REDACTED", "SECRET_KEY_MARKERS", "ScrubLogs", "Scrubber", "is_secret_key"]

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


NOT_HUNTED_KEYS: Final = frozenset({"sasl.oauthbearer.method", "sasl.oauthbearer.scope", "sasl.oauthbearer.grant.type",
                                    "sasl.oauthbearer.token.endpoint.url", "sasl.oauthbearer.assertion.algorithm",
                                    "sasl.oauthbearer.client.id"})
"""Secret-named settings whose values are not hunted in free text (`Scrubber`): they describe how to log in
(``oidc``, ``default``, a URL, ``RS256``, a client's public id), so hiding them would garble error messages
on-call needs while hiding nothing. They stay ``***`` by name wherever a configuration is shown."""

MIN_HUNTED_LENGTH: Final = 4
"""Shorter values are not hunted in free text: ``ab`` would blank every word holding it, and a secret that
short is guessable anyway."""

_QUOTED_SETTING = re.compile(r"""([\w.\-]+)\s*=\s*(?:"([^"]*)"|'([^']*)')""")


@dataclass(frozen=True)
class Scrubber:
    """Replaces every configured secret value found in a text by ``***``: for error messages from client libraries
    (which may quote what they were given) before they reach a snapshot, an alert, the history or a log.

    Each value is hunted as written and as the usual escapings would print it (``repr``, JSON, URL-encoding),
    longest first so a value holding another is hidden whole. A JAAS line (``sasl.jaas.config``) is also hunted
    by its secret-named quoted parts (``password="..."``), which an error may quote alone. Its repr never shows
    a value: a Scrubber is a bag of secrets."""

    needles: tuple[str, ...] = ()

    @classmethod
    def of(cls, secrets: Iterable[str]) -> Scrubber:
        forms: set[str] = set()
        for secret in secrets:
            parts = [secret] + [a or b for key, a, b in _QUOTED_SETTING.findall(secret) if is_secret_key(key)]
            for part in parts:
                if len(part) < MIN_HUNTED_LENGTH:
                    continue
                forms.update((part, repr(part)[1:-1], json.dumps(part)[1:-1], urllib.parse.quote(part, safe=""),
                              urllib.parse.quote_plus(part)))
        return cls(tuple(sorted((f for f in forms if len(f) >= MIN_HUNTED_LENGTH), key=lambda f: (-len(f), f))))

    def __call__(self, text: str) -> str:
        for needle in self.needles:
            if needle in text:
                text = text.replace(needle, REDACTED)
        return text

    def __bool__(self) -> bool:
        return bool(self.needles)

    def __repr__(self) -> str:
        return f"Scrubber({len(self.needles)} forms)"


class ScrubLogs(logging.Filter):
    """A log handler's filter passing each record on with the `Scrubber`'s secrets hidden: its message (formatted
    here, so a secret passed as an argument is caught), its traceback and its stack. One filter per handler sees
    every logger's records, the client libraries' included."""

    def __init__(self, scrub: Scrubber) -> None:
        super().__init__()
        self.scrub = scrub

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.scrub:
            return True
        try:
            message = record.getMessage()
        except Exception:  # arguments that do not fit the format: logging's own report would print them raw
            message = f"(log message and arguments that do not fit) {record.msg!r} % {record.args!r}"
        clean = self.scrub(message)
        if clean != message or record.args:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.scrub(record.exc_text)
        if record.stack_info:
            record.stack_info = self.scrub(record.stack_info)
        return True
