"""Loading the configuration: read -> parse YAML -> substitute ``${VAR}`` -> apply ``KMON__`` overrides -> validate.

Why each step is there:

* The YAML loader keeps the node tree, so every problem can name its line, and rejects duplicate keys, which
  PyYAML would otherwise resolve silently by keeping the last one.
* Secrets stay out of the file: ``${VAR}`` / ``${VAR:-default}`` in string values are read from the
  environment, as in the shell.
* ``KMON__...`` environment variables override single values, so a container can change a threshold or a
  broker list without a new file; a problem in an overridden value names the variable, not a line. A secret
  and a librdkafka setting are taken as written: ``007`` stays ``007``, not 7 (`_parse_scalar`).
* No problem quotes a secret: not a bad value under a secret-named key, not what a YAML error quotes from
  one (`_yaml_problem`), not text that an override tried to descend into.
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
from collectors.config.redaction import describe_hidden, describe_safely, is_secret_path
from collectors.model.secrets import is_secret_key
from collectors.model.settings import shorten
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
    name is one setting with ``_`` and ``__`` read as ``.``). Values are read as YAML scalars (`_parse_scalar`),
    quote to force text; under a secret-named key and under ``kafka`` they are text as written.

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
        # not quoted: a file that is one scalar may well be a secret file passed by mistake
        raise ConfigError(f"{source}: the top level must be a mapping of settings (with 'clusters'), "
                          f"got {describe_hidden(data)}")
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
        raise ConfigError(f"{source}{where}: not valid YAML: {_yaml_problem(e, text)}") from None
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


_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'" r'|"(?:[^"\\]|\\.)*"')
_TOKEN_NAME = re.compile(r"""'<[a-z ]+>'|'[-?:,\[\]{}]'""")  # PyYAML's names of what it expected or found


def _yaml_problem(error: yaml.MarkedYAMLError, text: str) -> str:
    """PyYAML's own words, minus what it quotes from the document where that is inside a secret value.

    PyYAML quotes alias names, tags and single characters of the text it could not read; in
    ``sasl.password: *Pa55`` the "undefined alias" is most of the password.
    """
    what = one_line(" ".join(x for x in (error.context, error.problem) if x))
    marks = [m.index for m in (error.problem_mark, error.context_mark) if m is not None]
    if marks and _QUOTED.search(what) and _in_secret_value(text, marks):
        what = _QUOTED.sub(lambda m: m[0] if _TOKEN_NAME.fullmatch(m[0]) else "(not quoted: the value is secret)",
                           what)
    return what


def _in_secret_value(text: str, positions: list[int]) -> bool:
    """Whether one of `positions` (character offsets) of the YAML `text` is inside the value of a secret-named key.

    The document is broken somewhere, so it is read event by event only as far as it parses; where it stops is
    where the error is. When unsure, the answer is yes.
    """
    frames: list[list[bool]] = []  # per open mapping or sequence: [is_mapping, at_key, secret, key_is_secret]

    def secret_here() -> bool:
        if not frames:
            return False
        is_mapping, at_key, secret, key_is_secret = frames[-1]
        return secret or (is_mapping and not at_key and key_is_secret)

    def node_done() -> None:
        if frames and frames[-1][0]:
            frames[-1][1] = not frames[-1][1]

    pending = sorted(positions)
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            while pending and pending[0] < event.end_mark.index:  # at or before this event: in its context
                if secret_here():
                    return True
                pending.pop(0)
            if not pending:
                return False
            if isinstance(event, yaml.CollectionStartEvent):
                if frames and frames[-1][0] and frames[-1][1]:  # a complex key (``? [a, b]``) names no setting
                    frames[-1][3] = False
                frames.append([isinstance(event, yaml.MappingStartEvent), True, secret_here(), False])
            elif isinstance(event, yaml.CollectionEndEvent):
                frames.pop()
                node_done()
            elif isinstance(event, yaml.ScalarEvent | yaml.AliasEvent):
                if frames and frames[-1][0] and frames[-1][1]:
                    frames[-1][3] = isinstance(event, yaml.ScalarEvent) and is_secret_key(event.value)
                node_done()
    except yaml.YAMLError:
        return secret_here()
    except Exception:  # whatever else goes wrong, hiding is the safe answer
        return True
    return False


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
            return _substitute(value, env, lambda msg: problems.append(f"{where}: {msg}"), is_secret_path(path))
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
            path = _set_path(data, segments, env[var])
        except ValueError as e:
            problems.append(f"{var}: {e}")
            continue
        applied[path] = var
    if problems:
        raise ConfigError([f"{source}: environment override {p}" for p in problems])
    return applied


def _set_path(data: dict[Any, Any], segments: list[str], text: str) -> OverridePath:
    """Put the override `text` at the path `segments` names, read by `_parse_scalar` as what lands there."""
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
                    raise ValueError(f"{format_loc((*keys, seg))} is {describe_safely(settings, (*keys, seg))}, "
                                     "not a mapping")
                path = (*keys, seg, rest)
                settings[rest] = _override_value(text, path, setting=True)
                return path
            if last:
                container[seg] = _override_value(text, (*keys, seg))
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
                container[index] = _override_value(text, (*keys, index))
                return (*keys, index)
            keys.append(index)
            container = container[index]
        else:
            raise ValueError(f"{format_loc(keys)} is {describe_safely(container, keys)}, not a mapping or list")
        i += 1
    raise AssertionError("unreachable")  # pragma: no cover


_NULLS = ("null", "Null", "NULL", "~")
_BOOLS = {"true": True, "false": False}
_INT = re.compile(r"[-+]?[0-9]+")
_FLOAT = re.compile(r"[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][-+]?[0-9]+)?")


def _override_value(text: str, path: OverridePath, setting: bool = False) -> Scalar:
    """`text` read for the place `path` it lands: as written under a secret-named key and for a librdkafka
    `setting` (librdkafka reads every setting from text), typed like a YAML scalar elsewhere."""
    secret = is_secret_path(path)
    return _parse_scalar(text, verbatim=secret or setting, null=not secret)


def _parse_scalar(text: str, verbatim: bool = False, null: bool = True) -> Scalar:
    """An override value read like a YAML scalar, but never into something else: 10 -> int, 0.5 -> float,
    true -> bool, null -> None, anything else the text as written. Quote (``'10'``) to force text.

    Deliberately narrower than PyYAML, so that a password, a client id or a name is not mangled:

    * A value is typed only when it reads back as written: ``007``, ``+5``, ``yes``, ``on``, ``True`` stay
      text, where PyYAML would make 7, 5 and true. A number or true/false field still reads that text
      (pydantic's lax parsing: ``007`` is 7, ``on`` is true); a text field keeps it.
    * Decimal floats are typed, ``1e6`` included: a count field reads no integer from the text ``1e6``, and
      a text field refuses a float loudly rather than taking it changed.
    * ``verbatim`` (under a secret-named key, and librdkafka settings): the text exactly as written, never a
      number or true/false. Quotes around the whole value are still removed, as everywhere.
    * ``null``: null/~ mean "no value"; off under a secret-named key, where "null" may be the password.
    * Nothing PyYAML would read as a list, mapping, date, octal, sexagesimal (``12:34``) or comment is.
    """
    s = text.strip()
    if null and s in _NULLS:
        return None
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "'\"":
        try:
            value = yaml.safe_load(s)
        except yaml.YAMLError:
            value = None
        if isinstance(value, str):
            return value
    if verbatim:
        return text
    if s in _BOOLS:
        return _BOOLS[s]
    if len(s) <= 1000 and _INT.fullmatch(s):
        return int(s) if str(int(s)) == s else text
    if len(s) <= 1000 and _FLOAT.fullmatch(s):
        return float(s)
    return text
