"""The randomized oracle's streams (``tests/scenarios/harness.py`` runs them): one table's seeded Debezium changes
with the delivery faults, schema changes and ties its ``TableSpec`` asks for.

* Schema evolution (``TableSpec.add_column``): at op ``add_column_at`` the source adds a nullable column ``added``
  of that kind (later events carry it: in Avro a new schema version registered with the test registry, in JSON with
  schemas a new embedded schema, schemaless as a new field); rows last written before it read NULL. For ``int32`` and
  ``decimal`` columns ``widen_at`` may widen it later (int32 → int64, decimal(10,2) → decimal(14,2)): a third
  version, older records then resolve writer → reader in Avro.
* Ties (``TableSpec.ties``, upsert tables only): now and then two updates of one key at one source position
  (``ChangeEventGenerator.tie_update``); the later Kafka offset is the row's state. Not in append/scd2 tables (their
  identity of a change is key + position + op) and not with adversarial reordering (``move_later`` would put the
  older one later; redeliveries keep the order of last deliveries, see ``devtools.debezium.redeliver``).
* Server failover, slightly behind (``TableSpec.server_failover``, MySQL upsert tables): halfway the connector reads
  a replica's binlog (``ChangeEventGenerator.failover_server``): a new ``source.server_id``, positions one binlog
  file back (``"file"``) or in the same file at a lower pos (``"pos"``), upward from there; the rows stay. No far
  fall, so only the server rule sees it: a partition whose first change from the new server is below what it
  reached is refused (``PositionRegression``) until ``ordering_epoch`` is raised; one where it is above keeps the
  order. Redeliveries on either side, not across (a connector does not redeliver the old server's log from the new).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable

from devtools.debezium import (
    ChangeEventGenerator,
    Column,
    GeneratorConfig,
    compact_deletes,
    move_later,
    redeliver,
    replay,
)

ADDED = "added"  # the name of the column a schema change adds
ADD_KINDS = ("string", "int32", "decimal", "timestamp")
WIDENED = {"int32": Column(ADDED, "int64"), "decimal": Column(ADDED, "decimal", precision=14, scale=2)}


@dataclass
class TableSpec:
    seed: int
    connector: str  # postgresql | mysql
    delete_mode: str  # hard | soft
    partitions: int
    replica_identity: str
    snapshot: int
    ops: int
    truncate_weight: float
    restarts: int  # connector restarts → redelivered windows
    adversarial: bool  # move_later (only without TOAST: a placeholder cannot be resolved before its base value)
    compacted: bool = False  # compacted topic: most deletes are gone, their tombstones remain (not adversarial)
    explicit_ordering: bool = False  # ordering: [source.lsn] instead of auto (PostgreSQL only)
    write_mode: str = "upsert"  # upsert | append | scd2 (append/scd2: tests/scenarios/mode_oracle.py)
    track_columns: tuple[str, ...] = ()  # scd2 only
    failover: bool = False  # positions restart far lower halfway (upsert only): refused, then ordering_epoch raised
    add_column: str | None = None  # ADD COLUMN `added` of this kind (ADD_KINDS) before op number add_column_at
    add_column_at: int = 0
    widen_at: int | None = None  # widen `added` (int32/decimal, WIDENED) before this op number
    ties: bool = False  # same-position updates of a key (upsert, not adversarial)
    server_failover: str | None = None  # "file" | "pos": halfway, a replica slightly behind (MySQL upsert tables)
    recreate: bool = False  # after each truncate two earlier keys are created again, the first deleted at once

    def describe(self) -> str:
        return (f"{self.connector[:2]}/{self.delete_mode}/p{self.partitions}/{self.replica_identity}"
                f"{'/adv' if self.adversarial else ''}{'/compacted' if self.compacted else ''}"
                f"{'/explicit' if self.explicit_ordering else ''}"
                f"{'' if self.write_mode == 'upsert' else '/' + self.write_mode}"
                f"{'/track' if self.track_columns else ''}{'/failover' if self.failover else ''}"
                f"{f'/+{self.add_column}@{self.add_column_at}' if self.add_column else ''}"
                f"{f'/widen@{self.widen_at}' if self.widen_at is not None else ''}{'/ties' if self.ties else ''}"
                f"{f'/server-failover-{self.server_failover}' if self.server_failover else ''}"
                f"{'/recreate' if self.recreate else ''}")


def draw_classes(spec: TableSpec, rng: random.Random) -> None:
    """The schema-change and tie classes of one table, drawn from ``rng`` (the scenario's own stream for them)."""
    if rng.random() < 0.3:
        spec.add_column = rng.choice(ADD_KINDS)
        spec.add_column_at = rng.randrange(spec.ops)
        if spec.add_column in WIDENED and rng.random() < 0.5:
            spec.widen_at = rng.randint(spec.add_column_at, spec.ops - 1)
    spec.ties = spec.write_mode == "upsert" and not spec.adversarial and rng.random() < 0.5


def draw_server_failover(spec: TableSpec, rng: random.Random) -> None:
    """The slight server failover of one table (MySQL upsert tables without the far failover), from ``rng``."""
    if spec.connector == "mysql" and spec.write_mode == "upsert" and not spec.failover and rng.random() < 0.4:
        spec.server_failover = rng.choice(("file", "pos"))


def build_stream(spec: TableSpec) -> tuple[ChangeEventGenerator, list[Any]]:
    rng = random.Random(spec.seed ^ 0x5EED)
    toast = 0.0 if spec.adversarial else 0.3
    gen = ChangeEventGenerator(spec.seed, GeneratorConfig(
        connector=spec.connector, partitions=spec.partitions, replica_identity=spec.replica_identity,
        toast_fraction=toast, binlog_max_bytes=3_000,
        # PK changes with TOAST placeholders (resolved across batches through the key headers); one partition only:
        # a create merged before an unread change of its old key in a lagging partition is a documented limit
        toast_on_pk_change=spec.partitions == 1,
        first_lsn=(8 << 30) if spec.failover else 24_000_000))  # a failover must fall > 1 GiB to be detectable
    records = gen.snapshot(spec.snapshot)
    weights = {"insert": 4, "update": 5, "delete": 1.5, "change_pk": 0.5, "truncate": spec.truncate_weight}
    if spec.ties:
        weights["tie_update"] = 1.5
    half = spec.ops // 2
    if spec.failover or spec.server_failover:  # faults within each side: a connector does not redeliver the old
        before = _faults(spec, rng, records + _ops(gen, spec, weights, 0, half))  # server's log on the new one
        if spec.failover:
            gen.failover()
        else:
            try:
                gen.failover_server(gen.server_id + 1 + spec.seed % 97, spec.server_failover)  # type: ignore[arg-type]
            except ValueError:  # "pos" right after a rotation: no lower pos in that file
                gen.failover_server(gen.server_id + 1 + spec.seed % 97, "file")
        records = before + _faults(spec, rng, _ops(gen, spec, weights, half, spec.ops))
    else:
        records = _faults(spec, rng, records + _ops(gen, spec, weights, 0, spec.ops))
        assert replay(records) == gen.expected_rows(), "generator oracle and reference replay disagree"
    if spec.compacted:
        records = compact_deletes(records, rng)
    return gen, records


def _ops(gen: ChangeEventGenerator, spec: TableSpec, weights: dict[str, float], lo: int, hi: int) -> list[Any]:
    """Random ops number ``lo`` .. ``hi - 1`` of the stream, with the spec's schema changes where it puts them."""
    changes: list[tuple[int, Callable[[], Any]]] = []
    if spec.add_column:
        kind = spec.add_column
        column = Column(ADDED, kind, precision=10, scale=2) if kind == "decimal" else Column(ADDED, kind)  # type: ignore[arg-type]
        changes.append((spec.add_column_at, lambda: gen.add_column(column)))
        if spec.widen_at is not None:
            changes.append((spec.widen_at, lambda: gen.widen_column(WIDENED[kind])))
    out, at = [], lo
    for when, change in changes:  # in stream order (widen_at >= add_column_at)
        if lo <= when < hi:
            out += _random_ops(gen, spec, weights, when - at)
            change()
            at = when
    return out + _random_ops(gen, spec, weights, hi - at)


def _random_ops(gen: ChangeEventGenerator, spec: TableSpec, weights: dict[str, float], n: int) -> list[Any]:
    """``n`` random ops; with ``spec.recreate`` (one op per transaction) each truncate is followed by creates of two
    keys the table had before (the first one deleted right after), each a later transaction: versions open at the
    truncate, then later changes of their keys, which batches on other partitions may merge before the truncate (on
    partition 0) is read."""
    if not spec.recreate:
        return gen.random_ops(n, weights)
    out: list[Any] = []
    for _ in range(n):
        ops = gen.random_ops(1, weights)
        out += ops
        if any(r.op == "t" for r in ops) and gen.ever_seen:
            keys = gen.rng.sample(sorted(gen.ever_seen), min(2, len(gen.ever_seen)))
            for pk in keys:
                out += gen.insert(gen._new_row(pk))
            out += gen.delete(keys[0])
    return out


def _faults(spec: TableSpec, rng: random.Random, records: list[Any]) -> list[Any]:
    records = redeliver(records, rng, restarts=spec.restarts, max_window=15)
    return move_later(records, rng, fraction=0.08, max_shift=25) if spec.adversarial else records
