"""Is anybody running this consumer group? Page on what you saw happen, not on the state you found.

A real cluster holds groups nobody has run for months and console consumers left behind: Empty, thousands of
messages behind, never moving. Judged like a running consumer they are STOP, critical, forever (Burrow's most
filed complaint). What the monitor can tell them by is what it has *seen*:

* **active**: seen with members, or with a committed offset that moved, since the monitor started watching (and
  within `abandoned_after_s`). Judged as usual: a group seen consuming that then goes Empty is STOP and pages.
* **inactive**: first seen without members and never since with members or a moving commit. What it lags is
  not news: INACTIVE, info, never paging.
* **abandoned**: no members and no moving commit for `abandoned_after_s` (default 7 days), whatever it was
  before: ABANDONED, info, hidden from the default dashboard views, never paging.

A group that comes back (members, or a commit that moves) is active again at once. The memory (`GroupLife`) is
kept in checkpoints, so a restart neither forgets a group it saw consuming nor restarts the 7-day clock.

What the monitor cannot know: Kafka's OffsetFetch carries no commit time (only the offset), so the age of a
group's last commit before the monitor first saw it is unknown. A group found Empty may have stopped a minute
ago or a year ago; the monitor does not guess, and only starts the clock at first sight. (Kafka does not expose
the commit timestamps it stores in ``__consumer_offsets`` through the admin API; reading that topic would be
a consumer of every group's offsets, which a read-only monitor should not be.)
"""

from __future__ import annotations

from dataclasses import dataclass

from collectors.model.vocabulary import ABANDONED_GROUP, ACTIVE_GROUP, INACTIVE_GROUP

__all__ = ["GroupLife", "classify"]


@dataclass(slots=True)
class GroupLife:
    """What the monitor has seen of one group."""

    first_seen: float
    last_active: float | None = None  # last poll with members or a moving commit; None: never since first_seen


def classify(life: GroupLife | None, members: int, commit_moved: bool, now: float, abandoned_after_s: float
             ) -> tuple[GroupLife, str]:
    """This poll's activity of a group, and its updated memory (a new one at first sight)."""
    if life is None:
        life = GroupLife(first_seen=now)
        if members > 0:  # a moving commit cannot be told at first sight: there is no earlier one
            life.last_active = now
    elif members > 0 or commit_moved:
        life.last_active = now
    since = life.last_active if life.last_active is not None else life.first_seen
    if life.last_active != now and now - since >= abandoned_after_s:
        return life, ABANDONED_GROUP
    if life.last_active is None:
        return life, INACTIVE_GROUP
    return life, ACTIVE_GROUP
