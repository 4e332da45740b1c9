"""Object storage settings of a catalog, one set of keys for both sides (pure, standard library only).

The YAML gives Iceberg's own Java keys in ``catalog.properties`` (they reach Spark as
``spark.sql.catalog.<name>.*``)::

    catalog:
      type: rest                       # or jdbc, glue
      warehouse: s3://lake/warehouse
      uri: https://catalog.example/api
      properties:
        s3.endpoint: http://127.0.0.1:9000       # an S3-compatible server (MinIO, moto, Ceph); absent: AWS S3
        s3.path-style-access: "true"             # http://host/bucket/key instead of http://bucket.host/key
        client.region: eu-west-1
        # credentials: absent = the AWS default chain (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN,
        # AWS_PROFILE, instance or pod roles) on the driver, the executors and the Airflow workers; or from ${ENV}:
        s3.access-key-id: ${LAKE_KEY_ID}
        s3.secret-access-key: ${LAKE_SECRET}

A warehouse on ``s3://`` gets Iceberg's ``S3FileIO`` (``io-impl``) unless the YAML names another, and the AWS SDK
jar (``cdc.spark.jars``). ``pyiceberg_properties`` gives the Airflow side's reader (pyiceberg with pyarrow's
``S3FileSystem``) the same endpoint, addressing, region and credentials under pyiceberg's names. Secret values are
never printed: ``cdc.config.model.redact`` masks them, Spark's redaction pattern covers them (``REDACTION_REGEX``).
"""

from __future__ import annotations

from typing import Mapping

S3_FILE_IO = "org.apache.iceberg.aws.s3.S3FileIO"
PYARROW_FILE_IO = "pyiceberg.io.pyarrow.PyArrowFileIO"
OBJECT_STORE_SCHEMES = ("s3://", "s3a://", "s3n://")
# Spark's default spark.redaction.regex, plus the REST catalog's OAuth2 "credential" (client_id:client_secret)
REDACTION_REGEX = "(?i)secret|password|token|access[.]?key|credential"
# Java-only keys: pyiceberg names them differently (below) or has no such setting
_JAVA_ONLY = ("io-impl", "s3.path-style-access", "client.region")


def on_object_storage(warehouse: str, properties: Mapping[str, str] = {}) -> bool:
    return warehouse.startswith(OBJECT_STORE_SCHEMES) or "S3FileIO" in str(properties.get("io-impl", ""))


def java_properties(warehouse: str, properties: Mapping[str, str]) -> dict[str, str]:
    """The catalog's properties for Iceberg's Java catalog (pure): ``io-impl`` = S3FileIO for an ``s3://``
    warehouse unless given; the rest as written."""
    out = dict(properties)
    if warehouse.startswith(OBJECT_STORE_SCHEMES) and "io-impl" not in out:
        out["io-impl"] = S3_FILE_IO
    return out


def pyiceberg_properties(warehouse: str, properties: Mapping[str, str]) -> dict[str, str]:
    """The S3 / OAuth2 / Glue settings of the Java properties under pyiceberg's names (pure), for ``load_catalog``
    and ``StaticTable``. The keys both share (``s3.endpoint``, ``s3.access-key-id``, ``s3.secret-access-key``,
    ``s3.session-token``, ``glue.endpoint``, the REST catalog's ``credential`` / ``token`` / ``oauth2-server-uri`` /
    ``scope``) and keys pyiceberg does not know (it ignores them) pass through unchanged."""
    out = {k: v for k, v in properties.items() if k not in _JAVA_ONLY}
    if on_object_storage(warehouse, properties):
        out.setdefault("py-io-impl", PYARROW_FILE_IO)
        # pyiceberg addresses buckets path-style unless told otherwise (s3.force-virtual-addressing)
        if str(properties.get("s3.path-style-access", "")).lower() == "false":
            out.setdefault("s3.force-virtual-addressing", "true")
    region = properties.get("client.region") or properties.get("s3.region")
    if region:
        out.setdefault("s3.region", region)
        out.setdefault("glue.region", region)
        out.setdefault("client.region", region)
    return out
