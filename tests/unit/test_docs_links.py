"""Links in the README and docs/ lead somewhere, and the code's pointers into the docs name pages and sections that
exist.

The weekly report's performance measurements moved from docs/weekly-report.md into docs/performance-log.md; the
code's docstrings cite them as ``docs/performance-log.md, "Step N"``. A page moved or a step renamed again must
not leave those pointers, or a link in the docs, leading nowhere.
"""

from __future__ import annotations

import functools
import re
import subprocess
from pathlib import Path

import pytest

from tests.support import markdown

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LOG = ROOT / "docs" / "performance-log.md"


def _tracked(*patterns: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files", *patterns], cwd=ROOT, capture_output=True, text=True, check=True)
    return [ROOT / f for f in out.stdout.split()]


@functools.cache
def _anchors(page: Path) -> frozenset[str]:
    """`markdown.anchors` of `page`, parsed once however many links lead to it (weekly-report.md has ~30 into the
    performance log)."""
    return frozenset(markdown.anchors(page.read_text()))


def _broken(page: Path) -> list[str]:
    bad = []
    for target in markdown.links(page.read_text()):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...: not ours to check
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path) if path else page
        if not dest.exists():
            bad.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest.resolve()):
            bad.append(f"{target}: no such anchor in {dest.name}")
    return bad


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_resolves(page: Path) -> None:
    broken = _broken(page)
    assert not broken, f"{page.relative_to(ROOT)}: {broken}"


def test_the_link_check_catches_a_missing_page_and_anchor(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Title\n\n## Two words\n\n```\n## not a heading\n```\n")
    page = tmp_path / "b.md"
    page.write_text("[ok](a.md#two-words) [self](#here) <a id=\"here\"></a> [web](https://x.org/y#z)\n"
                    "[gone](c.md) [no anchor](a.md#not-a-heading)\n```\n[in code](d.md)\n```\n")
    assert _broken(page) == ["c.md: no such file", "a.md#not-a-heading: no such anchor in a.md"]


def test_performance_log_steps_are_numbered_and_anchored() -> None:
    text = LOG.read_text()
    headings = [int(n) for n in re.findall(r"^## Step (\d+) \(", text, flags=re.M)]
    assert headings == list(range(1, len(headings) + 1)) and len(headings) >= 24
    offered = markdown.anchors(text)
    assert {f"step-{n}" for n in headings} <= offered


def test_every_cited_step_exists() -> None:
    """``docs/performance-log.md, "Step N"`` in code and docs, and ``performance-log.md#step-N`` links."""
    steps = {int(a.removeprefix("step-")) for a in markdown.anchors(LOG.read_text()) if re.fullmatch(r"step-\d+", a)}
    cited: dict[int, list[str]] = {}
    for f in _tracked("*.py", "*.md"):
        text = f.read_text()
        for m in re.finditer(r'performance-log\.md(?:,?\s*(?:#\s*)?[\"*]Step |#step-)(\d+)', text):
            cited.setdefault(int(m.group(1)), []).append(str(f.relative_to(ROOT)))
    assert len(cited) >= 10, "the code cites the log's steps"
    assert not {n: where for n, where in cited.items() if n not in steps}


CITED_SECTION = re.compile(r'\b((?:docs/)?[\w-]+\.md),\s+(?:"([^"\n]+)"|\*([^*\n]+)\*)')
"""A section cited by name: ``docs/weekly-report.md, "Daily roll-ups"`` in code, ``weekly-report.md, *Week over
week*`` in the docs."""


@functools.cache
def _sections(page: Path) -> tuple[str, ...]:
    """What a citation may name on `page`: its headings (without Markdown marks) and its bold run-in heads; parsed
    once however many citations name the page."""
    text = page.read_text()
    heads = markdown.headings(text) + re.findall(r"\*\*([^*\n]+)\*\*", markdown.prose(text))
    return tuple(re.sub(r"[`*]", "", h).strip().lower() for h in heads)


def _stale_citations(files: list[Path]) -> list[str]:
    """Citations whose page has no heading beginning with the cited words (a short name may stand for a long
    heading: *What is read* for "What is read, and how missing data is handled")."""
    bad = []
    for f in files:
        for m in CITED_SECTION.finditer(f.read_text()):
            name, title = m.group(1), (m.group(2) or m.group(3)).strip().lower()
            if title.startswith("step "):  # held by test_every_cited_step_exists
                continue
            page = (ROOT / name if name.startswith("docs/") or name == "README.md" else ROOT / "docs" / name).resolve()
            if not page.exists():
                bad.append(f"{f.name}: {m.group(0)}: no such page")
            elif not any(h.startswith(title) for h in _sections(page)):
                bad.append(f"{f.name}: {m.group(0)}: no such section")
    return bad


def test_every_cited_section_exists() -> None:
    """A section renamed or moved to another page must take the code's and the docs' citations of it along."""
    here = Path(__file__).resolve()  # its own cases below cite stale sections on purpose
    files = [f for f in _tracked("*.py", "*.md", "*.yml", "*.yaml") if f != here]
    cited = [m for f in files for m in CITED_SECTION.finditer(f.read_text())]
    assert len(cited) >= 8, "the code and docs cite sections by name"
    assert not _stale_citations(files)


def test_the_section_check_catches_a_stale_citation(tmp_path: Path) -> None:
    code = tmp_path / "job.py"
    code.write_text('# docs/weekly-report.md, "Daily roll-ups" and docs/weekly-report.md, "Where the time goes"\n'
                    "# history-schema.md, *What is read* and nowhere.md, *Anything*\n")
    assert _stale_citations([code]) == [
        'job.py: docs/weekly-report.md, "Where the time goes": no such section',
        "job.py: history-schema.md, *What is read*: no such section",
        "job.py: nowhere.md, *Anything*: no such page",
    ]


def test_docs_the_code_names_exist() -> None:
    named = set()
    for f in _tracked("*.py", "*.yaml", "*.yml", "*.toml", "*.sh", "Dockerfile"):
        named |= set(re.findall(r"\bdocs/[\w./-]+\.md\b", f.read_text()))
    assert "docs/performance-log.md" in named
    assert not sorted(n for n in named if not (ROOT / n).exists())
