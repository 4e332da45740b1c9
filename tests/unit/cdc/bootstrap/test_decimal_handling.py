"""``bootstrap.decimal_handling_mode``: the setting, the column types it gives numeric/decimal/money columns
(PostgreSQL and MySQL) and the hint an ingest error gives when the topic disagrees with it."""

from __future__ import annotations

import pyarrow as pa
import pytest

from cdc.bootstrap import mysql
from cdc.bootstrap.postgres_types import arrow_type_of, column_read
from cdc.common.errors import ConfigError, TerminalError
from cdc.schema.evolution import Incompatible, bootstrap_mode, evolution_error
from tests.unit.cdc.bootstrap.test_job import table_cfg

PG = {"jdbc_url": "jdbc:postgresql://h/db", "source_table": "t"}


def test_the_setting_defaults_to_precise_and_names_its_choices() -> None:
    assert table_cfg(PG).bootstrap.decimal_handling_mode == "precise"
    assert table_cfg({**PG, "decimal_handling_mode": "string"}).bootstrap.decimal_handling_mode == "string"
    assert table_cfg({"jdbc_url": "jdbc:mysql://h/db", "source_table": "t",
                      "decimal_handling_mode": "double"}).bootstrap.decimal_handling_mode == "double"
    with pytest.raises(ConfigError, match=r"p.yaml: key 'tables\[0\].bootstrap.decimal_handling_mode'.*"
                                          r"precise, double, string.*'Double'"):
        table_cfg({**PG, "decimal_handling_mode": "Double"})


@pytest.mark.parametrize("pg_type", ["numeric(10,2)", "numeric", "money", "numeric(60,5)"])
def test_postgres_numeric_columns_follow_the_mode(pg_type: str) -> None:
    assert arrow_type_of(pg_type, decimal_mode="double") == pa.float64()
    assert arrow_type_of(pg_type, decimal_mode="string") == pa.string()
    double, string = column_read("c", pg_type, decimal_mode="double"), column_read("c", pg_type, decimal_mode="string")
    assert "::float8" in double.select and "AS DOUBLE" in double.convert
    assert "::text" in string.select and "POSITIVE_INFINITY" in string.convert
    assert ("::numeric" in double.select) == (pg_type == "money")
    assert arrow_type_of("numeric[]", decimal_mode="double") == pa.list_(pa.float64())  # (refused by column_read)
    assert arrow_type_of("real", decimal_mode="double") == pa.float32()  # other types as in precise mode


def test_precise_mode_is_unchanged_and_string_mode_refuses_a_negative_scale() -> None:
    assert arrow_type_of("numeric(10,2)") == pa.decimal128(10, 2) and arrow_type_of("money") == pa.decimal128(38, 2)
    with pytest.raises(TerminalError, match="negative-scale"):
        arrow_type_of("numeric(5,-2)", table="t", column="c", decimal_mode="string")
    assert arrow_type_of("numeric(5,-2)", decimal_mode="double") == pa.float64()


def test_mysql_decimal_columns_follow_the_mode() -> None:
    assert mysql.arrow_type_of("decimal", "decimal(10,2)") == pa.decimal128(10, 2)
    assert mysql.arrow_type_of("decimal", "decimal(65,30)", decimal_mode="double") == pa.float64()
    assert mysql.arrow_type_of("numeric", "decimal(10,2) unsigned", decimal_mode="string") == pa.string()
    r = mysql.column_read("c", "decimal", "decimal(10,2)", decimal_mode="string")
    assert r.select == "CAST(`c` AS CHAR) AS `c`" and "'NAN'" in r.convert and "'E'" not in r.convert  # toPlainString
    assert mysql.column_read("c", "decimal", "decimal(10,2)", decimal_mode="double").convert == \
        "CAST(`c` AS double) AS `c`"
    assert mysql.arrow_type_of("double", "double", decimal_mode="string") == pa.float64()


def test_an_ingest_error_of_a_bootstrapped_table_names_the_setting_when_the_topic_disagrees() -> None:
    precise, double = table_cfg(PG), table_cfg({**PG, "decimal_handling_mode": "double"})
    assert (bootstrap_mode(precise), bootstrap_mode(double), bootstrap_mode(table_cfg(None))) == \
        ("precise", "double", None)

    def message(t, old, new) -> str:
        return str(evolution_error("ns.t", "topic", Incompatible("amount", old, new), (1, 7),
                                   bootstrap_mode=bootstrap_mode(t)))

    text = message(precise, pa.decimal128(10, 2), pa.float64())
    assert "topic topic partition 1 offset 7" in text and "decimal(10,2) → double" in text
    assert "decimal.handling.mode=double" in text and "bootstrap.decimal_handling_mode: double" in text
    assert "DROP TABLE ns.t" in text
    assert "bootstrap.decimal_handling_mode: string" in message(precise, pa.decimal128(38, 10), pa.string())
    assert "bootstrap.decimal_handling_mode: precise" in message(double, pa.float64(), pa.decimal128(10, 2))
    for t, old, new in [(table_cfg(None), pa.decimal128(10, 2), pa.float64()),  # no bootstrap section
                        (precise, pa.decimal128(10, 2), pa.decimal128(10, 3)),  # a scale change, not a mode
                        (precise, pa.string(), pa.float64()),  # not what precise makes of a numeric column
                        (double, pa.float64(), pa.int64())]:
        assert "decimal_handling_mode" not in message(t, old, new), (old, new)
