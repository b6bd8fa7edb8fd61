"""Listing a remote history (HDFS, S3A, ABFS, GCS...) through the driver JVM's Hadoop FileSystem API.

The same rules as the collector's own listing of a local history (`collectors.outputs.history.live_files`): a
compaction's output supersedes the files it names, a file that repeats another byte for byte is read once, empty
files are left out. `spark_analytics.io` lists local histories with Python and remote ones with this.
"""

from __future__ import annotations

import json
import logging
import weakref
from datetime import date
from typing import Any

from pyspark.sql import SparkSession

from collectors.outputs.history import DATE_PREFIX, REPLACES_KEY
from collectors.outputs.history.files import repeats_among

log = logging.getLogger("spark_analytics.io")


_LISTERS: weakref.WeakKeyDictionary[Any, HadoopLister] = weakref.WeakKeyDictionary()


def lister_for(spark: SparkSession) -> HadoopLister:
    """The session's `HadoopLister`, kept while the session lives: its keys of the files it read stay known, so a
    day listed again (each table and day of a roll-up, the report's inputs) does not read its files again."""
    got = _LISTERS.get(spark)
    if got is None:
        got = _LISTERS[spark] = HadoopLister(spark)
    return got


class HadoopLister:
    """`collectors.outputs.history.live_files` over the Hadoop FileSystem API (HDFS, object stores, file://)."""

    def __init__(self, spark: SparkSession) -> None:
        self.jvm = spark._jvm  # type: ignore[attr-defined]
        self.conf = spark._jsc.hadoopConfiguration()  # type: ignore[attr-defined]
        self._keys: dict[tuple[str, int, int], Any] = {}  # (file, size, mtime) -> its rows' key, listed before
        self._mtimes: dict[str, int] = {}
        self.sizes: dict[str, int] = {}
        """Every file listed (live or not): its size, as the last listing gave it."""

    def _table(self, root: str, table: str) -> tuple[Any, Any]:
        """(the filesystem, the path) of `table` under `root`."""
        table_path = self.jvm.org.apache.hadoop.fs.Path(root.rstrip("/") + "/" + table)
        return table_path.getFileSystem(self.conf), table_path

    @staticmethod
    def _date_dirs(fs: Any, table_path: Any) -> list[tuple[date, Any]]:
        """`collectors.outputs.history.files.date_dirs` over the Hadoop API: (day, status) of each ``date=``
        directory, sorted."""
        out = []
        for st in fs.listStatus(table_path):
            name = st.getPath().getName()
            if not st.isDirectory() or not name.startswith(DATE_PREFIX):
                continue
            try:
                out.append((date.fromisoformat(name[len(DATE_PREFIX):]), st))
            except ValueError:
                continue
        return sorted(out, key=lambda d: d[0])

    def days(self, root: str, table: str) -> list[date]:
        """The days with a ``date=`` directory of `table`, sorted."""
        fs, table_path = self._table(root, table)
        return [d for d, _ in self._date_dirs(fs, table_path)] if fs.exists(table_path) else []

    def live_files(self, root: str, table: str, lo: date, hi: date) -> tuple[list[str], dict[str, str], list[str]]:
        """(live files, {repeat left out: the file read instead}, empty live files left out) of `table`'s ``date=``
        directories `lo`..`hi`."""
        fs, table_path = self._table(root, table)
        if not fs.exists(table_path):
            return [], {}, []
        previous = self._listing(fs, table_path, lo, hi)
        for _ in range(10):  # until two listings agree (a compaction may finish in between)
            current = self._listing(fs, table_path, lo, hi)
            if current == previous:
                return current
            previous = current
        return previous

    def _listing(self, fs: Any, table_path: Any, lo: date, hi: date) -> tuple[list[str], dict[str, str], list[str]]:
        out: list[str] = []
        repeated: dict[str, str] = {}
        empty: list[str] = []
        for day, st in self._date_dirs(fs, table_path):
            if day < lo or day > hi:
                continue
            try:
                entries = fs.listStatus(st.getPath())
            except Exception:  # the day was removed by retention after the first listing
                continue
            kept = [e for e in entries if e.isFile() and e.getPath().getName().endswith(".parquet")
                    and not e.getPath().getName().startswith((".", "_"))]
            files = {e.getPath().getName(): e.getPath().toString() for e in kept}
            sizes = {e.getPath().getName(): int(e.getLen()) for e in kept}
            self.sizes.update((files[n], size) for n, size in sizes.items())
            self._mtimes.update((files[e.getPath().getName()], int(e.getModificationTime())) for e in kept)
            superseded: set[str] = set()
            for n, p in files.items():
                if n.startswith("compact-"):
                    superseded |= self._replaces(p)
            live = [n for n in sorted(files) if n not in superseded]
            repeats = self._repeats(fs, [(files[n], sizes[n]) for n in live])
            repeated.update(repeats)
            empty.extend(files[n] for n in live if sizes[n] == 0)
            out.extend(files[n] for n in live if files[n] not in repeats and sizes[n] > 0)
        return out, repeated, empty

    def _repeats(self, fs: Any, files: list[tuple[str, int]]) -> dict[str, str]:
        """`collectors.outputs.history.files.repeats_among` over the Hadoop API: {repeat: the file it repeats}."""
        sizes = dict(files)

        def key(path: str) -> Any:
            at = (path, sizes[path], self._mtimes.get(path, 0))
            if at not in self._keys:
                self._keys[at] = self._rows_key(fs, path, sizes[path])
            return self._keys[at]

        return repeats_among(files, key)

    def _rows_key(self, fs: Any, path: str, size: int) -> Any:
        """`collectors.outputs.history.files.rows_key` for a file of `size` bytes, its digest taken in the JVM
        (commons-codec over the bytes before the footer: no buffer crosses Py4J); None where it cannot be read
        (not a repeat: it is read, as before this rule)."""
        jvm = self.jvm
        try:
            footer, rows, groups, schema = self._footer(fs, path, size)
            stream = fs.open(jvm.org.apache.hadoop.fs.Path(path))
            try:
                bounded = jvm.org.apache.commons.io.input.BoundedInputStream(stream, size - 8 - footer)
                digest = str(jvm.org.apache.commons.codec.digest.DigestUtils.sha256Hex(bounded))
            finally:
                stream.close()
        except Exception as e:
            log.warning("history: cannot read %s to compare it with the other files of its day: %s", path, e)
            return None
        return size, footer, rows, groups, str(schema.toString()), digest

    def _footer(self, fs: Any, path: str, size: int) -> tuple[int, int, int, Any]:
        """(footer length in bytes, rows, row groups, schema) of a Parquet file of `size` bytes."""
        jvm = self.jvm
        hp = jvm.org.apache.hadoop.fs.Path(path)
        stream = fs.open(hp)
        try:
            stream.seek(size - 8)
            trailer = bytes(stream.readNBytes(8))  # a byte[] returned crosses Py4J as bytes
        finally:
            stream.close()
        if len(trailer) != 8 or trailer[4:] != b"PAR1":
            raise ValueError("not a Parquet file (no PAR1 trailer)")
        reader = jvm.org.apache.parquet.hadoop.ParquetFileReader.open(
            jvm.org.apache.parquet.hadoop.util.HadoopInputFile.fromPath(hp, self.conf))
        try:
            return (int.from_bytes(trailer[:4], "little"), int(reader.getRecordCount()),
                    int(reader.getRowGroups().size()), reader.getFooter().getFileMetaData().getSchema())
        finally:
            reader.close()

    def _replaces(self, path: str) -> set[str]:
        jvm = self.jvm
        try:
            hp = jvm.org.apache.hadoop.fs.Path(path)
            infile = jvm.org.apache.parquet.hadoop.util.HadoopInputFile.fromPath(hp, self.conf)
            reader = jvm.org.apache.parquet.hadoop.ParquetFileReader.open(infile)
            try:
                meta = reader.getFooter().getFileMetaData().getKeyValueMetaData()
                raw = meta.get(REPLACES_KEY.decode())
            finally:
                reader.close()
            return set(json.loads(raw)) if raw else set()
        except Exception as e:  # unreadable footer: treat as superseding nothing (as collectors.outputs.history does)
            log.warning("cannot read the footer of %s: %s", path, e)
            return set()
