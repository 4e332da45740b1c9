"""Avro schema resolution, statically (pure): when is reading writer data as the reader schema a plain mapping?

The per-record path (``cdc.decode.avro``) lets fastavro resolve every value from its writer schema to the reader
schema (the subject's newest). The vectorised path decodes with the writer schema alone and then has to apply the
same resolution in Arrow: reader fields the writer lacks get the reader default, writer fields the reader lacks are
dropped, ``int → long`` and ``float → double`` are promoted. ``resolvable`` says whether a writer/reader pair needs
nothing more than that (and cannot make fastavro fail on any datum); anything else (aliases, other promotions,
union shape changes, narrowing, a reader field without a default) stays on the per-record path.
"""

from __future__ import annotations

import io
from typing import Any, Iterable, Mapping

from fastavro import parse_schema, schemaless_reader
from fastavro.schema import expand_schema

_PROMOTIONS = {("int", "long"), ("float", "double")}
_LOGICAL_KEYS = ("logicalType", "precision", "scale", "size")
_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}


def expanded(schema: Any) -> Any:
    """The schema with every named-type reference inlined and names made full (``after: ["null", "Value"]``
    becomes the ``Value`` record itself)."""
    return expand_schema(schema)


def _node(s: Any) -> Any:
    while isinstance(s, dict) and isinstance(s.get("type"), (dict, list)):
        s = s["type"]  # {"type": {"type": ...}} nesting
    return s


def _primitive(s: Any) -> str | None:
    if isinstance(s, str):
        return s if s in _PRIMITIVES else None
    if isinstance(s, dict) and s.get("type") in _PRIMITIVES:
        return s["type"]
    return None


def _logical(s: Any) -> tuple[Any, ...]:
    return tuple(s.get(k) for k in _LOGICAL_KEYS) if isinstance(s, dict) else (None,) * len(_LOGICAL_KEYS)


def resolvable(writer: Any, reader: Any) -> bool:
    """True if fastavro reads every datum of ``writer`` as ``reader`` by field matching, default filling and the
    two promotions only (both schemas expanded, see ``expanded``)."""
    w, r = _node(writer), _node(reader)
    if w == r:
        return True
    if isinstance(w, list) or isinstance(r, list):  # unions: same shape, branch by branch
        return (isinstance(w, list) and isinstance(r, list) and len(w) == len(r)
                and all(resolvable(a, b) for a, b in zip(w, r)))
    pw, pr = _primitive(w), _primitive(r)
    if pw is not None or pr is not None:
        return (pw is not None and pr is not None and _logical(w) == _logical(r)
                and (pw == pr or (pw, pr) in _PROMOTIONS))
    if not (isinstance(w, dict) and isinstance(r, dict)) or w.get("type") != "record" or r.get("type") != "record":
        return False  # enums, fixed, arrays, maps that differ at all
    if w.get("name") != r.get("name") or "aliases" in r:
        return False
    wfields = {f["name"]: f for f in w.get("fields", ())}
    for f in r.get("fields", ()):
        if "aliases" in f:
            return False
        if f["name"] in wfields:
            if not resolvable(wfields[f["name"]]["type"], f["type"]):
                return False
        elif "default" not in f:
            return False
    return True


def record_fields(record: Any) -> dict[str, Any]:
    """Field name → field of an (expanded) record schema."""
    r = _node(record)
    return {f["name"]: f for f in r.get("fields", ())} if isinstance(r, dict) else {}


def row_record(envelope: Any, name: str) -> Any:
    """The record schema of the envelope field ``name`` (``before`` / ``after``) of an expanded envelope, or None."""
    for f in _node(envelope).get("fields", ()):
        if f["name"] == name:
            t = _node(f["type"])
            for b in t if isinstance(t, list) else [t]:
                b = _node(b)
                if isinstance(b, dict) and b.get("type") == "record":
                    return b
    return None


def _first_kind(t: Any) -> Any:
    t = t[0] if isinstance(t, list) and t else t  # a union's default is a value of its first branch
    while isinstance(t, dict):
        t = t.get("type")
    return t


def bytes_defaults(parsed: Any) -> Any:
    """Avro writes ``bytes``/``fixed`` defaults as JSON strings of ISO-8859-1 code points and fastavro hands them back
    as that ``str``; turn them into the bytes they stand for (in place, on a parsed schema) so a field the writer
    lacks reads as its default (``b"\\xff"``, a decimal's unscaled bytes) instead of failing conversion."""
    seen: set[int] = set()

    def walk(node: Any) -> None:
        if isinstance(node, list):
            for x in node:
                walk(x)
            return
        if not isinstance(node, dict) or id(node) in seen:
            return
        seen.add(id(node))
        for f in node.get("fields", ()) if node.get("type") in ("record", "error") else ():
            d = f.get("default")
            if isinstance(d, str) and _first_kind(f["type"]) in ("bytes", "fixed"):
                try:
                    f["default"] = d.encode("latin-1")
                except UnicodeEncodeError:
                    pass  # not a valid bytes default: left as fastavro has it
            walk(f["type"])
        for k in ("type", "items", "values"):
            if isinstance(node.get(k), (dict, list)):
                walk(node[k])

    walk(parsed)
    return parsed


def reader_defaults(reader_record: Any, names: Iterable[str]) -> dict[str, Any]:
    """The values fastavro gives reader fields ``names`` when the writer lacks them (decoded exactly as the
    per-record path decodes them: an empty writer record of the same name, resolved to those fields)."""
    r = _node(reader_record)
    wanted = set(names)
    sub = {"type": "record", "name": r["name"], "fields": [f for f in r.get("fields", ()) if f["name"] in wanted]}
    empty = {"type": "record", "name": r["name"], "fields": []}
    return schemaless_reader(io.BytesIO(b""), parse_schema(empty), bytes_defaults(parse_schema(sub)))


def same_fields(a: Mapping[str, Any], b: Mapping[str, Any], names: Iterable[str]) -> bool:
    """True if each of ``names`` is in both records or in neither."""
    return all((n in a) == (n in b) for n in names)


__all__ = ["bytes_defaults", "expanded", "reader_defaults", "record_fields", "resolvable", "row_record",
           "same_fields"]
