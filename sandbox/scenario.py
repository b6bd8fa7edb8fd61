"""Loading scenario files: YAML or JSON, validated, with errors that name field and line.

An on-call engineer editing a rehearsal file should learn "incidents[2].type:
unknown incident 'broker_crsh' (line 31)" rather than read a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from sandbox.spec import Scenario

DEFAULT_SCENARIO = Path(__file__).with_name("scenarios") / "default.yaml"


class ScenarioError(ValueError):
    """A scenario that cannot be used; the message is meant for the person who wrote it."""


def _line_of(node: yaml.Node | None, loc: tuple[Any, ...]) -> int | None:
    """1-based line of the YAML node at a pydantic error location (best effort)."""
    line = None
    for part in loc:
        if node is None:
            break
        line = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            node = next((v for k, v in node.value if getattr(k, "value", None) == part), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
        else:
            node = None
    if node is not None:
        line = node.start_mark.line + 1
    return line


def parse_scenario(text: str, source: str = "<scenario>") -> Scenario:
    try:
        root = yaml.compose(text)
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ScenarioError(f"{source}: not valid YAML/JSON: {e}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}: the top level must be a mapping with 'cluster' and 'incidents'")
    try:
        return Scenario.model_validate(data)
    except ValidationError as e:
        lines = []
        for err in e.errors():
            loc = tuple(x for x in err["loc"] if not (isinstance(x, str) and x.startswith("function-")))
            field = ".".join(f"[{x}]" if isinstance(x, int) else str(x) for x in loc).replace(".[", "[")
            line = _line_of(root, loc)
            where = f" (line {line})" if line else ""
            msg = err["msg"].removeprefix("Value error, ")
            lines.append(f"  {field or '<top level>'}: {msg}{where}")
        raise ScenarioError(f"{source}: invalid scenario\n" + "\n".join(lines)) from None


def load_scenario(path: str | Path | None) -> Scenario:
    p = Path(path) if path else DEFAULT_SCENARIO
    try:
        text = p.read_text()
    except OSError as e:
        raise ScenarioError(f"cannot read scenario {p}: {e.strerror}") from None
    if p.suffix == ".json":
        try:
            json.loads(text)
        except json.JSONDecodeError as e:
            raise ScenarioError(f"{p}: not valid JSON: {e.msg} (line {e.lineno})") from None
    return parse_scenario(text, str(p))
