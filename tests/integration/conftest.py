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
