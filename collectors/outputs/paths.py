"""Where a cluster's files live: the one cluster-name → path-component function.

Every place that names a file or directory after a cluster uses `safe_name`: the latest-state file
(``<state_dir>/<name>.json``), the checkpoint (``<state_dir>/checkpoints/<name>.zip``), the weekly report's
directory (``<out>/<name>/<period>/``) and the dashboard looking for all three. One function, so a cluster
called ``prod eu`` is found where it was written (two encodings once sent its reports where the dashboard
never looked, and made ``a b`` and ``a_b`` overwrite each other).

The encoding is percent-encoding with only ``A-Z a-z 0-9 - _ .`` kept and a leading ``.`` encoded too, so
'/', '..', NUL or unicode can neither escape the directory nor hide the file, and distinct names never
collide. Names whose encoding would be too long for a file system are cut and suffixed with a hash.
"""

from __future__ import annotations

import hashlib
from urllib.parse import quote, unquote

MAX_STEM = 180  # well under the usual 255-byte limit for a file name


def safe_name(cluster: str) -> str:
    """A file-name-safe, collision-free encoding of a cluster name (without the ``.json`` suffix)."""
    stem = quote(cluster, safe="-_.", errors="surrogatepass").replace("~", "%7E")  # "~" marks hashed names only
    if stem.startswith("."):
        stem = "%2E" + stem[1:]
    if not stem:
        stem = "~empty"
    if len(stem) > MAX_STEM:
        digest = hashlib.sha256(cluster.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        stem = f"{stem[: MAX_STEM - 18]}~~{digest}"
    return stem


def name_of(stem: str) -> str:
    """The cluster name a `safe_name` stem stands for, for display where only the file is at hand (a retired
    cluster's file is not read: it can be ~95 MB). A name cut and hashed cannot be recovered: its stem is returned
    decoded as far as it goes, ending in ``~~<hash>``."""
    return "" if stem == "~empty" else unquote(stem, errors="surrogatepass")
