"""What a Markdown page offers to links, as GitHub renders it: shared by the tests that hold links to their targets."""

from __future__ import annotations

import re


def anchors(text: str) -> set[str]:
    """The anchors a page offers: explicit `<a id>` tags, and GitHub's ids of its headings (lower case,
    punctuation other than `-` and `_` dropped, spaces to `-`, `-1`, `-2`, ... on repeats). Lines inside fenced
    code blocks are not headings."""
    found = set(re.findall(r'<a id="([^"]+)"></a>', text))
    seen: dict[str, int] = {}
    in_code = False
    for line in text.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        m = None if in_code else re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", re.sub(r"<[^>]+>", "", m.group(1)).lower()).replace(" ", "-")
        found.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return found


def links(text: str) -> list[str]:
    """The targets of the page's inline links (`[text](target)`), outside fenced code blocks."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.findall(r"\]\(([^)\s]+)\)", prose)
