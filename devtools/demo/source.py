"""The demo's source database: a real PostgreSQL ``inventory`` database captured by Debezium's PostgreSQL connector
in a Kafka Connect worker (Confluent AvroConverter), and the scripted waves of SQL run against it.

Every wave is ordinary SQL: the initial snapshot's rows, then transactions of inserts, updates (some leave a large
TOASTed ``notes`` unchanged, so Debezium sends ``__debezium_unavailable_value`` for it: ``customers`` keeps
REPLICA IDENTITY DEFAULT), deletes, primary-key changes, ``ALTER TABLE … ADD COLUMN``, and an incremental snapshot
(Debezium's signal table) while the same rows change. The oracle is the database itself: ``SELECT *``.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass, field
from typing import Any, Callable

from devtools.demo.common import PARTITIONS
from devtools.pgsource import PostgresSource

DATABASE, PREFIX, CONNECTOR = "inventory", "dbserver1", "inventory-connector"
TABLES = {
    "customers": "id int PRIMARY KEY, name text NOT NULL, email text, visits int NOT NULL DEFAULT 0, "
                 "balance numeric(12,2), notes text, updated_at timestamptz NOT NULL DEFAULT now()",
    "orders": "id int PRIMARY KEY, customer_id int NOT NULL, status text NOT NULL, quantity int NOT NULL, "
              "total numeric(12,2) NOT NULL, ordered_at timestamp NOT NULL, delivery_date date, notes text",
}
FIRST = ("Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Frances", "Ken", "Margaret", "Dennis", "Radia", "Tim")
LAST = ("Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Knuth", "Allen", "Thompson", "Hamilton", "Ritchie")
STATUSES = ("pending", "paid", "shipped", "delivered", "cancelled")
TIERS = ("bronze", "silver", "gold", "platinum")


def source(pg: Any, connect: Any, bootstrap: str, registry_url: str | None) -> PostgresSource:
    return PostgresSource(pg, connect, bootstrap, DATABASE, PREFIX, TABLES, name=CONNECTOR,
                          registry_url=registry_url, partitions=PARTITIONS)


def topics() -> dict[str, str]:
    return {t: f"{PREFIX}.public.{t}" for t in TABLES}


@dataclass
class Wave:
    title: str
    run: Callable[[PostgresSource, Script], None]
    done: dict[str, int] = field(default_factory=dict)  # what the wave did: kind → count

    def describe(self) -> str:
        return ", ".join(f"{n} {kind}" for kind, n in self.done.items())


class Script:
    """Seeded random changes against the source (one generator for the whole demo, so a seed replays it)."""

    def __init__(self, seed: int, scale: int) -> None:
        self.rng = random.Random(seed)
        self.scale = scale
        self.next_id = {"customers": 1, "orders": 1}
        self.columns: dict[str, list[str]] = {"customers": [], "orders": []}
        self.counts: dict[str, int] = {}

    def count(self, kind: str, n: int = 1) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + n

    def take(self) -> dict[str, int]:
        out, self.counts = self.counts, {}
        return out

    def long_text(self) -> str:  # incompressible enough to be stored out of line (TOAST, > 2 kB)
        return "".join(self.rng.choices(string.ascii_letters + string.digits, k=self.rng.randint(3000, 6000)))

    def money(self, lo: int, hi: int) -> str:
        return f"{self.rng.randint(lo, hi) / 100:.2f}"

    def customer(self) -> str:
        i = self.next_id["customers"]
        self.next_id["customers"] += 1
        r = self.rng
        name = f"{r.choice(FIRST)} {r.choice(LAST)}"
        notes = f"'{self.long_text()}'" if r.random() < 0.4 else "NULL"
        tier = f", '{r.choice(TIERS)}'" if "loyalty_tier" in self.columns["customers"] else ""
        cols = ", loyalty_tier" if tier else ""
        return (f"INSERT INTO customers (id, name, email, visits, balance, notes{cols}) VALUES ({i}, '{name}', "
                f"'{name.split()[0].lower()}{i}@example.com', {r.randint(0, 500)}, {self.money(-50_000, 900_000)}, "
                f"{notes}{tier})")

    def order(self, src: PostgresSource) -> str:
        i = self.next_id["orders"]
        self.next_id["orders"] += 1
        r = self.rng
        ids = [row[0] for row in src.sql("SELECT id FROM customers")] or [1]
        delivery = f"DATE '2026-12-{r.randint(1, 28):02d}'" if r.random() < 0.7 else "NULL"
        notes = f"'{self.long_text()}'" if r.random() < 0.3 else "NULL"
        return (f"INSERT INTO orders (id, customer_id, status, quantity, total, ordered_at, delivery_date, notes) "
                f"VALUES ({i}, {r.choice(ids)}, '{r.choice(STATUSES)}', {r.randint(1, 12)}, "
                f"{self.money(100, 250_000)}, TIMESTAMP '2026-11-01 08:00:00' + interval '{r.randint(0, 2_000_000)} "
                f"seconds', {delivery}, {notes})")

    def some(self, src: PostgresSource, table: str, k: int) -> list[int]:
        ids = [row[0] for row in src.sql(f"SELECT id FROM {table}")]
        return self.rng.sample(ids, min(k, len(ids)))

    def changes(self, src: PostgresSource, n: int, weights: dict[str, float]) -> None:
        """``n`` transactions of 1-3 statements each, drawn by ``weights`` (insert/update/delete/move)."""
        kinds, w = list(weights), list(weights.values())
        for _ in range(n * self.scale):
            statements = []
            for _ in range(self.rng.randint(1, 3)):
                table = self.rng.choice(("customers", "orders"))
                kind = self.rng.choices(kinds, w)[0]
                statements += self.change(src, table, kind)
            src.transaction(statements)

    def change(self, src: PostgresSource, table: str, kind: str) -> list[str]:
        r = self.rng
        if kind == "insert":
            self.count(f"{table} inserts")
            return [self.customer() if table == "customers" else self.order(src)]
        [key] = self.some(src, table, 1) or [None]
        if key is None:
            return []
        if kind == "delete":
            self.count(f"{table} deletes")
            return [f"DELETE FROM {table} WHERE id = {key}"]
        if kind == "move" and table == "customers":  # a primary-key change: Debezium's delete + create pair
            self.count("customers primary-key changes")
            new = self.next_id["customers"]
            self.next_id["customers"] += 1
            return [f"UPDATE customers SET id = {new} WHERE id = {key}"]
        self.count(f"{table} updates")
        if table == "customers":  # notes untouched (TOAST placeholder) unless drawn
            sets = [f"visits = visits + {r.randint(1, 9)}", f"balance = {self.money(-50_000, 900_000)}",
                    "updated_at = now()"]
            if r.random() < 0.2:
                sets.append(f"notes = '{self.long_text()}'")
            if "loyalty_tier" in self.columns["customers"] and r.random() < 0.5:
                sets.append(f"loyalty_tier = '{r.choice(TIERS)}'")
        else:
            sets = [f"status = '{r.choice(STATUSES)}'", f"quantity = {r.randint(1, 12)}"]
            if "shipped_at" in self.columns["orders"] and r.random() < 0.6:
                sets.append("shipped_at = TIMESTAMP '2026-12-01 12:00:00' + "
                            f"interval '{r.randint(0, 200_000)} seconds'")
        return [f"UPDATE {table} SET {', '.join(sets)} WHERE id = {key}"]


LIVE = {"insert": 3, "update": 6, "delete": 1.5, "move": 0.3}
CHURN = {"insert": 2, "update": 5, "delete": 3}


def _snapshot(src: PostgresSource, s: Script) -> None:
    src.create()
    src.transaction([s.customer() for _ in range(25 * s.scale)])
    src.transaction([s.order(src) for _ in range(40 * s.scale)])
    s.count("customers rows", 25 * s.scale)
    s.count("orders rows", 40 * s.scale)
    src.start()  # the connector's initial snapshot reads them (op r)


def _live(src: PostgresSource, s: Script) -> None:
    s.changes(src, 30, LIVE)
    for _ in range(2):  # at least two primary-key moves, whatever the draw
        src.transaction(s.change(src, "customers", "move"))


def _add_columns(src: PostgresSource, s: Script) -> None:
    src.sql("ALTER TABLE customers ADD COLUMN loyalty_tier text")
    src.sql("ALTER TABLE orders ADD COLUMN shipped_at timestamp")
    s.columns["customers"].append("loyalty_tier")
    s.columns["orders"].append("shipped_at")
    s.count("ALTER TABLE ADD COLUMN", 2)
    s.changes(src, 30, LIVE)


def _churn_and_incremental_snapshot(src: PostgresSource, s: Script) -> None:
    src.incremental_snapshot("orders")  # Debezium re-reads orders in chunks while the same rows keep changing
    s.count("incremental snapshot of orders")
    s.changes(src, 25, CHURN)
    src.wait_snapshot_completed()


def build_waves() -> list[Wave]:
    return [
        Wave("initial snapshot (connector created over existing rows)", _snapshot),
        Wave("live changes: inserts, updates (TOAST left unchanged), deletes, primary-key moves",
             _live),
        Wave("schema change: ALTER TABLE customers ADD loyalty_tier, orders ADD shipped_at; more changes",
             _add_columns),
        Wave("delete-heavy changes during an incremental snapshot of orders", _churn_and_incremental_snapshot),
    ]
