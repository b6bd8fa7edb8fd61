"""Fixtures that start real components for the integration tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.zookeeper import ZooKeeperEnsemble


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
