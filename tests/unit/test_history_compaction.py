"""Compacting a day as histories hold them (`HistoryWriter.compact`, `collectors.outputs.history.compaction`): files of
both encodings side by side, an older schema's, an earlier compaction's, a damaged file, a copied one, several
clusters. Every row the readers read before is read after, once; and the merge writes the very file the per-batch
merge it replaced wrote (`bench.bench_compaction.PerBatchWriter`), row groups and all."""

from __future__ import annotations

import json
import random
import shutil
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench import bench_compaction
from collectors.model.poll import PollResult
from collectors.outputs.history import HistoryWriter, list_tables, read_arrow
from collectors.outputs.history import maintenance as history_maintenance
from collectors.outputs.history.compaction import Footer, cuts, read_footer, row_groups
from collectors.outputs.history.files import stores_timestamps
from tests.support.damage import cut_short, damage_pages
from tests.support.mixed_history import as_written_before_v4
from tests.unit.test_history import LATER, T0, files_in, full_snapshot, incident_events, opened_resolved

CLUSTERS = ("c2", "c1", "c3")
ROW_GROUP = 7  # rows a compacted row group: a file of one poll of three clusters holds 3 to 12 of a table


def _flushes(root: Path, staging: Path, times: list[float], old: bool = False, version_1: bool = False) -> None:
    """One flush a time (a poll of every cluster), moved into `root`'s day; `old`: as a collector before schema
    version 4 wrote them; `version_1`: the cluster table also without the columns version 2 added."""
    w = HistoryWriter(staging, clock=lambda: times[0], retention_days=None, compact_min_files=10**6)
    for t in times:
        for cluster in CLUSTERS:
            opened, resolved = opened_resolved(t)
            w.add(PollResult(full_snapshot(t, cluster=cluster), opened, resolved, incident_events(t)))
        assert w.flush(), w.last_error
    if old:
        as_written_before_v4(staging)
    for f in sorted(staging.rglob("*.parquet")):
        if version_1 and f.parent.parent.name == "cluster":
            t = pq.read_table(f, partitioning=None)
            pq.write_table(t.drop_columns(["incidents_open", "thresholds"]), f, compression="zstd")
        (root / f.parent.relative_to(staging)).mkdir(parents=True, exist_ok=True)
        f.rename(root / f.relative_to(staging))
    shutil.rmtree(staging)


def _rows(root: Path, table: str) -> Counter[str]:
    """Every row the readers read of `table`, as text (lists and NaN included), counted."""
    return Counter(json.dumps(r, sort_keys=True) for r in read_arrow(root, table).to_pylist())


def _compacted(root: Path) -> dict[str, tuple[pa.Table, list[int]]]:
    out = {}
    for f in sorted(root.glob("*/date=*/compact-*.parquet")):
        md = pq.read_metadata(f)
        out[f.parent.parent.name] = (pq.read_table(f, partitioning=None),
                                     [md.row_group(i).num_rows for i in range(md.num_row_groups)])
    return out


def test_a_mixed_day_compacts_to_every_row_once_as_the_per_batch_merge_did(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(history_maintenance, "COMPACT_ROW_GROUP", ROW_GROUP)  # row groups cut inside files too
    monkeypatch.setattr(bench_compaction, "COMPACT_ROW_GROUP", ROW_GROUP)
    root, staging = tmp_path / "history", tmp_path / "staging"
    times = [T0 + 60 * i for i in range(12)]
    _flushes(root, staging, times[:2], old=True)
    _flushes(root, staging, times[2:4])
    _flushes(root, staging, times[4:5], old=True, version_1=True)
    w = HistoryWriter(root, retention_days=None, compact_min_files=2, clock=lambda: LATER)
    tables = list_tables(root)
    for table in tables:  # an earlier compaction of the day: its file is merged again with what came after it
        assert w.compact(table, "2023-11-15")
    _flushes(root, staging, times[5:7])
    _flushes(root, staging, times[7:8], old=True, version_1=True)
    _flushes(root, staging, times[8:9], old=True)
    _flushes(root, staging, times[9:])
    day = "date=2023-11-15"

    def parts(table: str, old: bool) -> list[Path]:
        return [f for f in files_in(root, table) if f.name.startswith("part-") and stores_timestamps(f) != old]

    damaged = parts("brokers", old=True)[-1]
    damage_pages(damaged)  # its footer reads, its pages do not: found when the merge fails
    cut = parts("topic_health", old=False)[1]
    cut_short(cut)  # no footer: found before merging
    copies = [(parts("group_lag", old=False)[-1], "part-9999999999999999999-copy.v4.parquet"),  # read last
              (parts("alert_events", old=True)[0], "part-0000000000000000000-copy.parquet")]  # read first
    for original, name in copies:
        shutil.copyfile(original, original.with_name(name))
    # what each table holds, from the footers: every file once but the copies and the two that do not read
    held = {t: sum(pq.read_metadata(f).num_rows for f in files_in(root, t)
                   if f not in (damaged, cut) and not f.name.endswith(("-copy.v4.parquet", "-copy.parquet")))
            for t in tables}
    assert {stores_timestamps(f) for t in tables for f in files_in(root, t)} == {False, True}
    assert len({pq.read_schema(f).remove_metadata() for f in files_in(root, "cluster") if f != damaged}) == 3
    shutil.copytree(root, tmp_path / "before")  # read apart: the readers' finding the damaged file is not shared
    shutil.copytree(root, tmp_path / "per-batch")
    before = {t: _rows(tmp_path / "before", t) for t in tables}
    assert {t: sum(rows.values()) for t, rows in before.items()} == held
    assert {json.loads(r)["cluster"] for t in ("cluster", "group_lag") for r in before[t]} == set(CLUSTERS)

    per_batch_writer = bench_compaction.PerBatchWriter(tmp_path / "per-batch", retention_days=None, compact_min_files=2,
                                                       clock=lambda: LATER)
    for writer, where in ((w, root), (per_batch_writer, tmp_path / "per-batch")):
        assert writer.maybe_compact() == len(tables)
        assert writer.last_maintenance_error is None
        left = sorted(str(f.relative_to(where)) for t in tables for f in files_in(where, t)
                      if not f.name.startswith("compact-"))
        assert left == sorted([f"brokers/{day}/{damaged.name}", f"topic_health/{day}/{cut.name}"])  # as they were

    merged = _compacted(root)
    assert sorted(merged) == sorted(tables)
    for table in tables:
        rows, groups = merged[table]
        assert rows.num_rows == sum(groups) == held[table], table
        assert len(groups) > 1 and all(g >= ROW_GROUP for g in groups[:-1]), table
        assert _rows(root, table) == before[table], table  # not a row lost, none twice
    per_batch = _compacted(tmp_path / "per-batch")
    for table in tables:  # the same file, to the row and the row group, metadata and all
        assert merged[table][1] == per_batch[table][1], table
        assert merged[table][0].equals(per_batch[table][0], check_metadata=True), table


def _per_batch_cuts(rows: list[int], size: int) -> list[int]:
    """The row groups' ends as the per-batch merge made them, batch by batch (`ParquetFile.iter_batches`)."""
    out, at, pending = [], 0, 0
    for n in rows:
        batches = [size] * (n // size) + ([n % size] if n % size else [])
        for b in batches:
            at, pending = at + b, pending + b
            if pending >= size:
                out.append(at)
                pending = 0
    return [*out, at] if pending else out


def test_row_groups_end_where_the_per_batch_merge_ended_them() -> None:
    rnd = random.Random(5)
    for _ in range(500):
        size = rnd.choice([1, 2, 7, 100])
        rows = [rnd.choice([0, 1, 3, size - 1, size, size + 1, 3 * size + 2, rnd.randrange(5 * size + 1)])
                for _ in range(rnd.randrange(12))]
        assert cuts(rows, size) == _per_batch_cuts(rows, size), (rows, size)


def test_files_holding_other_rows_than_their_footers_say_are_not_merged(tmp_path: Path) -> None:
    """The merge counts what it reads against the footers: a compact file never lacks a row or holds one twice. Files
    of more rows than a row group, and files of none, are cut as the per-batch merge cut them."""
    files = {}
    for name, n in (("a", 5), ("empty", 0), ("b", 3)):
        pq.write_table(pa.table({"n": [f"{name}{i}" for i in range(n)]}, schema=pa.schema({"n": pa.string()})),
                       tmp_path / f"{name}.parquet")
        files[name] = read_footer(tmp_path / f"{name}.parquet")
    schema = files["a"].schema
    groups = list(row_groups(files, schema, 2))
    assert cuts([5, 0, 3], 2) == [2, 4, 7, 8] and [g.num_rows for g in groups] == [2, 2, 3, 1]
    assert [n for g in groups for n in g.column("n").to_pylist()] == ["a0", "a1", "a2", "a3", "a4", "b0", "b1", "b2"]
    for wrong in (4, 6):
        lying = {**files, "a": Footer(files["a"].fragment, schema, wrong)}
        with pytest.raises(pa.ArrowInvalid, match=f"read 8 rows of 3 files whose footers say {wrong + 3}"):
            list(row_groups(lying, schema, 2))
