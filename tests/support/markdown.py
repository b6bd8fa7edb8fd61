"""What a Markdown page offers to links, as GitHub renders it: shared by the tests that hold links to their targets."""

from __future__ import annotations

import re


def headings(text: str) -> list[str]:
    """The text of the page's headings, in order (closing ``#``s dropped). Lines inside fenced code blocks are not
    headings."""
    found = []
    in_code = False
    for line in text.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and (m := re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)):
            found.append(m.group(1))
    return found


def anchors(text: str) -> set[str]:
    """The anchors a page offers: explicit `<a id>` tags, and GitHub's ids of its `headings` (lower case,
    punctuation other than `-` and `_` dropped, spaces to `-`, `-1`, `-2`, ... on repeats)."""
    found = set(re.findall(r'<a id="([^"]+)"></a>', text))
    seen: dict[str, int] = {}
    for heading in headings(text):
        slug = re.sub(r"[^\w\- ]", "", re.sub(r"<[^>]+>", "", heading).lower()).replace(" ", "-")
        found.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return found


def prose(text: str) -> str:
    """The page without its fenced code blocks."""
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def links(text: str) -> list[str]:
    """The targets of the page's inline links (`[text](target)`), outside fenced code blocks."""
    return re.findall(r"\]\(([^)\s]+)\)", prose(text))
