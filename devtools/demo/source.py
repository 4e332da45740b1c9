"""The simulated source database: Debezium change-event generators and the scripted waves of changes."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Callable

from devtools.debezium import TOAST_PLACEHOLDER, ChangeEventGenerator, Column, GeneratorConfig, TableSchema
from devtools.debezium.model import Record, default_table
from devtools.demo.common import PARTITIONS

# ----------------------------------------------------------------------------------------------- the source database

FIRST = ("Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Frances", "Ken", "Margaret", "Dennis", "Radia", "Tim")
LAST = ("Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Knuth", "Allen", "Thompson", "Hamilton", "Ritchie")
STATUSES = ("pending", "paid", "shipped", "delivered", "cancelled")
TIERS = ("bronze", "silver", "gold", "platinum")


class CustomersGenerator(ChangeEventGenerator):
    """``public.customers`` with plausible values (the generator's default table, all column kinds)."""

    def _value(self, col: Column) -> Any:
        r = self.rng
        if col.name == "name":
            return f"{r.choice(FIRST)} {r.choice(LAST)}"
        if col.name == "visits":
            return r.randint(0, 500)
        if col.name == "balance":
            return Decimal(r.randint(-50_000, 900_000)).scaleb(-2)
        if col.name == "loyalty_tier":
            return r.choice(TIERS)
        return super()._value(col)


class OrdersGenerator(ChangeEventGenerator):
    """``public.orders``: customer ids point at customers; notes are sometimes TOASTed (large) text."""

    def __init__(self, seed: int, config: GeneratorConfig, customers: CustomersGenerator):
        super().__init__(seed, config, orders_table())
        self.customers = customers

    def _value(self, col: Column) -> Any:
        r = self.rng
        if col.name == "customer_id":
            ids = list(self.customers.rows) or [1]
            return r.choice(ids)
        if col.name == "status":
            return r.choice(STATUSES)
        if col.name == "quantity":
            return r.randint(1, 12)
        if col.name == "total":
            return Decimal(r.randint(100, 250_000)).scaleb(-2)
        return super()._value(col)


def orders_table() -> TableSchema:
    return TableSchema(
        name="orders", connector="postgresql", server="dbserver1",
        columns=(
            Column("id", "int32", nullable=False),
            Column("customer_id", "int32", nullable=False),
            Column("status", "string", nullable=False),
            Column("quantity", "int32", nullable=False),
            Column("total", "decimal", nullable=False, precision=12, scale=2),
            Column("ordered_at", "timestamp", nullable=False),
            Column("delivery_date", "date", nullable=True),
            Column("notes", "text", nullable=True, toastable=True),
        ),
    )


@dataclass
class Wave:
    title: str
    records: dict[str, list[Record]]  # table → records
    expected: dict[str, dict[Any, dict[str, Any]]]  # table → oracle rows after this wave
    columns: dict[str, list[str]]  # table → source columns after this wave

    def describe(self) -> str:
        parts = []
        for table, recs in self.records.items():
            ops: dict[str, int] = {}
            toast = 0
            for r in recs:
                op = "tombstone" if r.value is None else r.value["op"]
                ops[op] = ops.get(op, 0) + 1
                after = (r.value or {}).get("after") or {}
                toast += sum(1 for v in after.values() if v == TOAST_PLACEHOLDER)
            names = {"r": "read", "c": "create", "u": "update", "d": "delete", "tombstone": "tombstone"}
            detail = ", ".join(f"{n} {names.get(op, op)}" for op, n in sorted(ops.items(), key=lambda x: "rcudt".find(x[0][0])))
            parts.append(f"{table}: {len(recs)} records ({detail}{f'; {toast} TOAST placeholders' if toast else ''})")
        return "; ".join(parts)


def build_waves(seed: int = 2024, scale: int = 1) -> list[Wave]:
    """The scripted history of the source database, as waves of Debezium records plus the oracle after each."""
    cfg = dict(connector="postgresql", partitions=PARTITIONS, replica_identity="full", toast_fraction=0.3)
    customers = CustomersGenerator(seed, GeneratorConfig(table="customers", **cfg),
                                   default_table("postgresql", "customers"))
    orders = OrdersGenerator(seed + 1, GeneratorConfig(table="orders", **cfg), customers)
    gens = {"customers": customers, "orders": orders}
    waves: list[Wave] = []

    def wave(title: str, steps: dict[str, Callable[[ChangeEventGenerator], list[Record]]]) -> None:
        recs = {t: steps[t](g) if t in steps else [] for t, g in gens.items()}
        waves.append(Wave(title, recs, {t: g.expected_rows() for t, g in gens.items()},
                          {t: [c.name for c in g.table.columns] for t, g in gens.items()}))

    live = {"insert": 3, "update": 6, "delete": 1.5, "change_pk": 0.3}
    wave("initial snapshot", {"customers": lambda g: g.snapshot(25 * scale), "orders": lambda g: g.snapshot(40 * scale)})
    wave("live changes", {"customers": lambda g: g.random_ops(40 * scale, live),
                          "orders": lambda g: g.random_ops(60 * scale, live)})

    def add_then(column: Column, n: int) -> Callable[[ChangeEventGenerator], list[Record]]:
        def step(g: ChangeEventGenerator) -> list[Record]:
            g.add_column(column)
            return g.random_ops(n, live)
        return step

    wave("schema change: ADD COLUMN customers.loyalty_tier, orders.shipped_at, then more changes",
         {"customers": add_then(Column("loyalty_tier", "string"), 40 * scale),
          "orders": add_then(Column("shipped_at", "timestamp"), 60 * scale)})
    churn = {"insert": 2, "update": 5, "delete": 3}
    wave("more changes, delete-heavy", {"customers": lambda g: g.random_ops(30 * scale, churn),
                                        "orders": lambda g: g.random_ops(50 * scale, churn)})
    return waves


def topics() -> dict[str, str]:
    return {"customers": "dbserver1.public.customers", "orders": "dbserver1.public.orders"}


def produce_wave(bootstrap: str, registry_url: str | None, wave: Wave) -> None:
    from devtools.debezium import AvroSerializer, JsonSerializer, produce

    if registry_url:
        from confluent_kafka.schema_registry import SchemaRegistryClient

        serializer: Any = AvroSerializer(SchemaRegistryClient({"url": registry_url}))
    else:
        serializer = JsonSerializer()
    for table, recs in wave.records.items():
        if recs:
            produce(bootstrap, topics()[table], recs, serializer)


def wave_schema(wave: Wave, table: str) -> TableSchema:
    base = default_table("postgresql", "customers") if table == "customers" else orders_table()
    for name in wave.columns[table]:
        if name not in {c.name for c in base.columns}:
            base = base.with_column(Column(name, "string" if name == "loyalty_tier" else "timestamp"))
    return base
