"""The catalog types, in one place: what the job (Iceberg's Java catalogs in Spark) and the Airflow side (pyiceberg)
use for each, and which types are refused (pure, standard library only).

Accepted types are the ones that run for real in this repository's tests:

* ``hadoop``: a directory warehouse on a local/shared file system (Spark: Iceberg's HadoopCatalog; reader: the newest
  ``vN.metadata.json``). Not on object storage: it commits by an atomic rename, which S3 lacks.
* ``jdbc``: Iceberg's JdbcCatalog on PostgreSQL (reader: pyiceberg's SQL catalog on the same database).
* ``rest``: an Iceberg REST catalog (Spark: RESTCatalog; reader: pyiceberg's REST catalog), OAuth2 settings
  (``credential``, ``token``, ``oauth2-server-uri``, ``scope``) passed through to both.
* ``glue``: AWS Glue (Spark: GlueCatalog; reader: pyiceberg's Glue catalog, boto3); ``glue.endpoint`` /
  ``client.region`` name a Glue-compatible endpoint.

Refused with a message saying what to use instead: ``hive`` (no Hive metastore can run here to test it, and
pyiceberg's needs the thrift extra) and ``nessie`` (Spark's NessieCatalog and pyiceberg's REST client are two
different APIs; Nessie serves the Iceberg REST API, so ``type: rest`` with ``uri: http://<nessie>/iceberg`` is the
one way, tested as the REST catalog).
"""

from __future__ import annotations

from dataclasses import dataclass

from cdc.config.storage import OBJECT_STORE_SCHEMES


@dataclass(frozen=True)
class CatalogType:
    name: str
    spark_type: str = ""  # spark.sql.catalog.<name>.type (built into the Spark runtime), or
    spark_impl: str = ""  # spark.sql.catalog.<name>.catalog-impl
    pyiceberg_type: str = ""  # load_catalog(type=...); "" = read from metadata files (StaticTable)
    object_storage: bool = True  # may the warehouse be s3://


TYPES: dict[str, CatalogType] = {
    "hadoop": CatalogType("hadoop", spark_type="hadoop", object_storage=False),
    "jdbc": CatalogType("jdbc", spark_impl="org.apache.iceberg.jdbc.JdbcCatalog", pyiceberg_type="sql"),
    "rest": CatalogType("rest", spark_type="rest", pyiceberg_type="rest"),
    "glue": CatalogType("glue", spark_impl="org.apache.iceberg.aws.glue.GlueCatalog", pyiceberg_type="glue"),
}
CATALOG_TYPES = tuple(TYPES)
REFUSED: dict[str, str] = {
    "hive": "a Hive metastore catalog is not supported (never tested here: no metastore runs in this project's "
            "tests, and the Airflow side's pyiceberg lacks the hive extra); use rest, glue or jdbc",
    "nessie": "Nessie is used through its Iceberg REST API: set type: rest and uri: http://<nessie-host>:19120/iceberg "
              "(Spark's NessieCatalog and pyiceberg would speak two different APIs)",
}


def refusal(catalog_type: str, warehouse: str) -> str | None:
    """Why this catalog type / warehouse is refused, or None (pure). Unknown types are the caller's to report."""
    if catalog_type in REFUSED:
        return f"{catalog_type!r}: {REFUSED[catalog_type]}"
    kind = TYPES.get(catalog_type)
    if kind is not None and not kind.object_storage and warehouse.startswith(OBJECT_STORE_SCHEMES):
        return (f"a {catalog_type} catalog cannot keep its warehouse on object storage ({warehouse}): it commits by "
                "an atomic rename, which S3 lacks. Use a rest, glue or jdbc catalog with this warehouse")
    return None


def spark_settings(catalog_type: str) -> dict[str, str]:
    """``type`` or ``catalog-impl`` (suffixes of ``spark.sql.catalog.<name>.``) for an accepted type (pure)."""
    kind = TYPES[catalog_type]
    return {"type": kind.spark_type} if kind.spark_type else {"catalog-impl": kind.spark_impl}
