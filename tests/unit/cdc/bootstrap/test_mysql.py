"""The pure parts of the MySQL/MariaDB JDBC bootstrap: config, URLs and names, the horizon, and MySQL types → the
Iceberg column the Debezium MySQL path creates (decoded by the job's JSON decoder), column by column."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from cdc.bootstrap.mysql import arrow_type_of, column_read, horizon_of, spark_url, split_table, url_database
from cdc.common.errors import ConfigError, TerminalError
from cdc.config.bootstrap import BootstrapConfig
from cdc.config.load import parse_config
from cdc.decode.json import JsonDecoder
from cdc.positions.ordering import Ordering
from cdc.spark import jars

BASE = {"pipeline": "p", "kafka": {"bootstrap.servers": "k:9092"}, "format": "json",
        "catalog": {"name": "lake", "type": "hadoop", "warehouse": "/tmp/w"}}


def table_cfg(bootstrap):
    return parse_config({**BASE, "tables": [{"topic": "t", "target": "ns.t", "bootstrap": bootstrap}]}, "p.yaml",
                        {}).tables[0]


# ---- config, URLs, names ------------------------------------------------------------------------------------------
def test_mysql_and_mariadb_urls_are_accepted_with_their_lock_wait() -> None:
    b = table_cfg({"jdbc_url": "jdbc:mysql://db:3306/shop", "source_table": "shop.orders"}).bootstrap
    assert (b.dialect, b.is_mysql, b.lock_wait_seconds) == ("mysql", True, 60)
    m = table_cfg({"jdbc_url": "jdbc:mariadb://db/shop", "source_table": "`odd name`", "lock_wait_seconds": 5})
    assert (m.bootstrap.dialect, m.bootstrap.is_mysql, m.bootstrap.lock_wait_seconds) == ("mariadb", True, 5)
    assert not BootstrapConfig("jdbc:postgresql://h/d", "t").is_mysql


@pytest.mark.parametrize("raw, key", [
    ({"jdbc_url": "jdbc:mysql://h/db", "source_table": "t", "connector_slot": "x"}, "bootstrap.connector_slot"),
    ({"jdbc_url": "jdbc:mysql://h/db", "source_table": "t", "lock_wait_seconds": 0}, "bootstrap.lock_wait_seconds"),
    ({"jdbc_url": "jdbc:sqlserver://h;databaseName=x", "source_table": "t"}, "bootstrap.jdbc_url"),
])
def test_config_errors_name_the_key(raw, key) -> None:
    with pytest.raises(ConfigError, match=f"p.yaml: key 'tables\\[0\\].{key}'"):
        table_cfg(raw)


def test_url_database_spark_url_and_table_names() -> None:
    assert url_database("jdbc:mysql://h:3306/shop?useSSL=true") == "shop"
    assert url_database("jdbc:mariadb://h1,h2/inv") == "inv" and url_database("jdbc:mysql://h:3306") == ""
    assert url_database("jdbc:mariadb:replication://h1,h2/x") == "x"
    assert spark_url("jdbc:mariadb://h:1/d?x=1") == "jdbc:mysql://h:1/d?x=1"
    assert spark_url("jdbc:mysql://h/d") == "jdbc:mysql://h/d"
    assert split_table("orders", "shop") == ("shop", "orders")
    assert split_table("`my db`.`odd.name`", "x") == ("my db", "odd.name")
    assert split_table('"a"."b"', "x") == ("a", "b")


def test_horizon_is_the_master_status_position_before_every_later_change() -> None:
    h = horizon_of("mysql-bin.000003", 1234)
    assert h == (3, 1234, -1)
    order = Ordering("mysql")
    before = order.values({"file": "mysql-bin.000003", "pos": 1233, "row": 7})
    first_after = order.values({"file": "mysql-bin.000003", "pos": 1234, "row": 0})
    rotated = order.values({"file": "mysql-bin.000004", "pos": 4, "row": 0})
    older_file = order.values({"file": "mysql-bin.000002", "pos": 99999, "row": 3})
    assert before <= h and older_file <= h and first_after > h and rotated > h


def test_pipeline_with_a_mysql_bootstrap_needs_the_mariadb_driver() -> None:
    cfg = parse_config({**BASE, "tables": [{"topic": "t", "target": "ns.t", "bootstrap": {
        "jdbc_url": "jdbc:mariadb://h/db", "source_table": "t"}}]})
    assert jars.MARIADB_JDBC in jars.for_config(cfg) and jars.POSTGRESQL_JDBC not in jars.for_config(cfg)
    assert jars.MARIADB_JDBC in jars.ALL
    assert jars.maven_url(jars.MARIADB_JDBC).endswith(
        "/org/mariadb/jdbc/mariadb-java-client/2.7.6/mariadb-java-client-2.7.6.jar")


def test_mariadb_jar_file_from_env_or_debian(tmp_path) -> None:
    jar = tmp_path / "m.jar"
    jar.write_bytes(b"PK")
    assert jars.mariadb_jar({jars.MARIADB_JAR_ENV: str(jar)}) == str(jar)
    assert jars.local_files({jars.MARIADB_JAR_ENV: str(jar)})[jars.MARIADB_JDBC] == str(jar)
    assert jars.mariadb_jar({jars.MARIADB_JAR_ENV: str(tmp_path / "missing.jar")}) is None


# ---- types: the same Iceberg column as the Debezium MySQL path ----------------------------------------------------
def _decimal(p, s):
    return {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
            "parameters": {"scale": str(s), "connect.decimal.precision": str(p)}}


# MySQL COLUMN_TYPE → the Connect schema Debezium's MySQL connector gives it (default handling modes)
DEBEZIUM = {
    "tinyint(4)": {"type": "int16"}, "tinyint(1)": {"type": "int16"}, "smallint(6)": {"type": "int16"},
    "smallint(5) unsigned": {"type": "int32"}, "mediumint(9)": {"type": "int32"}, "int(11)": {"type": "int32"},
    "int(10) unsigned": {"type": "int64"}, "bigint(20)": {"type": "int64"}, "bigint(20) unsigned": {"type": "int64"},
    "bit(1)": {"type": "boolean"}, "float": {"type": "float"}, "float(7,2)": {"type": "double"},
    "double": {"type": "double"}, "decimal(10,2)": _decimal(10, 2), "decimal(38,0)": _decimal(38, 0),
    "char(3)": {"type": "string"}, "varchar(20)": {"type": "string"}, "text": {"type": "string"},
    "longtext": {"type": "string"}, "enum('a','b')": {"type": "string", "name": "io.debezium.data.Enum"},
    "set('x','y')": {"type": "string", "name": "io.debezium.data.EnumSet"},
    "json": {"type": "string", "name": "io.debezium.data.Json"},
    "varbinary(8)": {"type": "bytes"}, "blob": {"type": "bytes"},
    "date": {"type": "int32", "name": "io.debezium.time.Date"},
    "time(6)": {"type": "int64", "name": "io.debezium.time.MicroTime"},
    "datetime": {"type": "int64", "name": "io.debezium.time.Timestamp"},
    "datetime(6)": {"type": "int64", "name": "io.debezium.time.MicroTimestamp"},
    "timestamp(3)": {"type": "string", "name": "io.debezium.time.ZonedTimestamp"},
    "year(4)": {"type": "int32", "name": "io.debezium.time.Year"},
}


def data_type(column_type: str) -> str:
    return column_type.split("(")[0].split(" ")[0]


def debezium_columns() -> dict[str, pa.DataType]:
    """The row columns the Debezium path's JSON decoder resolves for one MySQL event with every type above."""
    fields = [{**schema, "optional": True, "field": f"c{i}"} for i, schema in enumerate(DEBEZIUM.values())]
    envelope = {"type": "struct", "name": "s.shop.t.Envelope", "optional": False, "fields": [
        {"type": "struct", "name": "s.shop.t.Value", "optional": True, "fields": fields, "field": "before"},
        {"type": "struct", "name": "s.shop.t.Value", "optional": True, "fields": fields, "field": "after"},
        {"type": "struct", "name": "io.debezium.connector.mysql.Source", "optional": False, "field": "source",
         "fields": [{"type": "string", "optional": False, "field": "connector"},
                    {"type": "string", "optional": False, "field": "file"},
                    {"type": "int64", "optional": False, "field": "pos"},
                    {"type": "int32", "optional": True, "field": "row"}]},
        {"type": "string", "optional": False, "field": "op"}]}
    source = {"connector": "mysql", "file": "mysql-bin.000001", "pos": 4, "row": 0}
    value = json.dumps({"schema": envelope, "payload": {"before": None, "after": {f["field"]: None for f in fields},
                                                        "source": source, "op": "c"}})
    cols = JsonDecoder("t", "__debezium_unavailable_value").resolve_columns([(None, value.encode())])
    return {c.name: c.arrow_type for c in cols}


@pytest.mark.parametrize("i, column_type", list(enumerate(DEBEZIUM)))
def test_jdbc_type_matches_the_debezium_mysql_path(i: int, column_type: str) -> None:
    assert arrow_type_of(data_type(column_type), column_type) == debezium_columns()[f"c{i}"], column_type


def test_mariadb_json_is_longtext_and_unmapped_types_are_refused_naming_the_column() -> None:
    assert arrow_type_of("longtext", "longtext") == pa.string()  # MariaDB's JSON columns
    for column_type in ("geometry", "point", "bit(8)", "decimal(50,2)"):
        with pytest.raises(TerminalError, match=r"bootstrap of shop.t: column 'c' has type"):
            column_read("c", data_type(column_type), column_type, "shop.t")


def test_reads_avoid_time_zones_and_driver_type_guessing() -> None:
    assert column_read("b", "tinyint", "tinyint(1)").select == "CAST(`b` AS SIGNED) AS `b`"
    assert column_read("b", "tinyint", "tinyint(1)").convert == "CAST(`b` AS int) AS `b`"
    assert column_read("d", "date", "date").select == "DATEDIFF(`d`, '1970-01-01') AS `d`"
    assert column_read("d", "date", "date").convert == "date_from_unix_date(`d`) AS `d`"
    assert "UNIX_TIMESTAMP(`t`)" in column_read("t", "timestamp", "timestamp(6)").select
    assert column_read("t", "timestamp", "timestamp").convert == "timestamp_micros(`t`) AS `t`"
    assert column_read("t", "datetime", "datetime(3)").convert == "CAST(`t` AS TIMESTAMP_NTZ) AS `t`"
    assert column_read("we`ird", "text", "text").select == "`we``ird` AS `we``ird`"
