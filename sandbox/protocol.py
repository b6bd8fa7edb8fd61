"""Kafka wire-protocol plumbing over kafka-python 3.x's generated message classes.

The classes are generated from Kafka's own JSON schemas, so encoding through
them keeps the sandbox byte-compatible with real clients without a hand-written
codec. This module holds the mechanics (framing, header parsing, building
nested responses from plain dicts) and the contract between the listener and
the handlers: which APIs are served at all, and the exception a handler raises
for one it cannot serve. Both sides import it from here, so neither imports the
other; what to answer lives in `handlers`, the socket side in `server`.
"""

from __future__ import annotations

import functools
import operator
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import kafka.protocol.admin
import kafka.protocol.consumer
import kafka.protocol.metadata
import kafka.protocol.producer  # noqa: F401  (imported for class registration)
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.data_container import DataContainer
from kafka.protocol.schemas.fields import StructArrayField, StructField

M = TypeVar("M", bound=DataContainer)  # a message, or a struct nested in one

UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42


def _all_message_classes() -> list[type[ApiMessage]]:
    out: list[type[ApiMessage]] = []
    stack = list(ApiMessage.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if getattr(cls, "_class_version", None) is None:
            out.append(cls)
    return out


@dataclass(frozen=True)
class ApiPair:
    """Request and response classes for one API key, with the schema's version range."""

    key: int
    name: str
    request: type[ApiMessage]
    response: type[ApiMessage]
    min_version: int
    max_version: int


def _registry() -> dict[int, ApiPair]:
    requests: dict[int, type[ApiMessage]] = {}
    responses: dict[int, type[ApiMessage]] = {}
    for cls in _all_message_classes():
        (requests if cls.is_request() else responses)[cls.API_KEY] = cls
    pairs = {}
    for key, req in requests.items():
        if key in responses:
            # The JSON schema's validVersions, not the class's relaxed minimum of 0.
            lo, hi = req.valid_versions
            pairs[key] = ApiPair(key, req.name.removesuffix("Request"), req, responses[key], lo, hi)
    return pairs


APIS: dict[int, ApiPair] = _registry()


@dataclass
class Request:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: ApiMessage | None


def peek_header(frame: bytes) -> tuple[int, int, int]:
    """Api key, version and correlation id: the first 8 bytes of every request header."""
    return struct.unpack(">hhi", frame[:8])


def decode_request(frame: bytes) -> Request:
    """Decode one unframed request; body is None when the key or version is not known."""
    api_key, api_version, correlation_id = peek_header(frame)
    pair = APIS.get(api_key)
    if pair is None or not 0 <= api_version <= pair.request.max_version:
        return Request(api_key, api_version, correlation_id, None, None)
    body = pair.request.decode(frame, version=api_version, header=True)
    client_id = getattr(body.header, "client_id", None) if body.header is not None else None
    return Request(api_key, api_version, correlation_id, client_id, body)


def build(cls: type[M], version: int, fields: Mapping[str, Any]) -> M:
    """Instantiate a (nested) message class from a plain dict, recursing into struct arrays.

    The handlers describe answers as dicts; building the generated nested classes
    here keeps the encoding right for every version without handler code caring.
    Elements of struct arrays become tuples in the version's field order rather than
    message objects (see `_rows`): kafka-python's compiled encoders take either, and
    a 20,000-partition Metadata answer would otherwise spend most of its time
    constructing one object per partition.
    """
    kwargs: dict[str, Any] = {}
    by_name = _fields_by_name(cls)
    for name, value in fields.items():
        field = by_name.get(name)
        if field is None:
            raise KeyError(f"{cls.__name__} has no field {name!r}")
        if isinstance(field, StructArrayField) and value is not None:
            value = _rows(getattr(cls, field._type_str[2:]), version, value)
        elif isinstance(field, StructField) and isinstance(value, Mapping):
            nested = getattr(cls, field._type_str)
            value = build(nested, version, value)
        kwargs[name] = value
    return cls(version=version, **kwargs)


@functools.cache
def _fields_by_name(cls: type[DataContainer]) -> dict[str, Any]:
    return {f.name: f for f in cls._struct._fields}


def _rows(cls: type[DataContainer], version: int, items: list[Any]) -> list[Any]:
    """The elements of one struct array, ready for the compiled encoder: tuples where that is exact.

    A tuple carries the untagged fields in the version's order (missing keys get the schema default, as
    the message classes give them), so it encodes to the same bytes as the object would. Where an element
    sets a tagged field, nests a single struct, or is not a dict, the array is built as message objects.
    A key no version of the struct knows raises, as with the objects; it is looked for in the first element
    only (a handler builds every element of an array alike).
    """
    maker = _row_maker(cls, version)
    if maker is None or not all(type(v) is dict for v in items):
        return [build(cls, version, v) if isinstance(v, Mapping) else v for v in items]
    if items:
        unknown = items[0].keys() - _fields_by_name(cls).keys()
        if unknown:
            raise KeyError(f"{cls.__name__} has no field {sorted(unknown)[0]!r}")
        tagged = _tagged_names(cls, version)
        if tagged and any(v.get(n, d) != d for v in items for n, d in tagged):
            return [build(cls, version, v) for v in items]
    return [maker(v) for v in items]


@functools.cache
def _tagged_names(cls: type[DataContainer], version: int) -> tuple[tuple[str, Any], ...]:
    return tuple((f.name, f.default) for f in cls._struct.tagged_fields(version)._fields)


@functools.cache
def _row_maker(cls: type[DataContainer], version: int) -> Callable[[dict[str, Any]], tuple[Any, ...]] | None:
    """dict → tuple for one struct at one version; None where a tuple cannot stand for the object."""
    fields = cls._struct.untagged_fields(version)
    if not fields or any(isinstance(f, StructField) for f in fields):
        return None  # a nested single struct is read by attribute even inside a tuple
    names = tuple(f.name for f in fields)
    defaults = {f.name: f.default for f in fields}
    arrays = tuple((i, getattr(cls, f._type_str[2:])) for i, f in enumerate(fields)
                   if isinstance(f, StructArrayField))
    pick = operator.itemgetter(*names)
    single = len(names) == 1

    def make(v: dict[str, Any]) -> tuple[Any, ...]:
        try:
            row = (pick(v),) if single else pick(v)
        except KeyError:
            row = tuple(v[n] if n in v else defaults[n] for n in names)
        if arrays:
            out = list(row)
            for i, nested in arrays:
                if out[i] is not None:
                    out[i] = _rows(nested, version, out[i])
            return tuple(out)
        return row

    return make


def encode_response(api_key: int, version: int, correlation_id: int, fields: Mapping[str, Any]) -> bytes:
    """Encode a framed response with its header."""
    pair = APIS[api_key]
    msg = build(pair.response, version, fields)
    msg.with_header(correlation_id=correlation_id)
    return bytes(msg.encode(header=True, framed=True))


def response_field_names(api_key: int) -> set[str]:
    return {f.name for f in APIS[api_key].response._struct._fields}


# ---------------------------------------------------------------------- what the sandbox serves
# The API keys `sandbox.handlers.Handlers` answers. The listener needs them too (the ApiVersions error answer
# lists them), which is why they live here, where both import them, and not in handlers.
IMPLEMENTED = {18, 3, 60, 32, 16, 15, 10, 9, 2, 23, 66, 65, 61, 55}
KRAFT_ONLY = {55}  # DescribeQuorum: a ZooKeeper-mode broker does not know it


class UnsupportedRequest(Exception):
    """Raised by a handler for an API (or version) the sandbox does not implement."""


def supported_api_versions(mode: str = "zookeeper") -> list[dict[str, int]]:
    """What ApiVersions advertises: implemented keys only, in the schemas' version ranges."""
    out = []
    for key in sorted(IMPLEMENTED):
        if key in KRAFT_ONLY and mode != "kraft":
            continue
        pair = APIS[key]
        out.append({"api_key": key, "min_version": pair.min_version, "max_version": pair.max_version})
    return out
