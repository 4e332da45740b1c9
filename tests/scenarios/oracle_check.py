"""The randomized oracle's verdict: a table against the generator's oracle, and the ledger against the topic
(``tests/scenarios/harness.py`` runs the scenarios)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any


def _read(spark: Any, table: str) -> tuple[list[dict[str, Any]], set[str]]:
    df = spark.table(table)
    sel = []
    for f in df.schema.fields:
        t = f.dataType.typeName()
        if t == "date":
            sel.append(f"unix_date(`{f.name}`) AS `{f.name}`")
        elif t.startswith("timestamp"):
            sel.append(f"unix_micros(CAST(`{f.name}` AS TIMESTAMP)) AS `{f.name}`")
        else:
            sel.append(f"`{f.name}`")
    return [r.asDict() for r in df.selectExpr(*sel).collect()], {f.name for f in df.schema.fields}


def _norm(v: Any) -> Any:
    if isinstance(v, Decimal):
        return v.normalize() if v == v.to_integral_value() else v
    return v


def compare(spark: Any, table: str, s: Any) -> list[str]:
    """Row-by-row comparison with the oracle; returns human-readable mismatches (empty when equal)."""
    expected = s.gen.expected_rows()
    deleted = s.gen.deleted_keys()
    cols = [c.name for c in s.gen.table.columns]
    pk = s.gen.table.primary_key[0]
    if s.spec.write_mode != "upsert":  # a missing table is a mismatch whenever the stream held changes
        from tests.scenarios.mode_oracle import compare_mode

        try:
            rows, have = _read(spark, table)
        except Exception:  # noqa: BLE001 - not created: compared as empty
            rows, have = [], set()
        return compare_mode(rows, have, table, s.spec.write_mode, s.records, cols, pk, s.spec.track_columns,
                            compacted=s.spec.compacted)
    try:
        rows, have = _read(spark, table)
    except Exception as exc:  # the table may not exist when every event was dropped
        if expected:
            return [f"{table}: cannot read ({str(exc).splitlines()[0][:200]})"]
        return []
    bad = []
    soft = s.spec.delete_mode == "soft"
    if soft and rows and "__deleted" not in have:
        bad.append(f"{table}: soft mode but no __deleted column")
    live = {}
    for r in rows:
        if soft and r.get("__deleted"):
            if r[pk] in expected:
                bad.append(f"{table}: key {r[pk]} flagged deleted but exists in the source")
            elif r[pk] not in deleted:
                bad.append(f"{table}: key {r[pk]} flagged deleted but never existed")
            continue
        if r[pk] in live:
            bad.append(f"{table}: key {r[pk]} appears twice")
        live[r[pk]] = r
    for k in sorted(set(live) | set(expected)):
        if k not in expected:
            bad.append(f"{table}: extra row {k} (op {live[k].get('__op')}, batch {live[k].get('__batch_id')})")
        elif k not in live:
            bad.append(f"{table}: missing row {k}")
        else:
            for c in cols:
                a, b = _norm(live[k].get(c)), _norm(expected[k].get(c))
                if a != b:
                    bad.append(f"{table}: row {k} column {c}: table {str(a)[:60]!r} != source {str(b)[:60]!r}")
    return bad


def check_ledger(spark: Any, raw: dict[str, Any], s: Any, broker: Any) -> list[str]:
    """Nothing pending; committed incremental ranges per partition are contiguous from 0 to the end."""
    from cdc.kafka.offsets import high_watermarks

    rows = spark.sql(f"SELECT * FROM lake.{raw['metadata_namespace']}.ledger WHERE table_name = '{s.target}' "
                     "ORDER BY batch_id").collect()
    bad = [f"{s.target}: batch {r.batch_id} left {r.status}" for r in rows if r.status != "committed"]
    ends = high_watermarks({"bootstrap.servers": broker.bootstrap}, s.topic)
    for p, end in ends.items():
        pos = 0
        for r in rows:  # batch order; a committed reset row restarts the cursor where it says (--reset-cursor)
            if r.partition != p or r.status != "committed":
                continue
            if r.mode == "reset":
                pos = r.end_offset
            elif r.mode == "incremental":
                if r.start_offset != pos:
                    bad.append(f"{s.target}: partition {p}: ledger range [{r.start_offset}, {r.end_offset}) does "
                               f"not start at {pos}")
                pos = r.end_offset
        if pos != end:
            bad.append(f"{s.target}: partition {p}: ledger ends at {pos}, topic ends at {end}")
    return bad
