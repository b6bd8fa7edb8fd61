"""A real ZooKeeper ensemble brought back from an old copy of its data: the collector says its data went back in
time, with the transactions gone, and does not mistake an ordinary election for it.

Ground truth is ZooKeeper itself (``srvr`` on every node): the ensemble runs at epoch E with the zxid counter at
C, is stopped, its data directories are replaced by a copy taken before (the whole ensemble restored from an
old backup), and restarted: it elects at the same epoch E (the old data's accepted epoch + 1) and serves a
counter far below C. The collector must report each serving server's regression with the transactions between.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from collectors.config import MonitorConfig
from collectors.runtime.poller import ClusterPoller
from sandbox.zookeeper import ZooKeeperEnsemble
from tests.support.monitor import FAST_THRESHOLDS, alert, poll
from tests.support.sandbox import running_sandbox, scenario

pytestmark = pytest.mark.integration


def _write(hosts: str, prefix: str, n: int) -> None:
    zk = KazooClient(hosts=hosts, timeout=10)
    zk.start(timeout=20)
    try:
        zk.ensure_path("/loadtest")
        for i in range(n):
            zk.create(f"/loadtest/{prefix}-{i}", b"x")
    finally:
        zk.stop()
        zk.close()


def _restart_all(zk: ZooKeeperEnsemble, restore_from: dict[int, Path] | None = None,
                 keep_copy_in: dict[int, Path] | None = None) -> None:
    for n in zk.nodes:
        zk.kill(n.sid)
    for n in zk.nodes:
        if keep_copy_in is not None:
            shutil.copytree(n.data_dir, keep_copy_in[n.sid])
        if restore_from is not None:
            shutil.rmtree(n.data_dir)
            shutil.copytree(restore_from[n.sid], n.data_dir)
    for n in zk.nodes:
        zk.start_node(n.sid)
    zk.wait_for_quorum(timeout=30)


def test_an_ensemble_restored_from_old_data_is_reported_with_the_transactions_gone(
        zk_ensemble: ZooKeeperEnsemble, tmp_path: Path) -> None:
    zk = zk_ensemble
    _write(zk.connect_string, "before-backup", 20)
    backup = {n.sid: tmp_path / f"backup-{n.sid}" for n in zk.nodes}
    _restart_all(zk, keep_copy_in=backup)  # the copy: taken with the ensemble down, as a backup would be
    with running_sandbox(scenario()) as sb:
        cfg = MonitorConfig.model_validate({
            "clusters": [{"name": "sandbox", "bootstrap_servers": sb.bootstrap_servers,
                          "zookeeper": {"connect": zk.connect_string}}],
            "poll_interval_s": 5, "request_timeout_s": 3, "thresholds": FAST_THRESHOLDS})
        poller = ClusterPoller(cfg.clusters[0], cfg)
        try:
            _write(zk.connect_string, "after-backup", 150)
            # a follower applies commits after the leader acknowledged them: wait until ZooKeeper itself shows
            # every node past the writes (a loaded CI run once polled a follower still at counter 105)
            deadline = time.monotonic() + 30
            while any(zk.srvr(n.sid)["zxid"] & 0xFFFFFFFF < 150 for n in zk.nodes) and time.monotonic() < deadline:
                time.sleep(0.1)
            first = poll(poller, sb)  # the collector sees the ensemble at epoch E, counter C
            seen = {z.server: (z.zxid_epoch, z.zxid_counter) for z in first.snapshot.zookeeper if z.serving}
            assert len(seen) == 3 and all(c is not None and c >= 150 for _, c in seen.values())
            assert not first.snapshot.losses
            # an ordinary election is not a regression: kill the leader, let the others elect
            leader = zk.kill_leader()
            zk.start_node(leader)
            zk.wait_for_quorum(timeout=30)
            moved = poll(poller, sb)
            assert not [x for x in moved.snapshot.losses if x.kind == "zk_zxid_regressed"]
            before = {z.server: (z.zxid_epoch, z.zxid_counter) for z in moved.snapshot.zookeeper if z.serving}

            _restart_all(zk, restore_from=backup)  # the whole ensemble back on the old copy
            truth = {f"127.0.0.1:{n.client_port}": zk.srvr(n.sid) for n in zk.nodes}
            r = poll(poller, sb)
        finally:
            poller.close()
    found = {x.server: x for x in r.snapshot.losses if x.kind == "zk_zxid_regressed"}
    assert set(found) == set(before) == set(truth)
    for server, x in found.items():
        epoch, counter = before[server]
        assert truth[server]["zxid"] < (epoch << 32 | counter)  # ZooKeeper itself: it went back
        assert x.epoch_before == epoch and x.epoch_after == truth[server]["zxid"] >> 32
        if x.epoch_after == epoch:  # the same epoch: the transactions in between are counted
            assert x.messages == counter - (truth[server]["zxid"] & 0xFFFFFFFF)
        assert x.messages is None or x.messages >= 150 - 5
    a = alert(r, "zk_zxid_regressed")
    assert a is not None and a.severity == "critical"
    assert any(i.kind == "consensus" and i.members.get("zk_zxid_regressed") for i in r.snapshot.incidents)
