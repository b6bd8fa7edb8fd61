"""The latest snapshot per cluster as one JSON file each, for the dashboard's "now" view.

``<state_dir>/<safe name>.json`` holds ``collectors.model.records.snapshot_to_dict(snapshot)`` plus
``written_at`` (epoch seconds). Each poll replaces the file atomically: write a hidden temp file in the same
directory, fsync, ``os.replace``, fsync the directory; a reader therefore sees the previous or the new
document, never a mix. `read_latest` still tolerates a corrupt or foreign file (skipped with a warning),
since a disk can be full or a file edited by hand.

The JSON is written and read with orjson: a 100,000-partition cluster's state is ~95 MB, which the standard
library encodes in ~1 s of the collector's poll and decodes in ~0.8 s of the dashboard's first render after a
poll; orjson takes about a tenth and a half of that. Files from older writers may hold ``NaN`` / ``Infinity``
(the standard library writes them, orjson neither writes nor reads them): those are read by the standard
library as before.

The file name is `collectors.outputs.paths.safe_name` of the cluster name; it is not decoded back:
the document itself carries ``cluster``.

A cluster removed from the configuration is polled no more, but its file stayed, and the dashboard showed it STALE
("Is the collector running?") for as long as the file lived. `retire` moves such a file into
``<state_dir>/retired/`` once nobody has written it for `RETIRE_AFTER_S`: the dashboard reads only the top level,
and the last state is kept for whoever wants to look.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections.abc import Collection
from pathlib import Path
from typing import Any

import orjson

from collectors.model.records import ClusterSnapshot, snapshot_to_dict
from collectors.outputs.atomic import publish, remove_stale_temps
from collectors.outputs.paths import name_of, safe_name

log = logging.getLogger(__name__)

SUFFIX = ".json"
TEMP_SUFFIX = ".tmp"
RETIRED_DIR = "retired"
RETIRE_AFTER_S = 900.0
"""How long a removed cluster's file must have gone unwritten (wall clock, its mtime) before `retire` moves it: a
collector still polling it (an HA peer not yet on the new configuration) rewrites it every poll."""


def latest_path(state_dir: Path, cluster: str) -> Path:
    return Path(state_dir) / f"{safe_name(cluster)}{SUFFIX}"


def write_latest(state_dir: Path, snapshot_dict: dict[str, Any] | ClusterSnapshot, now: float | None = None) -> Path:
    """Replace the cluster's latest-state file with `snapshot_dict` (a dict or a ClusterSnapshot).

    Raises OSError when the file cannot be written (the previous file is then left intact).
    """
    if isinstance(snapshot_dict, ClusterSnapshot):
        snapshot_dict = snapshot_to_dict(snapshot_dict)
    cluster = snapshot_dict.get("cluster")
    if not isinstance(cluster, str):
        raise ValueError("snapshot has no 'cluster' name")
    state_dir = Path(state_dir)
    state_dir.mkdir(parents=True, exist_ok=True)
    doc = dict(snapshot_dict)
    doc["written_at"] = time.time() if now is None else now
    data = orjson.dumps(doc, default=str, option=orjson.OPT_NON_STR_KEYS)
    target = latest_path(state_dir, cluster)
    prefix = f".{target.name}."
    publish(target, lambda f: f.write(data), state_dir / f"{prefix}{uuid.uuid4().hex}{TEMP_SUFFIX}")
    remove_stale_temps(state_dir, prefix, TEMP_SUFFIX, older_than_s=60.0)
    return target


def loads(data: bytes) -> Any:
    """Parse a latest-state document: orjson, or the standard library for an older file with NaN / Infinity."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data.decode("utf-8"))


def read_latest(state_dir: Path) -> dict[str, dict[str, Any]]:
    """``{cluster: snapshot dict + written_at}`` from every latest-state file; unreadable ones are skipped.

    JSON files of other shapes (other components may keep state in the same directory) are ignored.
    """
    out: dict[str, dict[str, Any]] = {}
    for entry in _state_files(Path(state_dir)):
        try:
            with open(entry.path, "rb") as f:
                doc = loads(f.read())
        except (OSError, ValueError) as e:
            log.warning("latest state: skipping unreadable file %s: %s", entry.path, e)
            continue
        if not (isinstance(doc, dict) and isinstance(doc.get("cluster"), str) and "written_at" in doc):
            log.debug("latest state: %s is not a latest-state document; ignored", entry.path)
            continue
        if entry.name != f"{safe_name(doc['cluster'])}{SUFFIX}":
            log.warning("latest state: %s holds cluster %r, which belongs in another file; skipped", entry.path,
                        doc["cluster"])
            continue
        out[doc["cluster"]] = doc
    return out


def retire(state_dir: Path, clusters: Collection[str], now: float | None = None,
           after_s: float = RETIRE_AFTER_S) -> list[str]:
    """Move the latest-state files of `clusters` (taken out of the configuration) that nobody has written for
    `after_s` seconds before `now` (wall clock, their mtime) into ``<state_dir>/retired/``, replacing an older copy
    there; returns the clusters moved. A file that cannot be moved stays, with a warning: retiring is housekeeping,
    never a reason for the poll loop to fail. The files are not read (a big cluster's is ~95 MB): the path is the
    cluster's (`latest_path`)."""
    now = time.time() if now is None else now
    retired: list[str] = []
    for cluster in sorted(clusters):
        path = latest_path(state_dir, cluster)
        try:
            age = now - path.stat().st_mtime
            if age < after_s:
                continue
            target = path.parent / RETIRED_DIR / path.name
            target.parent.mkdir(exist_ok=True)
            os.replace(path, target)
        except FileNotFoundError:
            continue
        except OSError as e:
            log.warning("latest state: %s not retired: %s", path, e)
            continue
        log.info("latest state: cluster %r is not in the configuration any more and its file was last written %.0f s "
                 "ago; moved to %s (the dashboard no longer shows it)", cluster, age, target)
        retired.append(cluster)
    return retired


def retired(state_dir: Path) -> list[tuple[str, float]]:
    """``[(cluster, last written)]`` of the files `retire` moved into ``<state_dir>/retired/``, newest first: so the
    dashboard can say which clusters left it and when, rather than have them vanish without a word. Names come from
    the file names (`paths.name_of`); the files are not read."""
    out: list[tuple[str, float]] = []
    for e in _state_files(Path(state_dir) / RETIRED_DIR):
        try:
            out.append((name_of(e.name[: -len(SUFFIX)]), e.stat().st_mtime))
        except OSError:
            continue
    return sorted(out, key=lambda x: (-x[1], x[0]))


def _state_files(directory: Path) -> list[os.DirEntry[str]]:
    """The files of `directory` (none if it is missing) that may be latest-state files, by name: ``*.json``, not
    hidden (temp files being published start with a dot)."""
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return []
    out = []
    for e in entries:
        try:
            if not e.name.startswith(".") and e.name.endswith(SUFFIX) and e.is_file():
                out.append(e)
        except OSError:  # gone or unreadable since the listing
            continue
    return out
