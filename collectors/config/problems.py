"""Configuration problems, written for the person editing the file: ``file:line: field.path: what was expected``.

One line per problem, all of them at once, and never a traceback: the person reading it is editing YAML at
3 a.m., not debugging Python. Pydantic's errors are rewritten here because they name Python types and locations
("Input should be a valid integer [type=int_parsing, input_value='ten', ...]"); the YAML node tree supplies the
line, and the model tree supplies the valid keys when one is misspelt.

The model tree is walked through the fields' annotations (`_model_at`), not through any list of sections, so a
section defined in another room (thresholds in ``collectors.alerting``, the cluster sections in
``collectors.sources``) is found as soon as the root model refers to it.
"""

from __future__ import annotations

import difflib
import json
import re
import types
from collections.abc import Mapping, Sequence
from typing import Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from collectors.config.redaction import describe_hidden, is_secret_path, may_hold_secret
from collectors.model.settings import describe_value, shorten
from collectors.model.wording import plural

__all__ = ["MAX_REPORTED_PROBLEMS", "ConfigError", "format_loc", "one_line", "validation_problems", "yaml_line_of"]

MAX_REPORTED_PROBLEMS = 50
"""A file with more problems than this is the wrong file; listing them all would only bury the first ones."""


class ConfigError(ValueError):
    """A configuration that cannot be used. One line per problem, written for the person editing the file.

    ``problems`` holds the same lines as a list, for callers that want to count or show them separately.
    """

    def __init__(self, problems: str | list[str]) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def format_loc(loc: Sequence[object]) -> str:
    """``('clusters', 0, 'kafka', 'sasl.password')`` -> ``clusters[0].kafka["sasl.password"]``."""
    out = ""
    for part in loc:
        if isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
        elif isinstance(part, str) and _IDENT.fullmatch(part):
            out += f".{part}" if out else part
        else:
            out += f"[{json.dumps(shorten(str(part)), ensure_ascii=False)}]"
    return out or "<top level>"


def one_line(text: str) -> str:
    """Collapse whitespace, so a multi-line message from a library stays one problem line."""
    return " ".join(text.split())


def validation_problems(error: ValidationError, model: type[BaseModel], root: yaml.Node | None,
                        overridden: Mapping[tuple[int | str, ...], str], source: str) -> list[str]:
    """One line per error of validating ``model``; ``root`` gives lines, ``overridden`` names KMON__ variables."""
    lines = []
    for err in error.errors():
        loc = tuple(x for x in err["loc"] if not (isinstance(x, str) and x.startswith("function-")))
        lines.append(_problem_line(err, loc, model, root, overridden, source))
    if len(lines) > MAX_REPORTED_PROBLEMS:
        more = len(lines) - MAX_REPORTED_PROBLEMS
        lines = [*lines[:MAX_REPORTED_PROBLEMS], f"{source}: ... and {plural(more, 'more problem')}"]
    return lines


def _problem_line(err: ErrorDetails, loc: tuple[int | str, ...], model: type[BaseModel], root: yaml.Node | None,
                  overridden: Mapping[tuple[int | str, ...], str], source: str) -> str:
    kind = err["type"]
    msg = err["msg"].removeprefix("Value error, ")
    value = err.get("input")
    if kind == "missing":
        msg = "required field is missing"
    elif kind == "extra_forbidden":
        msg = _unknown_key_message(model, loc)
    elif may_hold_secret(value, loc):
        msg = _scrub(msg, value)
        if kind not in ("value_error", "assertion_error") and not is_secret_path(loc):
            msg = f"{msg} (got {describe_hidden(value)})"
    elif kind not in ("value_error", "assertion_error"):
        msg = f"{msg} (got {describe_value(value)})"
    origin = next((var for path, var in overridden.items() if loc[: len(path)] == path), None)
    if origin:
        return f"{source}: {format_loc(loc)}: {msg} (from environment variable {origin})"
    line = yaml_line_of(root, loc)
    return f"{source}{f':{line}' if line else ''}: {format_loc(loc)}: {msg}"


def _scrub(msg: str, value: object) -> str:
    """`msg` without the ways a validator quotes `value` (`describe_value`, repr, JSON): a problem under a
    secret-named key, or about text that names a secret setting, never quotes the value it got."""
    shown = [describe_value(value)]
    if isinstance(value, str):
        shown += [repr(value), repr(value.strip()), json.dumps(value, ensure_ascii=False),
                  json.dumps(shorten(value), ensure_ascii=False)]
    for text in shown:
        msg = msg.replace(text, describe_hidden(value))
    return msg


def _unknown_key_message(model: type[BaseModel], loc: tuple[int | str, ...]) -> str:
    where = _model_at(model, loc[:-1])
    if where is None or not loc:
        return "unknown key"
    fields = list(where.model_fields)
    close = difflib.get_close_matches(str(loc[-1]), fields, n=1)
    if close:
        return f"unknown key; did you mean {close[0]!r}?"
    return f"unknown key; expected one of: {', '.join(fields)}"


def _model_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The model class that validates the mapping at ``loc`` below ``model`` (for listing its valid keys)."""
    current: object = model
    for part in loc:
        if isinstance(part, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)) or part not in current.model_fields:
            return None
        current = _unwrap(current.model_fields[part].annotation)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unwrap(annotation: object) -> object:
    """list[X] -> X, X | None -> X, so the walk reaches the model class inside."""
    origin = get_origin(annotation)
    if origin is list:
        return _unwrap(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        models = [a for a in get_args(annotation) if isinstance(a, type) and issubclass(a, BaseModel)]
        return models[0] if models else annotation
    return annotation


def yaml_line_of(node: yaml.Node | None, loc: Sequence[object]) -> int | None:
    """1-based line of the deepest YAML node along ``loc`` (best effort: the parent when the key is missing)."""
    line = None
    for part in loc:
        if node is None:
            break
        line = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            node = next((v for k, v in node.value if getattr(k, "value", None) == part), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            node = node.value[part]
        else:
            node = None
    if node is not None:
        line = node.start_mark.line + 1
    return line
