"""Peak resident memory of a bench and of the processes under it, sampled in a thread.

The Spark bench runs its own session's JVM, Spark's Python workers and, for the cold runs, whole CLI processes
with JVMs of their own, at different moments. The sum over all of them is not the JVM's size, so the sampler keeps
the largest process apart (`peak_child`: the JVM) and says what the processes were when their sum peaked
(`peak_parts`), by kind (`kind_of`). A JVM starting a command (Hadoop's local filesystem runs ``chmod`` on each file
Spark writes) forks itself first: for a moment a second ``java SparkSubmit`` holds the same pages, and summed, it
doubled the JVM (3.5 GB "under the bench" in docs/performance-log.md, "Step 21"). Those forks are counted apart
(`jvm_forks`), not in the sum.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter

import psutil

from collectors.model.wording import plural


def kind_of(cmdline: list[str], name: str) -> str:
    """A short label for a process from its command line: ``java <main class>``, ``python -m <module>``,
    ``python -c``, else its name."""
    exe = cmdline[0].rsplit("/", 1)[-1] if cmdline else name
    if exe == "java":
        main = next((a for a in cmdline[1:] if a.startswith("org.") or a.startswith("com.")), "")
        return f"java {main.rsplit('.', 1)[-1]}".strip()
    if exe.startswith("python"):
        for flag in ("-m", "-c"):
            if flag in cmdline[1:]:
                i = cmdline.index(flag)
                return f"python -m {cmdline[i + 1]}" if flag == "-m" and i + 1 < len(cmdline) else f"python {flag}"
        return "python"
    return exe or name


def jvm_forks(procs: list[tuple[int, int, str]]) -> set[int]:
    """The pids among `procs` (pid, parent pid, `kind_of`) that are a JVM's fork in flight: a ``java`` process whose
    parent is a process of the same kind. A JVM never forks itself to work; it does to start a command, and the
    fork shares the parent's pages until it runs the command."""
    kinds = {pid: kind for pid, _, kind in procs}
    return {pid for pid, ppid, kind in procs if kind.startswith("java") and kinds.get(ppid) == kind}


class Sampler:
    """Peak RSS of this process (`peak_self`) and of its child processes, every `every` seconds: all of them
    together (`peak_children`: a CLI process and its JVM), the largest one alone (`peak_child`: the Spark JVM,
    apart from any other process under the bench), and at the sum's peak, which processes made it (`peak_parts`:
    kind -> (processes, bytes)). A JVM's fork (`jvm_forks`) is in neither: it is the JVM's own pages;
    `forks_seen` counts them (once per sample that saw one)."""

    def __init__(self, every: float = 0.2) -> None:
        self.every = every
        self.me = psutil.Process()
        self.peak_self = 0
        self.peak_children = 0
        self.peak_child = 0
        self.peak_parts: dict[str, tuple[int, int]] = {}
        self.forks_seen = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            time.sleep(self.every)

    def sample(self) -> None:
        try:
            self.peak_self = max(self.peak_self, self.me.memory_info().rss)
            procs: list[tuple[int, int, str, int]] = []
            for c in self.me.children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    procs.append((c.pid, c.ppid(), kind_of(c.cmdline(), c.name()), c.memory_info().rss))
            forks = jvm_forks([(pid, ppid, kind) for pid, ppid, kind, _ in procs])
            self.forks_seen += len(forks)
            kids = [(kind, rss) for pid, _, kind, rss in procs if pid not in forks]
            total = sum(rss for _, rss in kids)
            if total > self.peak_children:
                self.peak_children = total
                count: Counter[str] = Counter()
                size: Counter[str] = Counter()
                for kind, rss in kids:
                    count[kind] += 1
                    size[kind] += rss
                self.peak_parts = {k: (count[k], size[k]) for k in sorted(size, key=lambda k: -size[k])}
            self.peak_child = max(self.peak_child, *(rss for _, rss in kids), 0)
        except psutil.Error:
            pass

    def parts(self) -> str:
        """`peak_parts` as a line: ``java SparkSubmit 1,688 MB, python -m pyspark.daemon x3 150 MB``, and the JVM
        forks left out, if any were seen."""
        line = ", ".join(f"{k}{f' x{n}' if n > 1 else ''} {b / 1e6:,.0f} MB" for k, (n, b) in self.peak_parts.items())
        return line + (f"; a JVM's fork seen {plural(self.forks_seen, 'time')}, left out" if self.forks_seen else "")

    def reset(self) -> None:
        self.sample()
        self.peak_self = self.me.memory_info().rss
        self.peak_children = self.peak_child = 0
        self.peak_parts = {}
        self.forks_seen = 0

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
