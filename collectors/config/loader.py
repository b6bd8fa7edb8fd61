"""Loading the configuration: read -> parse YAML -> substitute ``${VAR}`` -> apply ``KMON__`` overrides -> validate.

Why each step is there:

* The YAML loader keeps the node tree, so every problem can name its line, and rejects duplicate keys, which
  PyYAML would otherwise resolve silently by keeping the last one.
* Secrets stay out of the file: ``${VAR}`` / ``${VAR:-default}`` in string values are read from the
  environment, as in the shell.
* ``KMON__...`` environment variables override single values, so a container can change a threshold or a
  broker list without a new file; a problem in an overridden value names the variable, not a line.
* Size, nesting and alias expansion are bounded before anything is validated, because a configuration is a
  few KiB and anything else is the wrong file or an attack on the parser.

Every kind of bad input ends as one `ConfigError` listing every problem found, never as a traceback.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from collectors.config.models import MonitorConfig
from collectors.config.problems import ConfigError, format_loc, one_line, validation_problems, yaml_line_of
from collectors.model.secrets import is_secret_key
from collectors.model.settings import describe_value, shorten
from collectors.model.wording import plural

__all__ = ["ENV_PREFIX", "ENV_SEPARATOR", "MAX_CONFIG_BYTES", "load_config", "parse_config"]

ENV_PREFIX = "KMON__"
"""Environment variables starting with this override file values (see `load_config`)."""
ENV_SEPARATOR = "__"

MAX_CONFIG_BYTES = 1 << 20  # a configuration is a few KiB; anything bigger is the wrong file
MAX_NESTING = 64  # deeper than any valid config; stops recursive YAML aliases (&a [*a])
MAX_NODES = 200_000  # stops alias "billion laughs" expansion during ${VAR} substitution

# Parsed YAML is typed Any below: its shape is exactly what validation is about to find out.
Scalar = str | int | float | bool | None
"""An override value, read like a YAML scalar (see `_parse_scalar`)."""
OverridePath = tuple[str | int, ...]
"""Where an override landed: mapping keys and list indices from the top level."""


class _Loader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys: PyYAML keeps the last one silently, hiding half a block."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: set[object] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    duplicate = key in seen
                    seen.add(key)
                except TypeError:  # unhashable: SafeConstructor reports it below
                    continue
                if duplicate:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping", node.start_mark, f"found duplicate key {key!r}",
                        key_node.start_mark,
                    )
        return super().construct_mapping(node, deep=deep)


def load_config(path: str | Path, environ: Mapping[str, str] | None = None) -> MonitorConfig:
    """Read, substitute, override and validate a YAML configuration file.

    ``environ`` (default ``os.environ``) supplies both ``${VAR}`` / ``${VAR:-default}`` values inside strings
    and ``KMON__`` overrides: ``KMON__POLL_INTERVAL_S=10``, ``KMON__THRESHOLDS__LAG_SECONDS_SLO=600``,
    ``KMON__CLUSTERS__0__BOOTSTRAP_SERVERS=h:9092``, ``KMON__CLUSTERS__1__KAFKA__SASL_USERNAME=monitor``
    (path segments separated by ``__`` and lower-cased; list items by index; under ``kafka`` the rest of the
    name is one setting with ``_`` and ``__`` read as ``.``; values parsed as YAML scalars, quote to force text).

    Raises ConfigError for every kind of bad input, with one ``file[:line]: field.path: problem`` line each.
    """
    source = str(path)
    try:
        with Path(path).open("rb") as fh:
            raw = fh.read(MAX_CONFIG_BYTES + 1)
    except OSError as e:
        raise ConfigError(f"{source}: cannot read configuration file: {e.strerror or e}") from None
    except ValueError as e:  # e.g. a NUL byte in the path
        raise ConfigError(f"{source}: cannot read configuration file: {e}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{source}: larger than {MAX_CONFIG_BYTES} bytes; is this the configuration file?")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{source}: not UTF-8 text (invalid byte at offset {e.start})") from None
    return parse_config(text, source, environ)


def parse_config(text: str, source: str = "<config>", environ: Mapping[str, str] | None = None) -> MonitorConfig:
    """`load_config` for text already in memory; ``source`` names it in error messages."""
    env = os.environ if environ is None else environ
    data, root = _parse_yaml(text, source)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of settings (with 'clusters'), "
                          f"got {describe_value(data)}")
    data = _substitute_all(data, env, source, root)
    overridden = _apply_overrides(data, env, source)
    try:
        return MonitorConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError(validation_problems(e, MonitorConfig, root, overridden, source)) from None


def _parse_yaml(text: str, source: str) -> tuple[Any, yaml.Node | None]:
    loader: _Loader | None = None
    try:
        loader = _Loader(text)  # the reader already rejects some characters here
        root = loader.get_single_node()
        data = loader.construct_document(root) if root is not None else None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f":{mark.line + 1}" if mark else ""
        what = " ".join(x for x in (e.context, e.problem) if x)
        raise ConfigError(f"{source}{where}: not valid YAML: {one_line(what)}") from None
    except yaml.reader.ReaderError as e:
        raise ConfigError(f"{source}: not valid YAML: character #x{e.character:04x} at offset {e.position} "
                          "is not allowed (control characters must be escaped in a double-quoted string)") from None
    except RecursionError:
        raise ConfigError(f"{source}: not valid YAML: nested too deeply") from None
    except Exception as e:  # PyYAML raises bare ValueError etc. on e.g. `2020-13-45`; all of it is bad input
        raise ConfigError(f"{source}: not valid YAML: {one_line(str(e)) or type(e).__name__}") from None
    finally:
        if loader is not None:
            loader.dispose()
    return data, root


# ----- ${VAR} substitution

_VAR_TOKEN = re.compile(r"\$\$\{|\$\{([^{}]*)\}|\$\{")
_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _substitute_all(data: dict[Any, Any], env: Mapping[str, str], source: str,
                    root: yaml.Node | None = None) -> dict[Any, Any]:
    """Replace ``${VAR}``, ``${VAR:-default}`` in every string value (not in keys); ``$${`` is a literal ``${``.

    As in the shell, the default is used when VAR is unset or empty. Collects every problem before raising, each
    with the field and, from `root` (the YAML node tree), its line. Also the place that bounds nesting and size,
    because YAML aliases can make both unbounded.
    """
    problems: list[str] = []
    budget = [MAX_NODES]

    def walk(value: Any, path: tuple[object, ...]) -> Any:
        budget[0] -= 1
        if budget[0] < 0:
            raise ConfigError(f"{source}: too large after expanding YAML aliases")
        if len(path) > MAX_NESTING:
            raise ConfigError(f"{source}: {format_loc(path[:8])}...: nested more than {MAX_NESTING} levels deep")
        if isinstance(value, dict):
            return {k: walk(v, (*path, k)) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, (*path, i)) for i, v in enumerate(value)]
        if isinstance(value, str) and "${" in value:
            line = yaml_line_of(root, path)
            where = f"{source}{f':{line}' if line else ''}: {format_loc(path)}"
            secret = any(isinstance(part, str) and is_secret_key(part) for part in path)
            return _substitute(value, env, lambda msg: problems.append(f"{where}: {msg}"), secret)
        return value

    result = walk(data, ())
    if problems:
        raise ConfigError(problems)
    return result


def _substitute(text: str, env: Mapping[str, str], report: Callable[[str], None], secret: bool = False) -> str:
    """`text` with its references replaced. Under a secret-named key (`secret`) a problem quotes none of the
    value, not even the text between the braces: in ``S3cr${et pass}word`` that is part of the password. The
    variable's name is said there only when the whole value is the one reference (``${KAFKA_PASSWORD}``)."""
    def replace(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "$${":
            return "${"
        body = match.group(1)
        if body is None:
            report("'${' without a matching '}' (nested ${...} is not supported; write $${ for a literal ${)")
            return token
        name, sep, default = body.partition(":-")
        if not _VAR_NAME.fullmatch(name):
            if secret:
                report("a '${...}' in the value is not a valid variable reference (not quoted: the value is "
                       "secret); expected ${NAME} or ${NAME:-default}, or write $${ for a literal ${")
            else:
                report(f"'${{{shorten(name)}}}' is not a valid variable reference; "
                       "expected ${NAME} or ${NAME:-default}")
            return token
        value = env.get(name)
        if sep:
            return value if value else default
        if value is None:
            if secret and token != text:
                report("a '${...}' in the value names an environment variable that is not set (not quoted: the "
                       "value is secret); set it, write ${NAME:-default} to make it optional, or $${ for a "
                       "literal ${")
            else:
                report(f"environment variable {name} is not set (write ${{{name}:-default}} to make it optional)")
            return token
        return value

    return _VAR_TOKEN.sub(replace, text)


# ----- KMON__ overrides


def _apply_overrides(data: dict[Any, Any], env: Mapping[str, str], source: str) -> dict[OverridePath, str]:
    """Apply ``KMON__A__B__0__C=value`` overrides in place; returns {path: variable} to name them in errors.

    Shorter paths are applied first, so ``KMON__CLUSTERS__0__ZOOKEEPER=null`` cannot undo a deeper override.
    Overrides change existing list items but never add any: a new cluster needs its name, so it belongs
    in the file.
    """
    names = sorted((k for k in env if k.startswith(ENV_PREFIX)), key=lambda k: (k.count(ENV_SEPARATOR), k))
    problems: list[str] = []
    applied: dict[OverridePath, str] = {}
    for var in names:
        segments = [s.lower() for s in var[len(ENV_PREFIX) :].split(ENV_SEPARATOR)]
        if not segments or any(not s for s in segments):
            problems.append(f"{var}: empty path segment; expected e.g. {ENV_PREFIX}THRESHOLDS__LAG_SECONDS_SLO")
            continue
        try:
            path = _set_path(data, segments, _parse_scalar(env[var]))
        except ValueError as e:
            problems.append(f"{var}: {e}")
            continue
        applied[path] = var
    if problems:
        raise ConfigError([f"{source}: environment override {p}" for p in problems])
    return applied


def _set_path(data: dict[Any, Any], segments: list[str], value: Scalar) -> OverridePath:
    keys: list[str | int] = []
    container: Any = data
    i = 0
    while i < len(segments):
        seg = segments[i]
        last = i == len(segments) - 1
        if isinstance(container, dict):
            if seg == "kafka" and len(keys) == 2 and keys[0] == "clusters" and not last:
                # librdkafka names contain dots, which environment variable names cannot: SASL_USERNAME and
                # SASL__USERNAME both mean sasl.username (no librdkafka setting contains an underscore).
                rest = ".".join(s.replace("_", ".") for s in segments[i + 1 :])
                settings = container.get(seg)
                if settings is None:
                    settings = container[seg] = {}
                if not isinstance(settings, dict):
                    raise ValueError(f"{format_loc((*keys, seg))} is {describe_value(settings)}, not a mapping")
                settings[rest] = value
                return (*keys, seg, rest)
            if last:
                container[seg] = value
                return (*keys, seg)
            child = container.get(seg)
            if child is None:
                if segments[i + 1].isdigit():
                    raise ValueError(f"{format_loc((*keys, seg))} is not a list in the file; overrides change list "
                                     "items, they cannot add them")
                child = container[seg] = {}
            keys.append(seg)
            container = child
        elif isinstance(container, list):
            if not (seg.isascii() and seg.isdigit()):
                raise ValueError(f"{format_loc(keys)} is a list: expected an item index, got {seg!r}")
            index = int(seg)
            if index >= len(container):
                raise ValueError(f"{format_loc((*keys, index))} does not exist ({format_loc(keys)} has "
                                 f"{plural(len(container), 'item')}); overrides change list items, they cannot add "
                                 "them")
            if last:
                container[index] = value
                return (*keys, index)
            keys.append(index)
            container = container[index]
        else:
            raise ValueError(f"{format_loc(keys)} is {describe_value(container)}, not a mapping or list")
        i += 1
    raise AssertionError("unreachable")  # pragma: no cover


_NULLS = ("null", "Null", "NULL", "~")
_TRUE = ("true", "yes", "on")  # YAML 1.1 booleans, as PyYAML reads them in the file
_FALSE = ("false", "no", "off")
_INT = re.compile(r"[-+]?[0-9]+")
_FLOAT = re.compile(r"[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][-+]?[0-9]+)?")


def _parse_scalar(text: str) -> Scalar:
    """An override value read like a YAML scalar: 10 -> int, 0.5 -> float, true -> bool, null -> None.

    Deliberately narrower than PyYAML: only plain decimal numbers count as numbers (PyYAML would read
    ``12:34`` as 754 and ``0777`` as octal, mangling a password or a port), and anything YAML would turn into
    a list, mapping, date or comment stays the literal text. Quote (``'10'``) to force text.
    """
    s = text.strip()
    if s in _NULLS:
        return None
    if s.lower() in _TRUE:
        return True
    if s.lower() in _FALSE:
        return False
    if len(s) <= 1000 and _INT.fullmatch(s):
        return int(s)
    if len(s) <= 1000 and _FLOAT.fullmatch(s):
        return float(s)
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "'\"":
        try:
            value = yaml.safe_load(s)
        except yaml.YAMLError:
            return text
        if isinstance(value, str):
            return value
    return text
