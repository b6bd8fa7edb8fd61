"""Regular expressions from the configuration: checked once at load, matched the way the peers match them.

Filters (`clusters[].filters`) and policies (`policies:`) name topics and groups by regular expression. Both
use this one type and this one matching rule, so "does `^payments-` match `payments-eu`" has one answer:

* Python `re` syntax, matched with ``re.search``: unanchored, as Burrow's ``group-allowlist``, kafka_exporter's
  ``--group.filter`` and kminion's group filters match (Go's ``regexp.MatchString``). Anchor with ``^`` and
  ``$`` for a whole name: ``^payments$`` matches ``payments`` only, ``payments`` also matches
  ``payments-dlq``.
* A bad expression is a configuration error naming the pattern and what is wrong with it; the loader adds the
  file's line.

Group names repeat every poll, so `NameFilter` remembers its answers (bounded: a fleet that churns through
millions of console-consumer names does not grow it without limit).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Annotated

from pydantic import AfterValidator

__all__ = ["NameFilter", "Pattern", "TopicFilter", "compile_patterns"]

MAX_PATTERN_LENGTH = 1000
CACHE_LIMIT = 200_000  # names remembered per filter before the memory is dropped and rebuilt


def _check(value: str) -> str:
    if not value:
        raise ValueError("an empty pattern matches every name; write '.*' if that is meant")
    if len(value) > MAX_PATTERN_LENGTH:
        raise ValueError(f"pattern longer than {MAX_PATTERN_LENGTH} characters")
    try:
        re.compile(value)
    except re.error as e:
        raise ValueError(f"not a regular expression: {value!r}: {e}") from None
    return value


Pattern = Annotated[str, AfterValidator(_check)]
"""A regular expression from the configuration (validated; see the module docstring for how it matches)."""

TopicFilter = Callable[[str, bool], bool]
"""(topic name, is internal) -> watch it."""


class _AnyOf:
    """`patterns` searched one by one: for the patterns that cannot be joined into one alternation (a global
    flag such as ``(?i)`` is only allowed at the start of a whole expression; a backreference would point at
    another pattern's group, see `_refers_to_group`)."""

    __slots__ = ("_each",)

    def __init__(self, patterns: Sequence[str | re.Pattern[str]]) -> None:
        self._each = [p if isinstance(p, re.Pattern) else re.compile(p) for p in patterns]

    def search(self, name: str) -> re.Match[str] | None:
        for p in self._each:
            m = p.search(name)
            if m is not None:
                return m
        return None


# \1..\99, (?P=name) and (?(1)yes|no) / (?(name)yes|no). Conservative: an escaped backslash before a digit
# (``\\1``) also counts; such a pattern is only searched on its own, which is slower, never wrong.
_GROUP_REFERENCE = re.compile(r"\\[1-9]|\(\?P=|\(\?\(")


def _refers_to_group(pattern: str) -> bool:
    """Whether `pattern` refers back to one of its groups. Joined into an alternation, its groups are
    renumbered (after those of the patterns before it), so ``\\1`` would name another pattern's group."""
    return _GROUP_REFERENCE.search(pattern) is not None


def _join(patterns: Sequence[str]) -> list[re.Pattern[str]]:
    try:
        return [re.compile("|".join(f"(?:{p})" for p in patterns))]
    except re.error:
        return [re.compile(p) for p in patterns]


def compile_patterns(patterns: Sequence[str]) -> re.Pattern[str] | _AnyOf | None:
    """One compiled alternation of `patterns` (None for none): one search instead of one per pattern. A
    pattern with a backreference (or one the alternation cannot hold) is searched on its own after it."""
    if not patterns:
        return None
    joinable = [p for p in patterns if not _refers_to_group(p)]
    alone = [re.compile(p) for p in patterns if _refers_to_group(p)]
    each = (_join(joinable) if joinable else []) + alone
    return each[0] if len(each) == 1 else _AnyOf(each)


class NameFilter:
    """Which names to watch: those matching an allow pattern (every name when there is none) and no deny
    pattern. Deny wins. Answers are remembered per name."""

    __slots__ = ("_allow", "_deny", "_seen", "allow", "deny")

    def __init__(self, allow: Sequence[str] = (), deny: Sequence[str] = ()) -> None:
        self.allow, self.deny = tuple(allow), tuple(deny)
        self._allow = compile_patterns(self.allow)
        self._deny = compile_patterns(self.deny)
        self._seen: dict[str, bool] = {}

    @property
    def passes_everything(self) -> bool:
        return self._allow is None and self._deny is None

    def __call__(self, name: str) -> bool:
        seen = self._seen.get(name)
        if seen is not None:
            return seen
        ok = (self._allow is None or self._allow.search(name) is not None) and (
            self._deny is None or self._deny.search(name) is None)
        if len(self._seen) >= CACHE_LIMIT:
            self._seen.clear()
        self._seen[name] = ok
        return ok

    def denies(self, name: str) -> bool:
        """Whether a deny pattern matches (the allow list aside)."""
        return self._deny is not None and self._deny.search(name) is not None

    def why_not(self, name: str) -> str | None:
        """None when `name` passes; else which rule left it out, in words (for `explain`)."""
        if self._deny is not None:
            for p in self.deny:
                if re.search(p, name):
                    return f"denied by {p!r}"
        if self._allow is not None and self._allow.search(name) is None:
            return f"matches no allow pattern ({', '.join(repr(p) for p in self.allow)})"
        return None
