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
