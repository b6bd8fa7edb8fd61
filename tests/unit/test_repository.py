"""Guards on the repository itself: pinned dependencies keep set-up reproducible."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _requirement_lines(name: str) -> list[str]:
    lines = (ROOT / name).read_text().splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]


def test_every_requirement_is_pinned() -> None:
    for name in ("requirements.txt", "requirements-dev.txt"):
        for line in _requirement_lines(name):
            assert "==" in line, f"{name}: {line!r} is not pinned"


def test_product_packages_are_required() -> None:
    names = {ln.split("==")[0].lower() for ln in _requirement_lines("requirements.txt")}
    for pkg in ("streamlit", "confluent-kafka", "kazoo", "pyspark", "plotly", "prometheus-client",
                "kafka-python"):
        assert pkg in names


HEAVY = {"pyspark", "streamlit", "plotly", "pandas"}  # the collector alone needs none of these


def _pyproject() -> dict:  # type: ignore[type-arg]
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _pins(lines: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in lines:
        name, _, version = line.partition("==")
        key = name.strip().lower()
        assert key not in out, f"{key} listed twice in one list"
        out[key] = version.strip()
    return out


def test_pyproject_pins_equal_requirements_txt() -> None:
    """Core dependencies + the product extras (not dev) are exactly requirements.txt, each at the same version;
    a package needed by two extras (pandas, plotly) is pinned identically in both."""
    project = _pyproject()["project"]
    extras = {k: v for k, v in project["optional-dependencies"].items() if k != "dev"}
    own = project["name"]
    seen: dict[str, str] = {}
    for where, lines in [("dependencies", project["dependencies"]), *extras.items()]:
        for name, version in _pins([ln for ln in lines if not ln.startswith(own)]).items():
            assert version, f"{where}: {name} is not pinned"
            assert seen.setdefault(name, version) == version, f"{name}: {version} in {where}, {seen[name]} elsewhere"
    assert seen == _pins(_requirement_lines("requirements.txt"))
    assert extras["all"] == [f"{own}[{','.join(sorted(k for k in extras if k != 'all'))}]"]
    dev = _pins(_requirement_lines("requirements-dev.txt"))
    for name, version in _pins(project["optional-dependencies"]["dev"]).items():
        assert dev.get(name) == version, f"dev extra {name}=={version} differs from requirements-dev.txt"


def test_core_dependencies_are_the_collector_alone() -> None:
    project = _pyproject()["project"]
    core = set(_pins(project["dependencies"]))
    assert not core & HEAVY, f"core dependencies pull in {core & HEAVY}: move them to an extra"
    extras = project["optional-dependencies"]
    assert {"streamlit", "plotly", "pandas"} <= set(_pins(extras["dashboard"]))
    assert "pyspark" in _pins(extras["report"])


def test_collectors_import_no_dashboard_or_spark_package_at_module_level() -> None:
    """The collector image has only collectors/ and the core dependencies; a top-level import of these would
    break it (a lazy import inside a function used only by the dashboard is allowed)."""
    import ast

    banned = HEAVY | {"dashboard", "spark_analytics", "sandbox"}
    for path in sorted((ROOT / "collectors").rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            for name in names:
                assert name.partition(".")[0] not in banned, f"{path.relative_to(ROOT)}:{node.lineno} imports {name}"


def test_console_scripts_resolve() -> None:
    import importlib

    scripts = _pyproject()["project"]["scripts"]
    assert {"kafka-monitor", "kafka-monitor-report", "kafka-monitor-dashboard"} <= set(scripts)
    for name, target in scripts.items():
        module, _, attr = target.partition(":")
        assert callable(getattr(importlib.import_module(module), attr)), name
