"""A real 3-node ZooKeeper ensemble behaves as the ZooKeeper collectors will assume it does.

These are the facts the monitor's alert rules rest on: an election raises the
zxid epoch, a stalled node times out instead of hanging the poller, a
restricted 4lw whitelist is distinguishable from an outage, and the sandbox
itself never leaks JVMs.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from collectors.sources.zk_fourletter import FourLetterNotWhitelisted, FourLetterTimeout, split_zxid
from sandbox.zookeeper import ZooKeeperEnsemble, thread_states

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _epoch(zk: ZooKeeperEnsemble, sid: int) -> int:
    return split_zxid(zk.srvr(sid)["zxid"])[0]


def _wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.1)


def _write(hosts: str, path: str) -> int:
    """Commit one znode through a real client and return its zxid (the txn's mzxid)."""
    client = KazooClient(hosts=hosts, timeout=10.0)
    client.start(timeout=10.0)
    try:
        client.create(path, b"probe", makepath=True)
        return client.exists(path).mzxid
    finally:
        client.stop()
        client.close()


def _zxid_reached(zk: ZooKeeperEnsemble, sid: int, zxid: int) -> bool:
    try:
        return zk.srvr(sid, timeout=1.0)["zxid"] >= zxid
    except Exception:
        return False  # LOOKING / resyncing: keep polling


def _pid_running(pid: int) -> bool:
    """True for a live process; zombies count as dead (the reaper may be lazy in containers)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


@pytest.fixture(scope="module")
def shared_ensemble(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperEnsemble]:
    """One ensemble for the checks that leave it whole again, to save JVM start-ups on 2 cores."""
    ensemble = ZooKeeperEnsemble(size=3, base_dir=tmp_path_factory.mktemp("zk-shared"))
    try:
        ensemble.start(timeout=30)
        yield ensemble
    finally:
        ensemble.stop()


def test_quorum_has_one_leader_two_followers_and_one_epoch(shared_ensemble: ZooKeeperEnsemble) -> None:
    zk = shared_ensemble
    modes = sorted(zk.srvr(n.sid)["mode"] for n in zk.nodes)
    assert modes == ["follower", "follower", "leader"]
    assert zk.connect_string == ",".join(f"127.0.0.1:{n.client_port}" for n in zk.nodes)

    # Followers only adopt the new epoch's zxid with the first committed txn
    # (a fresh follower reports 0x0), so commit one before comparing.
    zxid = _write(zk.connect_string, "/sandbox-test/epoch")
    for n in zk.nodes:
        _wait_until(lambda n=n: _zxid_reached(zk, n.sid, zxid), 20, f"node {n.sid} to apply {zxid:#x}")
    epochs = {_epoch(zk, n.sid) for n in zk.nodes}
    assert epochs == {split_zxid(zxid)[0]}
    assert epochs.pop() >= 1


def test_paused_follower_times_out_then_rejoins(shared_ensemble: ZooKeeperEnsemble) -> None:
    zk = shared_ensemble
    leader = zk.leader_sid()
    paused, other = (n.sid for n in zk.nodes if n.sid != leader)
    zk.pause(paused)
    try:
        pid = zk.node(paused).pid
        assert set(thread_states(pid)) == {"T"}, f"pause returned before every thread stopped: {thread_states(pid)}"
        start = time.monotonic()
        with pytest.raises(FourLetterTimeout):
            answer = zk.srvr(paused, timeout=1.0)
            # a stopped JVM cannot answer: say what did (seen once in CI, cause unknown)
            raise AssertionError(f"paused node {paused} (pid {pid}, threads {thread_states(pid)}, port "
                                 f"{zk.node(paused).client_port}) answered: {answer}")
        assert time.monotonic() - start < 10, "a SIGSTOPped node must cost a timeout, not a hang"

        # The other two still form a quorum, and it accepts writes.
        assert zk.leader_sid(timeout=5) in (leader, other)
        assert sorted(zk.srvr(s)["mode"] for s in (leader, other)) == ["follower", "leader"]
        live_hosts = ",".join(f"127.0.0.1:{zk.node(s).client_port}" for s in (leader, other))
        zxid = _write(live_hosts, "/sandbox-test/while-paused")
    finally:
        zk.resume(paused)

    # Serving again means having caught up with what was committed while it slept.
    _wait_until(lambda: _zxid_reached(zk, paused, zxid), 15, f"node {paused} to catch up to {zxid:#x}")
    assert zk.srvr(paused)["mode"] == "follower"
    zk.wait_for_quorum(timeout=15)


def test_killing_the_leader_elects_a_new_one_with_a_higher_epoch(zk_ensemble: ZooKeeperEnsemble) -> None:
    zk = zk_ensemble
    old_leader = zk.leader_sid()
    old_epoch = _epoch(zk, old_leader)
    old_pid = zk.node(old_leader).pid
    assert old_pid is not None

    assert zk.kill_leader() == old_leader
    new_leader = zk.leader_sid(timeout=30)
    assert new_leader != old_leader
    assert not zk.node(old_leader).alive
    assert not _pid_running(old_pid)

    # A new leader announces itself with zxid (new_epoch << 32); it sets that a
    # moment after it starts answering as leader, hence the wait (that moment is longer on a loaded machine).
    _wait_until(lambda: _epoch(zk, new_leader) > old_epoch, 20, "the new leader's epoch to rise")

    zk.start_node(old_leader)
    assert zk.wait_serving(old_leader, timeout=20)["mode"] == "follower"
    zk.wait_for_quorum(timeout=10)


def test_thread_states_tell_a_stopped_process_from_a_running_one() -> None:
    child = subprocess.Popen(["sleep", "60"])
    try:
        _wait_until(lambda: set(thread_states(child.pid)) == {"S"}, 5, "sleep to be asleep")
        child.send_signal(signal.SIGSTOP)
        _wait_until(lambda: thread_states(child.pid) == {"T": 1}, 5, "sleep to be stopped")
        assert sum(thread_states(os.getpid()).values()) >= 1  # this process: at least the thread reading /proc
    finally:
        child.kill()
        child.wait()
    assert thread_states(child.pid) == {}
    assert thread_states(None) == {}


def test_stop_leaves_no_process_behind(zk_ensemble: ZooKeeperEnsemble) -> None:
    zk = zk_ensemble
    pids = [n.pid for n in zk.nodes]
    assert all(pid is not None and _pid_running(pid) for pid in pids)
    zk.pause(zk.nodes[0].sid)  # stop() must not get stuck on a SIGSTOPped JVM

    start = time.monotonic()
    zk.stop()
    assert time.monotonic() - start < 30  # hang guard: a paused JVM must not block stop()
    assert not any(_pid_running(pid) for pid in pids if pid is not None)
    assert not any(n.alive for n in zk.nodes)


def test_restricted_whitelist_is_reported_as_such(tmp_path: Path) -> None:
    with ZooKeeperEnsemble(size=1, base_dir=tmp_path / "zk", whitelist=["srvr", "ruok"]) as zk:
        assert zk.srvr(1)["mode"] == "standalone"
        assert zk.four_letter(1, "ruok") == "imok"
        with pytest.raises(FourLetterNotWhitelisted) as info:
            zk.mntr(1)
        assert info.value.kind == "not_whitelisted"
        assert "mntr is not executed because it is not in the whitelist" in info.value.response


_ORPHAN_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from sandbox.zookeeper import ZooKeeperEnsemble
    # Without PR_SET_PDEATHSIG in the crash case, so that only the atexit hook can save us.
    zk = ZooKeeperEnsemble(size=1, die_with_parent=sys.argv[1] == "hang")
    zk.start()
    print(zk.nodes[0].pid, zk.base_dir, flush=True)
    if sys.argv[1] == "hang":
        time.sleep(60)
    raise RuntimeError("parent crashes without calling stop()")
    """
)


@pytest.mark.parametrize("how", ["exception", "sigkill"])
def test_jvms_die_with_their_parent(how: str) -> None:
    """atexit covers a crashing parent, PR_SET_PDEATHSIG a SIGKILLed one."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    mode = "hang" if how == "sigkill" else "crash"
    parent = subprocess.Popen(
        [sys.executable, "-c", _ORPHAN_SCRIPT, mode],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    base_dir = None
    try:
        assert parent.stdout is not None
        line = parent.stdout.readline()
        assert line, f"child failed to start an ensemble: {parent.communicate(timeout=30)[1]}"
        pid_text, base_dir = line.split(maxsplit=1)
        java_pid = int(pid_text)
        assert _pid_running(java_pid)
        if how == "sigkill":
            parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
        _wait_until(lambda: not _pid_running(java_pid), 10, f"JVM {java_pid} to die with its parent")
        if how == "exception":
            assert not Path(base_dir.strip()).exists(), "atexit's stop() should remove the temp dir"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if base_dir is not None:  # a SIGKILLed parent cannot clean up its temp dir
            shutil.rmtree(base_dir.strip(), ignore_errors=True)
