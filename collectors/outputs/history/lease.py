"""`WriterLease`: one collector writes a history root at a time.

Two collectors writing one root — an HA pair on a shared volume, or a rolling deploy whose new pod starts
before the old one stops — each poll the cluster and each publish their own files, so every event the weekly
report counts (incidents, ISR changes, alert episodes) is there twice; both compact the same days at once, and a
writer starting deletes the other's temp files mid-write. The lease makes the second one a standby.

The lease is an exclusive ``flock`` on ``<root>/_writer.lock`` held for as long as the writer lives: the kernel
(or the NFSv4 server, after its lease time) releases it when the process dies, however it dies, so a crashed
holder never blocks its successor and nothing has to expire by the clock. The file's content says who holds
it (pid, host, since when, which clusters, the latest poll up to which it has written every row) for the
standby's log, for the check that the holder writes the standby's clusters too, and for the successor to skip the
polls already written; it is informative only, the lock is the truth. The name starts with ``_``, which every
reader of the history skips.

Where ``flock`` is not supported (some FUSE and CIFS mounts: ``ENOLCK``, ``EOPNOTSUPP``) the writer goes on
without a lease, with one warning: the behaviour before the lease existed.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

LEASE_FILE = "_writer.lock"
UNSUPPORTED = frozenset({errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL})


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds a root's lease, as its lease file says (fields None when the file does not say)."""

    pid: int | None
    host: str | None
    since: str | None
    clusters: tuple[str, ...] | None
    flushed_until: float | None = field(default=None, compare=False)  # the same holder, further on
    """The latest poll time (epoch s) up to which the holder has written every row still in its buffer: a successor
    drops its own rows of polls up to it (but for its ledger rows of a proved loss: `writer.HistoryWriter._stand_by`),
    and a standby looks among the history's rows after it for a loss it keeps (`loss_rows.Looks`)."""

    def describe(self) -> str:
        who = f"pid {self.pid or '?'} on {self.host or '?'}"
        return f"{who} since {self.since}" if self.since else who

    def writes(self, clusters: Sequence[str]) -> bool:
        """The holder writes every one of `clusters` (unknown: it does not)."""
        return self.clusters is not None and set(clusters) <= set(self.clusters)


def read_holder(root: Path) -> Holder:
    """The lease file's account of its holder; every field None when it is missing or not ours."""
    try:
        data = json.loads((Path(root) / LEASE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return Holder(None, None, None, None)
    if not isinstance(data, dict):
        return Holder(None, None, None, None)
    pid, host, since, clusters, flushed = (data.get(k) for k in ("pid", "host", "since", "clusters",
                                                                  "flushed_until"))
    return Holder(pid if isinstance(pid, int) else None, host if isinstance(host, str) else None,
                  since if isinstance(since, str) else None,
                  tuple(str(c) for c in clusters) if isinstance(clusters, list) else None,
                  float(flushed) if isinstance(flushed, (int, float)) and not isinstance(flushed, bool) else None)


def _flock(fd: int, mode: int) -> bool | OSError:
    """``flock`` `fd` without waiting: True locked (the caller keeps `fd`); False another holds it, or the error
    of a file system that does not lock (`UNSUPPORTED`), both with `fd` closed. Raises any other OSError, `fd`
    closed."""
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return False
    except OSError as e:
        os.close(fd)
        if e.errno not in UNSUPPORTED:
            raise
        return e
    return True


class WriterLease:
    """The exclusive right to write `root`, taken with `acquire` and kept until `release` or the process ends."""

    def __init__(self, root: Path, clusters: Sequence[str] = (), writer: str = "collector") -> None:
        self.root = Path(root)
        self.writer = writer
        """Who writes the root, for the warning when it cannot be locked (the roll-up job's store takes it too)."""
        self.path = self.root / LEASE_FILE
        self.clusters = tuple(clusters)
        self.unsupported = False
        """flock failed with ENOLCK/EOPNOTSUPP: the writer goes on without a lease."""
        self._fd: int | None = None
        self._record: dict[str, Any] = {}
        self.previous = Holder(None, None, None, None)
        """The last holder's account, as the lease file gave it once `acquire` had the lock and before it wrote its
        own: read before the lock, it may miss what the holder recorded as it stopped (its final flush)."""

    @property
    def held(self) -> bool:
        return self._fd is not None or self.unsupported

    @property
    def locked(self) -> bool:
        """Held by the lock itself (not by going on without one): no other collector writes the root now."""
        return self._fd is not None

    def acquire(self) -> bool:
        """Take the lease if it is free (or already ours). False: another live writer holds it.

        Raises OSError when the lease file cannot be opened (the root missing and not creatable, read-only):
        the caller's writes would fail the same way and report it.
        """
        if self.held:
            return True
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        locked = _flock(fd, fcntl.LOCK_EX)
        if locked is False:
            return False
        if isinstance(locked, OSError):
            self.unsupported = True
            log.warning("%s cannot be locked (%s); writing without a lease: a second %s on this root would write "
                        "beside this one", self.path, locked.strerror or locked, self.writer)
            return True
        self._fd = fd
        self.previous = read_holder(self.root)
        self._record = {"pid": os.getpid(), "host": socket.gethostname(), "clusters": list(self.clusters),
                        "since": datetime.now(UTC).isoformat(timespec="seconds"), "flushed_until": None}
        self._write_record(sync=True)
        return True

    def record_flushed(self, polled: float) -> None:
        """Note in the lease file that every row of polls up to `polled` is written (kept as the maximum seen)."""
        if self._fd is None:
            return
        last = self._record.get("flushed_until")
        if last is None or polled > last:
            self._record["flushed_until"] = polled
            self._write_record(sync=False)  # informative: lost with the host, a successor then keeps its rows

    def _write_record(self, sync: bool) -> None:
        assert self._fd is not None
        data = (json.dumps(self._record) + "\n").encode()
        try:  # overwrite in place, then cut: a reader never sees the file empty
            os.pwrite(self._fd, data, 0)
            os.ftruncate(self._fd, len(data))
            if sync:
                os.fsync(self._fd)
        except OSError as e:  # the lock is what counts; a standby then reads an account it cannot parse
            log.warning("history: could not record the lease holder in %s: %s", self.path, e)

    def release(self) -> None:
        """Give the lease up (the file stays; its content describes the last holder)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)


class ReaderLease:
    """A shared ``flock`` on a root's lease file, for a reader that must see the root stay as it found it.

    The weekly report holds the roll-up store's while it reads it: between its check of which days are fresh and
    its reads of their files, a roll-up run replacing a day's files in place gave it rows of newer history files
    than its ``inputs.json`` lists (or, with the size changed, a file cut where Spark's listing said it ends).
    Readers share it; a writer's exclusive `WriterLease` waits for them, and they for it.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.path = self.root / LEASE_FILE
        self._fd: int | None = None
        self.unlocked = False
        """Nothing to lock: no lease file and none can be made (a read-only store), or flock unsupported there."""

    @property
    def held(self) -> bool:
        return self._fd is not None or self.unlocked

    def acquire(self) -> bool:
        """Take it if no writer holds the root (or it is already ours). False: a writer does."""
        if self.held:
            return True
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError:
            try:  # a store we may not write: its writer's lease file, if it has one, still locks
                fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                self.unlocked = True  # no writer ever wrote here, and we cannot make the file: nothing to share
                return True
        locked = _flock(fd, fcntl.LOCK_SH)
        if isinstance(locked, OSError):
            self.unlocked = True
        elif locked:
            self._fd = fd
        return locked is not False

    def release(self) -> None:
        fd, self._fd = self._fd, None
        self.unlocked = False
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)


def held_by_readers(root: Path) -> bool:
    """Whether what keeps a `WriterLease` of `root` from being taken is readers (`ReaderLease`), not a writer:
    for the message of a writer that waits. A moment's answer, for words only."""
    probe = ReaderLease(root)
    try:
        if not probe.acquire():
            return False
        return not probe.unlocked
    except OSError:
        return False
    finally:
        probe.release()
