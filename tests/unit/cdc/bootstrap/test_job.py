"""The pure parts of the JDBC bootstrap: config, JDBC→Iceberg types (against the Debezium path's decoders, column by
column), LSNs, snapshot visibility, the source connection, the ledger row and the jar set."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from cdc.bootstrap.horizon import Visibility, seen_position
from cdc.bootstrap.postgres import PostgresSnapshot, connect_error, conninfo, qualified, session_init, split_table
from cdc.bootstrap.postgres_types import arrow_type_of, column_read, lsn_to_int
from cdc.bootstrap.source import probe_source
from cdc.common.errors import ConfigError, RetryableError, TerminalError
from cdc.config.bootstrap import BootstrapConfig
from cdc.config.load import parse_config
from cdc.decode.json import JsonDecoder
from cdc.ledger.model import BOOTSTRAP_MODE, bootstrap_horizon, bootstrap_row, committed_cursor

BASE = {"pipeline": "p", "kafka": {"bootstrap.servers": "k:9092"}, "format": "json",
        "catalog": {"name": "lake", "type": "hadoop", "warehouse": "/tmp/w"}}


def table_cfg(bootstrap, env=None):
    return parse_config({**BASE, "tables": [{"topic": "t", "target": "ns.t", "bootstrap": bootstrap}]}, "p.yaml",
                        env or {}).tables[0]


# ---- config -----------------------------------------------------------------------------------------------------
def test_config_defaults_env_secrets_and_repr() -> None:
    t = table_cfg({"jdbc_url": "jdbc:postgresql://db:5432/inv", "user": "${U}", "password": "${PW}",
                   "source_table": "public.customers"}, {"U": "app", "PW": "s3cret"})
    b = t.bootstrap
    assert (b.user, b.password, b.split_column, b.num_partitions, b.fetch_size) == ("app", "s3cret", "", 4, 10000)
    assert "s3cret" not in repr(b) and "s3cret" not in repr(t) and "app" not in repr(b)
    assert table_cfg(None).bootstrap is None
    assert (b.connector_slot, b.connector_wait_seconds) == ("", 600)
    waits = table_cfg({"jdbc_url": "jdbc:postgresql://h/d", "source_table": "t", "connector_slot": "debezium",
                       "connector_wait_seconds": 0}).bootstrap
    assert (waits.connector_slot, waits.connector_wait_seconds) == ("debezium", 0)


@pytest.mark.parametrize("raw, key", [
    ({"source_table": "t"}, "bootstrap.jdbc_url"),
    ({"jdbc_url": "jdbc:oracle:thin:@h:1521/db", "source_table": "t"}, "bootstrap.jdbc_url"),
    ({"jdbc_url": "jdbc:postgresql://h/db"}, "bootstrap.source_table"),
    ({"jdbc_url": "jdbc:postgresql://h/db", "source_table": "a b"}, "bootstrap.source_table"),
    ({"jdbc_url": "jdbc:postgresql://h/db", "source_table": "t", "fetch_size": 0}, "bootstrap.fetch_size"),
    ({"jdbc_url": "jdbc:postgresql://h/db", "source_table": "t", "num_partitions": "4"}, "bootstrap.num_partitions"),
    ({"jdbc_url": "jdbc:postgresql://h/db", "source_table": "t", "pasword": "x"}, "bootstrap.pasword"),
    ({"jdbc_url": "jdbc:postgresql://h/db", "source_table": "t", "connector_wait_seconds": -1},
     "bootstrap.connector_wait_seconds"),
    ("jdbc:postgresql://h/db", "bootstrap"),
])
def test_config_errors_name_the_key(raw, key) -> None:
    with pytest.raises(ConfigError, match=f"p.yaml: key 'tables\\[0\\].{key}'"):
        table_cfg(raw)


def test_missing_env_secret_is_a_config_error_without_value() -> None:
    with pytest.raises(ConfigError, match="PGPASSWORD is not set"):
        table_cfg({"jdbc_url": "jdbc:postgresql://h/db", "source_table": "t", "password": "${PGPASSWORD}"})


def test_pipeline_with_a_bootstrap_table_needs_the_postgresql_driver() -> None:
    from cdc.spark import jars

    cfg = parse_config({**BASE, "tables": [{"topic": "t", "target": "ns.t", "bootstrap": {
        "jdbc_url": "jdbc:postgresql://h/db", "source_table": "t"}}]})
    assert jars.POSTGRESQL_JDBC in jars.for_config(cfg)
    plain = parse_config({**BASE, "tables": [{"topic": "t", "target": "ns.t"}]})
    assert jars.POSTGRESQL_JDBC not in jars.for_config(plain)


# ---- types: the same Iceberg column as the Debezium path, column by column ----------------------------------------
def _decimal(p, s):
    return {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
            "parameters": {"scale": str(s), "connect.decimal.precision": str(p)}}


def _money():  # Decimal.builder(money.fraction.digits): a scale, no precision
    return {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
            "parameters": {"scale": "2"}}


ENUM = "cdc_mood"  # an enum type (pg_type.typtype 'e') the integration test creates
EXTENSIONS = {"citext": "citext", "ltree": "ltree"}  # types from contrib extensions (CREATE EXTENSION)
VSD = {"type": "struct", "name": "io.debezium.data.VariableScaleDecimal", "fields": [
    {"type": "int32", "optional": False, "field": "scale"}, {"type": "bytes", "optional": False, "field": "value"}]}
# PostgreSQL type → the Connect schema Debezium's PostgreSQL connector gives it (default handling modes)
DEBEZIUM = {
    "smallint": {"type": "int16"}, "integer": {"type": "int32"}, "bigint": {"type": "int64"},
    "real": {"type": "float"}, "double precision": {"type": "double"}, "boolean": {"type": "boolean"},
    "bit(1)": {"type": "boolean"},
    "text": {"type": "string"}, "character varying(20)": {"type": "string"}, "character(3)": {"type": "string"},
    "bytea": {"type": "bytes"},
    "numeric(10,2)": _decimal(10, 2), "numeric(38,0)": _decimal(38, 0), "numeric": VSD,
    "date": {"type": "int32", "name": "io.debezium.time.Date"},
    "time(3) without time zone": {"type": "int32", "name": "io.debezium.time.Time"},
    "time without time zone": {"type": "int64", "name": "io.debezium.time.MicroTime"},
    "timestamp(3) without time zone": {"type": "int64", "name": "io.debezium.time.Timestamp"},
    "timestamp without time zone": {"type": "int64", "name": "io.debezium.time.MicroTimestamp"},
    "timestamp with time zone": {"type": "string", "name": "io.debezium.time.ZonedTimestamp"},
    "time with time zone": {"type": "string", "name": "io.debezium.time.ZonedTime"},
    "json": {"type": "string", "name": "io.debezium.data.Json"},
    "jsonb": {"type": "string", "name": "io.debezium.data.Json"},
    "uuid": {"type": "string", "name": "io.debezium.data.Uuid"},
    "xml": {"type": "string", "name": "io.debezium.data.Xml"},
    "integer[]": {"type": "array", "items": {"type": "int32", "optional": True}},
    "text[]": {"type": "array", "items": {"type": "string", "optional": True}},
    "name": {"type": "string"}, "inet": {"type": "string"}, "cidr": {"type": "string"},
    "macaddr": {"type": "string"}, "macaddr8": {"type": "string"}, "citext": {"type": "string"},
    "ltree": {"type": "string", "name": "io.debezium.data.Ltree", "version": 1},
    ENUM: {"type": "string", "name": "io.debezium.data.Enum", "version": 1, "parameters": {"allowed": "sad,happy"}},
    "int4range": {"type": "string"}, "int8range": {"type": "string"}, "numrange": {"type": "string"},
    "daterange": {"type": "string"}, "tsrange": {"type": "string"},
    "money": _money(),
    "interval": {"type": "int64", "name": "io.debezium.time.MicroDuration", "version": 1},
    "interval day to second(3)": {"type": "int64", "name": "io.debezium.time.MicroDuration", "version": 1},
}


def kind(pg_type: str) -> str:
    """pg_type.typtype of a column type of DEBEZIUM."""
    return "e" if pg_type == ENUM else "b"


def debezium_columns() -> dict[str, pa.DataType]:
    """The row columns the Debezium path's JSON decoder resolves for one event with every type above."""
    fields = [{**schema, "optional": True, "field": f"c{i}"} for i, schema in enumerate(DEBEZIUM.values())]
    envelope = {"type": "struct", "name": "s.public.t.Envelope", "optional": False, "fields": [
        {"type": "struct", "name": "s.public.t.Value", "optional": True, "fields": fields, "field": "before"},
        {"type": "struct", "name": "s.public.t.Value", "optional": True, "fields": fields, "field": "after"},
        {"type": "struct", "name": "io.debezium.connector.postgresql.Source", "optional": False, "field": "source",
         "fields": [{"type": "string", "optional": False, "field": "connector"},
                    {"type": "int64", "optional": True, "field": "lsn"}]},
        {"type": "string", "optional": False, "field": "op"}]}
    value = json.dumps({"schema": envelope, "payload": {"before": None, "after": {f["field"]: None for f in fields},
                                                        "source": {"connector": "postgresql", "lsn": 1}, "op": "c"}})
    cols = JsonDecoder("t", "__debezium_unavailable_value").resolve_columns([(None, value.encode())])
    return {c.name: c.arrow_type for c in cols}


@pytest.mark.parametrize("i, pg_type", list(enumerate(DEBEZIUM)))
def test_jdbc_type_matches_the_debezium_path(i: int, pg_type: str) -> None:
    assert arrow_type_of(pg_type, kind(pg_type)) == debezium_columns()[f"c{i}"], pg_type
    column_read(f"c{i}", pg_type, kind(pg_type))  # and it has a read plan


@pytest.mark.parametrize("pg_type, why", [
    ("tstzrange", "time zone of the connector's JVM"), ("hstore", "HashMap order"), ("point", "no mapping"),
    ("numeric(40,2)", "precision above 38"), ("interval[]", "only arrays of"), ("money[]", "only arrays of"),
    ("name[]", "only arrays of"), ("bit(1)[]", "only arrays of"), ("bit(8)", "no mapping")])
def test_types_debezium_renders_differently_are_refused_naming_the_column_and_why(pg_type: str, why: str) -> None:
    with pytest.raises(TerminalError, match=rf"bootstrap of public.t: column 'c' has type .*{why}.*view that casts"):
        column_read("c", pg_type, "b", "public.t")


def test_reads_avoid_time_zones_and_odd_jdbc_types() -> None:
    assert column_read("d", "date").select == "(\"d\" - DATE '1970-01-01') AS \"d\""
    assert column_read("d", "date").convert == "date_from_unix_date(`d`) AS `d`"
    assert "EXTRACT(EPOCH FROM \"t\")" in column_read("t", "timestamp with time zone").select
    assert column_read("t", "timestamp with time zone").convert == "timestamp_micros(`t`) AS `t`"
    assert column_read("t", "timestamp(6) without time zone").convert == "CAST(`t` AS TIMESTAMP_NTZ) AS `t`"
    assert column_read("u", "uuid").select == "CASE WHEN \"u\" IS NULL THEN NULL ELSE format('%s', \"u\") END AS \"u\""
    assert column_read("m", "money").convert == "CAST(`m` AS DECIMAL(38,2)) AS `m`"
    assert column_read("n", "numeric").convert == "CAST(`n` AS DECIMAL(38,10)) AS `n`"
    assert column_read('we"ird', "text").select == '"we""ird" AS "we""ird"'


# ---- positions and snapshot visibility ----------------------------------------------------------------------------
def test_lsn_text_to_number() -> None:
    assert lsn_to_int("0/1A2B3C") == 0x1A2B3C and lsn_to_int("16/B374D848") == 0x16B374D848
    with pytest.raises(ValueError):
        lsn_to_int("garbage")


def test_visibility_of_transaction_ids() -> None:
    vis = Visibility.parse("748:752:748,750")
    assert (vis.xmin, vis.xmax, vis.xip) == (748, 752, frozenset({748, 750}))
    assert [vis.sees(x) for x in (700, 747, 748, 749, 750, 751, 752, 900)] == [
        True, True, False, True, False, True, False, False]
    assert Visibility.parse("5:5:").xip == frozenset()
    wrapped = Visibility.parse(f"{(1 << 32) + 10}:{(1 << 32) + 20}:")  # epoch 1; Debezium sends 32-bit ids
    assert wrapped.sees(5) and not wrapped.sees(25) and wrapped.sees(2 ** 32 - 5)


def test_seen_position_needs_a_transaction_id() -> None:
    vis = Visibility.parse("10:12:11")
    assert seen_position(vis, {"txId": 9}, (1, 2)) == (1, 2)
    assert seen_position(vis, {"txId": 11}, (1, 2)) is None
    assert seen_position(vis, {}, (1, 2)) is None and seen_position(vis, {"txId": "x"}, (1, 2)) is None


# ---- source connection --------------------------------------------------------------------------------------------
def test_conninfo_from_jdbc_url() -> None:
    info = conninfo("jdbc:postgresql://db.example:6543/inv?sslmode=require&user=u", "", "pw")
    assert info == {"host": "db.example", "port": 6543, "dbname": "inv", "application_name": "cdc-bootstrap",
                    "sslmode": "require", "user": "u", "password": "pw", "connect_timeout": "10"}
    assert conninfo("jdbc:postgresql://h/d", "app")["port"] == 5432
    assert conninfo("jdbc:postgresql://h/d?connect_timeout=3")["connect_timeout"] == "3"


AT = 'connection failed: connection to server at "127.0.0.1", port 5432 failed: '


@pytest.mark.parametrize("message, exit_code", [
    (AT + 'FATAL:  password authentication failed for user "app"', 2),
    (AT + 'FATAL:  role "nobody" does not exist', 2),
    (AT + 'FATAL:  database "nodb" does not exist', 2),
    (AT + 'FATAL:  no pg_hba.conf entry for host "10.0.0.1", user "app", database "inv", no encryption', 2),
    (AT + 'FATAL:  permission denied for database "inv"', 2),
    ("connection failed: fe_sendauth: no password supplied", 2),
    (AT + "Connection refused\n\tIs the server running on that host and accepting TCP/IP connections?", 75),
    ('connection failed: connection to server at "10.9.9.9", port 5432 failed: timeout expired', 75),
    ('connection failed: could not translate host name "db" to address: Name or service not known', 75),
    (AT + "FATAL:  the database system is starting up", 75),
    (AT + "FATAL:  the database system is shutting down", 75),
    (AT + "FATAL:  sorry, too many clients already", 75),
    (AT + "FATAL:  remaining connection slots are reserved for roles with the SUPERUSER attribute", 75),
])
def test_a_failed_connection_says_who_must_act(message: str, exit_code: int) -> None:
    """A refusal by the server (login, database, pg_hba) needs a person (2); an unreachable or busy server is
    retried (75). One line, naming the table."""
    err = connect_error("bootstrap of ns.t from public.t", Exception(message))
    assert err.exit_code == exit_code, err
    assert str(err).startswith("bootstrap of ns.t from public.t: ") and "\n" not in str(err)


def test_an_unreachable_database_is_retryable_and_never_shows_the_password() -> None:
    import socket

    with socket.socket() as s:  # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = BootstrapConfig(f"jdbc:postgresql://127.0.0.1:{port}/inv", "public.t", user="app", password="pw-S3cret")
    with pytest.raises(RetryableError, match=f"bootstrap of ns.t from public.t: cannot connect .*port {port}") as err:
        probe_source(cfg, "ns.t")
    assert err.value.exit_code == 75 and "pw-S3cret" not in str(err.value)
    with pytest.raises(RetryableError):
        PostgresSnapshot(cfg, "ns.t").__enter__()


def test_table_names_and_session_init() -> None:
    assert split_table("customers") == ("public", "customers")
    assert split_table('"My Schema"."Odd.Name"') == ("My Schema", "Odd.Name")
    assert qualified("s.t") == '"s"."t"'
    assert session_init("00000003-00000002-1") == ("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ; "
                                                   "SET TRANSACTION SNAPSHOT '00000003-00000002-1'")
    with pytest.raises(ValueError):
        session_init("1'; DROP TABLE x; --")


# ---- ledger -------------------------------------------------------------------------------------------------------
def test_bootstrap_row_has_the_horizon_and_never_moves_the_cursor() -> None:
    row = bootstrap_row("p", "ns.t", "topic", 7, (100, 105), 42, 9, "run", "host:1:2", {"read": 1.23456})
    assert (row["mode"], row["status"], row["partition"], row["inserted"]) == (BOOTSTRAP_MODE, "committed", -1, 42)
    assert json.loads(row["truncate_barrier"]) == [100, 105] and row["max_position"] is None
    incremental = {**row, "mode": "incremental", "batch_id": 6, "partition": 0, "end_offset": 50,
                   "truncate_barrier": None}
    assert committed_cursor([incremental, row], "ns.t") == {"topic": {0: 50}}
    assert bootstrap_horizon([incremental, row], "ns.t") == (100, 105)
    assert bootstrap_horizon([incremental], "ns.t") is None
    assert bootstrap_row("p", "ns.t", "topic", 7, None, 0, None, "r", "o", {})["truncate_barrier"] is None


def test_bootstrap_config_dialect() -> None:
    assert BootstrapConfig("jdbc:postgresql://h/d", "t").dialect == "postgresql"


def test_the_horizon_stops_below_a_change_the_snapshot_did_not_see() -> None:
    from cdc.bootstrap.horizon import HorizonScan

    scan = HorizonScan()
    for pos, seen in [((1, 5), True), ((3, 9), True), ((1, 7), True), ((2, 1), None)]:
        scan.add(pos, seen)
    assert scan.horizon == (3, 9)
    scan.add((9, 9), False)  # committed after every seen change: no effect
    assert scan.horizon == (3, 9)
    scan.add((1, 6), False)  # its commit record came before seen ones': the horizon stops below it
    assert scan.horizon == (1, 5)
    scan.add((0, 1), False)
    assert scan.horizon is None

    small = HorizonScan(keep=2)
    for pos in [(1, 1), (1, 2), (1, 3), (1, 4)]:
        small.add(pos, True)
    assert small.horizon == (1, 4)
    small.add((1, 4), False)
    assert small.horizon == (1, 3)
    small.add((1, 2), False)  # below every kept position: (1, 1) was not kept, so no barrier at all
    assert small.horizon is None
