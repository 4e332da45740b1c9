"""Catalog types in one home (cdc.config.catalogs) and S3 settings for both sides (cdc.config.storage)."""

from __future__ import annotations

import pytest

from cdc.common.errors import ConfigError
from cdc.config import catalogs
from cdc.config.load import parse_config
from cdc.config.storage import REDACTION_REGEX, java_properties, pyiceberg_properties
from cdc.spark.session import catalog_conf, session_conf


def cfg(catalog: dict):
    return parse_config({"pipeline": "p", "kafka": {"bootstrap.servers": "k:9092"}, "format": "json",
                         "catalog": catalog, "tables": [{"topic": "t", "target": "a.b"}]})


@pytest.mark.parametrize("kind,hint", [("hive", "use rest, glue or jdbc"), ("nessie", "type: rest")])
def test_untested_catalog_types_are_refused_with_what_to_use(kind, hint) -> None:
    with pytest.raises(ConfigError, match="catalog.type") as err:
        cfg({"type": kind, "warehouse": "s3://b/w", "uri": "http://x"})
    assert hint in str(err.value)


def test_a_hadoop_catalog_is_refused_on_object_storage() -> None:
    with pytest.raises(ConfigError, match="atomic rename"):
        cfg({"type": "hadoop", "warehouse": "s3://lake/wh"})


def test_every_accepted_type_maps_to_one_spark_catalog_and_one_pyiceberg_reader() -> None:
    assert catalogs.CATALOG_TYPES == ("hadoop", "jdbc", "rest", "glue")
    assert not set(catalogs.REFUSED) & set(catalogs.CATALOG_TYPES)
    rest = catalog_conf(cfg({"type": "rest", "uri": "http://rest:8181", "warehouse": "s3://lake/wh",
                             "properties": {"credential": "id:secret", "s3.endpoint": "http://s3:9000"}}))
    assert rest["spark.sql.catalog.lake.type"] == "rest"
    assert rest["spark.sql.catalog.lake.io-impl"] == "org.apache.iceberg.aws.s3.S3FileIO"
    assert rest["spark.sql.catalog.lake.credential"] == "id:secret"
    glue = catalog_conf(cfg({"type": "glue", "warehouse": "s3://lake/wh"}))
    assert glue["spark.sql.catalog.lake.catalog-impl"] == "org.apache.iceberg.aws.glue.GlueCatalog"
    assert {k: v.pyiceberg_type for k, v in catalogs.TYPES.items()} == {"hadoop": "", "jdbc": "sql", "rest": "rest",
                                                                       "glue": "glue"}


def test_s3_settings_under_pyiceberg_names() -> None:
    java = {"s3.endpoint": "http://s3:9000", "s3.path-style-access": "true", "client.region": "eu-west-1",
            "s3.access-key-id": "id", "s3.secret-access-key": "sk", "credential": "c:s"}
    py = pyiceberg_properties("s3://lake/wh", java)
    assert py == {"s3.endpoint": "http://s3:9000", "s3.access-key-id": "id", "s3.secret-access-key": "sk",
                  "credential": "c:s", "py-io-impl": "pyiceberg.io.pyarrow.PyArrowFileIO", "s3.region": "eu-west-1",
                  "glue.region": "eu-west-1", "client.region": "eu-west-1"}
    assert pyiceberg_properties("s3://l/w", {"s3.path-style-access": "false"})["s3.force-virtual-addressing"] == "true"
    assert "py-io-impl" not in pyiceberg_properties("/local/wh", {})
    assert java_properties("s3://l/w", {"io-impl": "my.IO"}) == {"io-impl": "my.IO"}
    assert java_properties("/local", {}) == {}


def test_spark_redacts_the_rest_credential() -> None:
    import re

    conf = session_conf(cfg({"type": "rest", "uri": "http://rest:8181", "warehouse": "s3://l/w"}), "local[1]")
    assert conf["spark.redaction.regex"] == REDACTION_REGEX
    for key in ("spark.sql.catalog.lake.credential", "spark.sql.catalog.lake.s3.secret-access-key",
                "spark.sql.catalog.lake.token", "spark.sql.catalog.lake.jdbc.password"):
        assert re.search(REDACTION_REGEX, key), key
