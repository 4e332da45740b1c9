"""Property: over random Debezium Avro schema histories, the vectorised path stages exactly the per-record rows.

A history starts with ``id`` (the key) plus a few columns and evolves by random steps: add a column (nullable with
or without a default, required with a default, non-null default first in the union), drop a column, widen
int → long / float → double. Records of every version are interleaved (creates, snapshot reads, updates with and
without a before image, deletes with and without one, truncates, tombstones, nulls, TOAST placeholders, the odd
missing position); the table's existing columns are those of a random prefix of the history, planned the way the
job plans them. Derandomized with a moderate example count so ``make test`` stays fast and stable.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import fastavro
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdc.decode.avro import _row_struct
from cdc.decode.connect_types import columns_of, from_avro
from cdc.schema import evolution
from devtools.registry import LocalSchemaRegistry
from tests.unit.cdc.decode.avro_history import (
    PLACEHOLDER,
    envelope,
    first_difference,
    key_schema,
    pg_source,
    register,
    stage_both,
    wire,
)

_DEC = {"type": "bytes", "scale": 2, "precision": 10, "logicalType": "decimal",
        "connect.name": "org.apache.kafka.connect.data.Decimal",
        "connect.parameters": {"scale": "2", "connect.decimal.precision": "10"}}
TYPES: dict[str, Any] = {  # kind → Avro type as the AvroConverter writes it
    "int": "int", "long": "long", "float": "float", "double": "double", "string": "string", "bytes": "bytes",
    "boolean": "boolean", "date": {"type": "int", "connect.name": "io.debezium.time.Date"},
    "micros": {"type": "long", "connect.name": "io.debezium.time.MicroTimestamp"},
    "json": {"type": "string", "connect.name": "io.debezium.data.Json"}, "decimal": _DEC,
}
DEFAULTS: dict[str, list[Any]] = {  # Avro JSON defaults per kind (bytes: ISO-8859-1 code points)
    "int": [7, -1], "long": [2**40], "float": [1.5], "double": [-0.25], "string": ["dflt", PLACEHOLDER],
    "bytes": ["\u00ff\u0001", PLACEHOLDER], "boolean": [True], "date": [19000], "micros": [1_700_000_000_000_000],
    "json": ['{"a":1}'], "decimal": ["\u0001\u0000"],
}
WIDER = {"int": "long", "float": "double"}
FORMS = ("required", "nullable", "nullable_no_default", "required_default", "value_first_default")


@dataclass(frozen=True)
class Field:
    name: str
    kind: str
    form: str
    default: Any = None

    def avro(self) -> dict[str, Any]:
        t = copy.deepcopy(TYPES[self.kind])
        if self.form == "required":
            return {"name": self.name, "type": t}
        if self.form == "nullable":
            return {"name": self.name, "type": ["null", t], "default": None}
        if self.form == "nullable_no_default":
            return {"name": self.name, "type": ["null", t]}
        if self.form == "required_default":
            return {"name": self.name, "type": t, "default": self.default}
        return {"name": self.name, "type": [t, "null"], "default": self.default}

    @property
    def nullable(self) -> bool:
        return self.form in ("nullable", "nullable_no_default", "value_first_default")


@st.composite
def fields(draw: Any, name: str) -> Field:
    kind = draw(st.sampled_from(sorted(TYPES)))
    form = draw(st.sampled_from(FORMS))
    default = draw(st.sampled_from(DEFAULTS[kind])) if form in ("required_default", "value_first_default") else None
    return Field(name, kind, form, default)


@st.composite
def histories(draw: Any) -> list[list[Field]]:
    """Schema versions (each a list of row fields, ``id`` first)."""
    names = (f"c{i}" for i in itertools.count())
    first = [Field("id", "long", "required")] + [draw(fields(next(names))) for _ in range(draw(st.integers(1, 3)))]
    versions = [first]
    for _ in range(draw(st.integers(1, 4))):
        cur = list(versions[-1])
        step = draw(st.sampled_from(("add", "drop", "widen")))
        if step == "add":
            cur.append(draw(fields(next(names))))
        elif step == "drop" and len(cur) > 1:
            cur.pop(draw(st.integers(1, len(cur) - 1)))
        elif step == "widen":
            cands = [i for i, f in enumerate(cur) if f.kind in WIDER]
            if cands:
                i = draw(st.sampled_from(cands))
                f = cur[i]
                default = float(f.default) if isinstance(f.default, int) and f.kind == "float" else f.default
                cur[i] = Field(f.name, WIDER[f.kind], f.form, default)
        versions.append(cur)
    return versions


def _value(draw: Any, f: Field) -> Any:
    if f.nullable and draw(st.integers(0, 4)) == 0:
        return None
    k = f.kind
    if k in ("string", "json", "bytes") and draw(st.integers(0, 3)) == 0:
        return PLACEHOLDER if k != "bytes" else PLACEHOLDER.encode()
    return draw({
        "int": st.integers(-(2**31), 2**31 - 1), "long": st.integers(-(2**63), 2**63 - 1),
        "float": st.floats(width=32, allow_nan=False, allow_infinity=False),
        "double": st.floats(allow_nan=False, allow_infinity=False), "string": st.text(max_size=5),
        "json": st.sampled_from(['{"x":1}', "[]", "null"]), "bytes": st.binary(max_size=4),
        "boolean": st.booleans(), "date": st.integers(-100_000, 100_000),
        "micros": st.integers(-(2**50), 2**50),
        "decimal": st.decimals(min_value=-10**6, max_value=10**6, places=2).map(Decimal),
    }[k])


@st.composite
def scenarios(draw: Any) -> dict[str, Any]:
    versions = draw(histories())
    records = []
    for _ in range(draw(st.integers(3, 25))):
        v = draw(st.integers(0, len(versions) - 1))
        op = draw(st.sampled_from(("c", "r", "u", "u", "d", "d", "t", "tombstone", "u_no_before", "d_no_before")))
        row = {f.name: _value(draw, f) for f in versions[v]}
        row["id"] = draw(st.integers(1, 5))
        lsn = None if draw(st.integers(0, 30)) == 0 else draw(st.integers(1, 10**9))
        mark = draw(st.sampled_from(("false", "true", "first", "last", "last_in_data_collection", "incremental")))
        records.append((v, op, row, lsn, mark))
    return {"versions": versions, "records": records, "existing_upto": draw(st.integers(0, len(versions) - 1)),
            "allow_field_addition": draw(st.booleans())}


@pytest.fixture(scope="module")
def registry():
    with LocalSchemaRegistry() as r:
        yield r


_topics = itertools.count()


def _messages(url: str, topic: str, ns: str, versions: list[list[Field]], records: list) -> list:
    kschema = key_schema(ns)
    kid, kparsed = register(url, f"{topic}-key", kschema), fastavro.parse_schema(kschema)
    schemas = [envelope(ns, [f.avro() for f in fields]) for fields in versions]
    ids = [register(url, f"{topic}-value", s) for s in schemas]
    parsed = [fastavro.parse_schema(copy.deepcopy(s)) for s in schemas]
    msgs = []
    for v, op, row, lsn, mark in records:
        key = wire(kid, kparsed, {"id": row["id"]})
        if op == "tombstone":
            msgs.append((len(msgs), None, key, None))
            continue
        before, after = {"c": (None, row), "r": (None, row), "u": (row, row), "d": (row, None), "t": (None, None),
                         "u_no_before": (None, row), "d_no_before": (None, None)}[op]
        value = {"before": before, "after": after, "source": pg_source(lsn, snapshot=mark), "op": op[0],
                 "ts_ms": lsn}
        msgs.append((len(msgs), 1_700_000_000_000 + len(msgs), None if op == "t" else key,
                     wire(ids[v], parsed[v], value)))
    return msgs, schemas


def _existing(schemas: list[dict], upto: int) -> list:
    """The table's columns after batches that saw versions 0 .. upto - 1 (empty: no table yet)."""
    cols: list = []
    for s in schemas[:upto]:
        cols = evolution.plan(cols, columns_of(_row_struct(from_avro(s)))).columns
    return cols


@settings(max_examples=30, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(scenarios())
def test_vectorised_and_per_record_paths_stage_identical_rows(registry, scenario):
    n = next(_topics)
    topic, ns = f"prop{n}.public.t", f"prop{n}.public.t"
    msgs, schemas = _messages(registry.url, topic, ns, scenario["versions"], scenario["records"])
    existing = _existing(schemas, scenario["existing_upto"])
    out = stage_both(registry.url, topic, msgs, existing=existing,
                     allow_field_addition=scenario["allow_field_addition"])
    assert out[True].num_rows == len(msgs)
    assert out[True].equals(out[False]), first_difference(out[True], out[False])
