"""The rooms and their doors: which package may import which (the README's code map, enforced).

Imports point inward. `collectors.model` is the centre and imports none of the others; the rooms around
it (sources, alerting, outputs) import the model and their own room; config and runtime are the outer
layer that composes everything. The dashboard and the Spark job read the collector's records and files,
so they may import the model, the outputs (history, latest state, paths) and the rule catalogue — never a
source (they do not talk to Kafka) or the runtime. The dashboard shows the weekly report as the Spark job
lays it out and formats it, through the three report-contract modules that need no Spark.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

ALLOWED: dict[str, set[str]] = {
    "collectors.model": {"collectors.model"},
    "collectors.sources": {"collectors.model", "collectors.sources"},
    "collectors.alerting": {"collectors.model", "collectors.alerting"},
    "collectors.outputs": {"collectors.model", "collectors.outputs"},
    "collectors.config": {"collectors.model", "collectors.sources", "collectors.alerting", "collectors.outputs",
                          "collectors.config"},
    "collectors.runtime": {"collectors"},
    "dashboard": {"dashboard", "collectors.model", "collectors.outputs", "collectors.alerting.catalogue",
                  "spark_analytics.layout", "spark_analytics.formatting", "spark_analytics.figures"},
    "spark_analytics": {"spark_analytics", "collectors.model", "collectors.outputs",
                        "collectors.alerting.thresholds"},  # the collector's defaults, when history has none
}


def _room(module: str) -> str:
    for room in sorted(ALLOWED, key=len, reverse=True):
        if module == room or module.startswith(room + "."):
            return room
    return module


def _imports(path: Path) -> list[str]:
    """Every project module the file imports, at top level or inside functions and TYPE_CHECKING blocks."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            top = node.module in ("collectors", "dashboard", "spark_analytics", "sandbox", "bench")
            names = [f"{node.module}.{a.name}" for a in node.names] if top else [node.module]
            out.extend(names)
        elif isinstance(node, ast.Import):
            out.extend(a.name for a in node.names)
    return [m for m in out if m.split(".")[0] in ("collectors", "dashboard", "spark_analytics", "sandbox", "bench")]


def _files() -> list[Path]:
    return sorted(p for d in ("collectors", "dashboard", "spark_analytics") for p in (ROOT / d).rglob("*.py"))


@pytest.mark.parametrize("path", _files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_point_inward(path: Path) -> None:
    module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    room = _room(module)
    if room not in ALLOWED:
        assert module in ("collectors", "collectors.__init__", "collectors.__main__"), f"{module} has no room"
        return
    allowed = ALLOWED[room]
    bad = [m for m in _imports(path) if not any(m == a or m.startswith(a + ".") for a in allowed)]
    assert not bad, f"{module} ({room}) may import only {sorted(allowed)}; it imports {bad}"


def test_the_rooms_are_all_there() -> None:
    rooms = {p.name for p in (ROOT / "collectors").iterdir() if (p / "__init__.py").exists()}
    assert rooms == {"model", "sources", "alerting", "outputs", "config", "runtime"}
    loose = sorted(p.name for p in (ROOT / "collectors").glob("*.py"))
    assert loose == ["__init__.py", "__main__.py"], "every module of collectors/ lives in a room"


def test_no_module_over_700_lines() -> None:
    big = []
    for d in ("collectors", "dashboard", "spark_analytics", "sandbox"):
        for p in (ROOT / d).rglob("*.py"):
            n = len(p.read_text().splitlines())
            if n > 700:
                big.append(f"{p.relative_to(ROOT)}: {n}")
    assert not big, big


def test_the_dashboard_needs_no_spark() -> None:
    """The report-contract modules the dashboard imports load without pyspark (the dashboard image has none)."""
    import subprocess
    import sys

    code = ("import sys, dashboard.data, dashboard.views.reports, dashboard.views.common; "
            "bad = sorted(m for m in sys.modules if m.startswith(('pyspark', 'collectors.sources', 'kafka'))); "
            "print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
