"""What Kafka publishes in ZooKeeper, read through a kazoo session: decoders and the pipelined read of a poll.

Kafka writes ``/brokers/ids``, ``/controller``, ``/controller_epoch`` and one
``/brokers/topics/<t>/partitions/<p>/state`` per partition.  `read_kafka_znodes`
reads them all against one deadline, with reads pipelined through kazoo's
async API in a bounded window instead of one blocking round trip per znode.
Measured on a 2-core box against a local 3-JVM ensemble: 20,000 partition
states take ~2.5-3 s pipelined against ~8 s one by one.  kazoo's connection
thread is then the limit (~7,000 reads/s; it builds a selector per socket
operation), so 100,000 partitions need the adapter's ``timeout_s`` at about
8 s; with less, the poll returns the states it got plus a stale "znodes"
section instead of hanging.

Decisions, written down so nobody has to rediscover them:

* A missing ``/brokers/ids`` almost always means a wrong chroot; it gives
  ``broker_ids=None``, an error line saying so, and a stale "znodes" section.
  A missing ``/controller`` or ``/controller_epoch`` is a normal transient
  state (no controller elected right now) and gives None silently.
* Malformed or missing znodes are skipped with an error line (at most
  ``MAX_ZNODE_ERRORS`` lines plus a count, so 100,000 broken znodes do not
  become 100,000 log lines).  Partition state znodes must carry all four of
  leader, leader_epoch, isr and controller_epoch, as Kafka's own decoder
  requires.
* Whether the session survives a failed read is decided here, where the
  failure is seen, and acted on by the adapter (see `read_kafka_znodes`).
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError, NoNodeError
from kazoo.interfaces import IAsyncResult
from kazoo.protocol.states import ZnodeStat

from collectors.model.observations import ZkObservation, ZnodePartitionState

__all__ = [
    "MAX_ZNODE_ERRORS",
    "PIPELINE_WINDOW",
    "STALE_ZNODES",
    "parse_broker_ids",
    "parse_controller",
    "parse_controller_epoch",
    "parse_partition_state",
    "read_kafka_znodes",
]

# In-flight async reads per session.  ZooKeeper's default globalOutstandingLimit
# is 1000: beyond it the server stops reading from clients, so a larger window
# buys nothing.  The window also bounds kazoo's wake-up socketpair (one byte per
# queued request), whose send() would block without timeout if it filled up.
PIPELINE_WINDOW: Final = 1000
MAX_ZNODE_ERRORS: Final = 20

STALE_ZNODES: Final = "znodes"
"""The stale section of the kazoo view."""

K = TypeVar("K")
T = TypeVar("T")


# --------------------------------------------------------------------------- decoders


def _is_int(value: object) -> bool:
    # JSON true/false decode to bool, which is an int subclass: a broker id of True is not 1.
    return isinstance(value, int) and not isinstance(value, bool)


def _json(data: bytes | None) -> object:
    if data is None:
        return None
    try:
        return json.loads(data)
    except (TypeError, ValueError):  # UnicodeDecodeError is a ValueError
        return None


def parse_partition_state(data: bytes | None) -> ZnodePartitionState | None:
    """Decode ``/brokers/topics/<t>/partitions/<p>/state``; None when malformed.

    Kafka's PartitionStateZNode decoder requires leader, leader_epoch, isr and
    controller_epoch, so a znode missing any of them is malformed here too —
    a half-decoded state would make an ISR comparison lie.  Other keys
    (version, leader_recovery_state) are ignored for forward compatibility.
    """
    obj = _json(data)
    if not isinstance(obj, dict):
        return None
    leader, leader_epoch, isr, controller_epoch = (obj.get(k) for k in
                                                   ("leader", "leader_epoch", "isr", "controller_epoch"))
    if not (_is_int(leader) and _is_int(leader_epoch) and _is_int(controller_epoch)):
        return None
    if not isinstance(isr, list) or not all(_is_int(b) for b in isr):
        return None
    return {"leader": leader, "leader_epoch": leader_epoch, "isr": list(isr), "controller_epoch": controller_epoch}


def parse_controller(data: bytes | None) -> int | None:
    """The ``brokerid`` of ``/controller`` (``{"version":2,"brokerid":1,"timestamp":"…"}``); None when malformed."""
    obj = _json(data)
    if not isinstance(obj, dict):
        return None
    broker = obj.get("brokerid")
    return broker if _is_int(broker) and broker >= 0 else None


def parse_controller_epoch(data: bytes | None) -> int | None:
    """``/controller_epoch`` holds a bare decimal integer; None when it does not."""
    if data is None:
        return None
    try:
        text = data.decode("ascii").strip()
    except UnicodeDecodeError:
        return None
    return int(text) if text.isdigit() else None


def parse_broker_ids(children: Iterable[str]) -> tuple[set[int], list[str]]:
    """Children of ``/brokers/ids`` as ints, plus the names that are not broker ids."""
    ids: set[int] = set()
    bad: list[str] = []
    for name in children:
        if name.isdigit():
            ids.add(int(name))
        else:
            bad.append(name)
    return ids, bad


# --------------------------------------------------------------------------- reading


class _DeadlineExceeded(Exception):
    pass


class _ErrorLines:
    """Error lines capped at ``limit`` plus a count, so a broken cluster does not flood the snapshot."""

    def __init__(self, limit: int = MAX_ZNODE_ERRORS) -> None:
        self.limit = limit
        self.lines: list[str] = []
        self.suppressed = 0

    def add(self, line: str) -> None:
        if len(self.lines) < self.limit:
            self.lines.append(line)
        else:
            self.suppressed += 1

    def drain_into(self, out: list[str]) -> None:
        out.extend(self.lines)
        if self.suppressed:
            out.append(f"znodes: {self.suppressed} more znode problems not listed")


class _Reads:
    """Settles kazoo async results against one deadline; pipelines many in a bounded window."""

    def __init__(self, deadline: float, window: int = PIPELINE_WINDOW) -> None:
        self.deadline = deadline
        self.window = window
        self.answered = 0

    def settle(self, result: IAsyncResult) -> Any:
        """The result's value; per-znode errors (NoNode, NoAuth) are returned, session errors raised.

        ``Any`` because the value's type is the request's: a list of child names, or ``(data, stat)``.
        """
        if not result.wait(max(0.0, self.deadline - time.monotonic())):
            raise _DeadlineExceeded()
        self.answered += 1
        try:
            return result.get(block=False)
        except (NoNodeError, NoAuthError) as e:
            return e

    def pipeline(self, keys: Iterable[K], submit: Callable[[K], IAsyncResult]) -> Iterator[tuple[K, Any]]:
        """Submit one read per key, keeping at most ``window`` in flight; yield (key, value) in order.

        ZooKeeper answers a session's requests in order, so waiting on the
        oldest in-flight read never waits behind a later one.
        """
        inflight: deque[tuple[K, IAsyncResult]] = deque()
        for key in keys:
            if len(inflight) >= self.window:
                k, r = inflight.popleft()
                yield k, self.settle(r)
            inflight.append((key, submit(key)))
        while inflight:
            k, r = inflight.popleft()
            yield k, self.settle(r)


def _decoded(value: tuple[bytes | None, ZnodeStat] | Exception, path: str, parse: Callable[[bytes | None], T | None],
             problems: _ErrorLines) -> T | None:
    """Parse a get() answer ``(data, stat)``; record why when it is missing or malformed."""
    if isinstance(value, NoNodeError):
        problems.add(f"znodes: {path} is missing (deleted while reading?)")
        return None
    if isinstance(value, Exception):
        problems.add(f"znodes: cannot read {path}: {type(value).__name__}")
        return None
    data = value[0]
    parsed = parse(data)
    if parsed is None:
        problems.add(f"znodes: malformed {path}: {bytes(data or b'')[:80]!r}")
    return parsed


def read_kafka_znodes(client: KazooClient, obs: ZkObservation, deadline: float, *, chroot: str | None,
                budget_s: float) -> bool:
    """Read Kafka's znodes into ``obs`` by ``deadline``; False when the session should be dropped.

    Problems end up in ``obs.errors`` and ``obs.stale_sections``; only a bug raises. The session is worth
    dropping when a read failed for a session reason, or when the deadline passed with no read answered (or
    the client disconnected). A deadline passed while answers were still flowing (a huge cluster on a slow
    link) keeps it: recreating it would only make the next poll slower. ``chroot`` only names paths in
    messages (the client already reads below it); ``budget_s`` is the deadline's length, for the messages.
    """
    reads = _Reads(deadline)
    problems = _ErrorLines()
    phase = "broker registrations"
    total = done = 0
    try:
        ids_r = client.get_children_async("/brokers/ids")
        controller_r = client.get_async("/controller")
        epoch_r = client.get_async("/controller_epoch")
        topics_r = client.get_children_async("/brokers/topics")

        ids = reads.settle(ids_r)
        if isinstance(ids, NoNodeError):
            where = f"{chroot}/brokers/ids" if chroot else "/brokers/ids"
            obs.errors.append(f"znodes: {where} does not exist "
                              "(is this Kafka's ZooKeeper, and is the chroot right?)")
            obs.stale_sections.add(STALE_ZNODES)
        elif isinstance(ids, Exception):
            problems.add(f"znodes: cannot read /brokers/ids: {type(ids).__name__}")
            obs.stale_sections.add(STALE_ZNODES)
        else:
            obs.broker_ids, bad = parse_broker_ids(ids)
            for name in bad:
                problems.add(f"znodes: /brokers/ids/{name} is not a broker id")

        phase = "controller"
        value = reads.settle(controller_r)
        if not isinstance(value, NoNodeError):  # no /controller: an election is in progress
            obs.controller_id = _decoded(value, "/controller", parse_controller, problems)
        value = reads.settle(epoch_r)
        if not isinstance(value, NoNodeError):
            obs.controller_epoch = _decoded(value, "/controller_epoch", parse_controller_epoch, problems)

        phase = "topics"
        topics = reads.settle(topics_r)
        if isinstance(topics, Exception):
            if not isinstance(topics, NoNodeError):  # no /brokers/topics: no topic was ever created
                problems.add(f"znodes: cannot read /brokers/topics: {type(topics).__name__}")
            topics = []
        partitions: list[tuple[str, int]] = []
        for topic, children in reads.pipeline(
                sorted(topics), lambda t: client.get_children_async(f"/brokers/topics/{t}/partitions")):
            if isinstance(children, Exception):
                why = "has no partitions znode" if isinstance(children, NoNodeError) else type(children).__name__
                problems.add(f"znodes: topic {topic} {why}; skipped")
                continue
            for child in children:
                if child.isdigit():
                    partitions.append((topic, int(child)))
                else:
                    problems.add(f"znodes: /brokers/topics/{topic}/partitions/{child} is not a partition")

        phase = "partition states"
        total = len(partitions)
        for (topic, index), value in reads.pipeline(
                sorted(partitions),
                lambda tp: client.get_async(f"/brokers/topics/{tp[0]}/partitions/{tp[1]}/state")):
            done += 1
            path = f"/brokers/topics/{topic}/partitions/{index}/state"
            state = _decoded(value, path, parse_partition_state, problems)
            if state is not None:
                obs.partition_states[(topic, index)] = state
    except _DeadlineExceeded:
        progress = f" ({done} of {total} partition states read)" if phase == "partition states" else ""
        obs.errors.append(f"znodes: deadline of {budget_s:g}s passed while reading {phase}{progress}")
        obs.stale_sections.add(STALE_ZNODES)
        if reads.answered == 0 or not client.connected:
            return False
    except Exception as e:  # ConnectionLoss, SessionExpired, ConnectionClosed, AuthFailed, …
        obs.errors.append(f"znodes: reading {phase} failed: {type(e).__name__}: {e}".rstrip(": "))
        obs.stale_sections.add(STALE_ZNODES)
        return False
    finally:
        problems.drain_into(obs.errors)
    return True
