"""Loading scenario files: YAML or JSON, validated, with errors that name field and line.

An on-call engineer editing a rehearsal file should learn "incidents[2].type:
unknown incident 'broker_crsh' (line 31)" rather than read a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from pydantic import ValidationError

from collectors.config.problems import yaml_line_of
from sandbox.spec import Scenario

DEFAULT_SCENARIO = Path(__file__).with_name("scenarios") / "default.yaml"


class ScenarioError(ValueError):
    """A scenario that cannot be used; the message is meant for the person who wrote it."""


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
            line = yaml_line_of(root, loc)
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
