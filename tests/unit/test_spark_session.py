"""The local session's sizing: one shuffle partition per local worker thread (docs/weekly-report.md, "Step 5")."""

from __future__ import annotations

import os

import pytest

from spark_analytics.session import is_local_master, local_cores


@pytest.mark.parametrize(("master", "cores"), [
    ("local", 1), ("local[1]", 1), ("local[2]", 2), ("local[16]", 16), ("local[4,3]", 4), ("local[4, 3]", 4),
    ("local-cluster[2,3,1024]", 6), ("local-cluster[ 1 , 2 , 512 ]", 2)])
def test_local_cores_reads_the_worker_threads_of_a_local_master(master: str, cores: int) -> None:
    assert is_local_master(master)
    assert local_cores(master) == cores


def test_local_star_and_unknown_local_forms_use_every_core() -> None:
    every = os.cpu_count() or 1
    assert local_cores("local[*]") == every
    assert local_cores("local[*,2]") == every
    assert local_cores("local-cluster[bad]") == every  # Spark would refuse it; never fewer partitions than cores
