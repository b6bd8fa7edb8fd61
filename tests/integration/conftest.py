"""Fixtures that start real components for the integration tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.runner import Sandbox
from sandbox.zookeeper import ZooKeeperEnsemble
from tests.support.sandbox import running_sandbox, scenario


def _settled(zookeeper: bool) -> Iterator[Sandbox]:
    with running_sandbox(scenario(), speed=10.0, zookeeper=zookeeper) as s:
        s.advance_to(s.cluster.start + 20)  # consumers have committed, transactions are under way
        yield s


@pytest.fixture(scope="module")
def sb() -> Iterator[Sandbox]:
    """The test cluster (tests/support/sandbox.py), 20 simulated seconds in; one per module that asks for it.

    Modules that need another cluster define their own `sb`, which takes precedence.
    """
    yield from _settled(zookeeper=False)


@pytest.fixture(scope="module")
def sbz() -> Iterator[Sandbox]:
    """Like `sb`, with a real 3-node ZooKeeper ensemble mirroring the cluster's znodes."""
    yield from _settled(zookeeper=True)


@pytest.fixture
def zk_ensemble(tmp_path: Path) -> Iterator[ZooKeeperEnsemble]:
    """A started 3-node ZooKeeper ensemble, fresh per test because tests break it on purpose.

    It lives under ``tmp_path`` so the node logs (``node-N/zookeeper.log``)
    survive a failing test for inspection; pytest prunes old tmp dirs itself.
    """
    ensemble = ZooKeeperEnsemble(size=3, base_dir=tmp_path / "zookeeper")
    try:
        ensemble.start(timeout=30)
        yield ensemble
    finally:
        ensemble.stop()


@pytest.fixture(scope="session")
def dashboard_data(tmp_path_factory: pytest.TempPathFactory):  # -> tests.support.history_fixture.DataDir
    """A dashboard data dir (latest state + Parquet history) made by a real collector polling the sandbox
    through an incident timeline (see tests/support/history_fixture.py); built once per session (~20 s)."""
    from tests.support.history_fixture import build_data_dir

    return build_data_dir(tmp_path_factory.mktemp("dashboard-data"))
