"""The JVM jars the job needs, in one place: Maven coordinates for production, the offline wheel jar for local runs.

Pure (standard library only), so the session factory, the Airflow side, the Dockerfile and people can all use it:

    python -m cdc.spark.jars                          # every production coordinate, comma-separated (for --packages)
    python -m cdc.spark.jars --config P.yaml          # only what this pipeline's catalog/warehouse needs
    python -m cdc.spark.jars --urls                   # Maven Central URLs (docker/Dockerfile downloads these)

* ``iceberg-spark-runtime`` always (the Iceberg catalog, SQL extensions, MERGE).
* ``iceberg-aws-bundle`` for S3 (``S3FileIO``: ``s3://`` / ``s3a://`` warehouses, also needed by maintenance's
  orphan-file removal there) and for the Glue catalog. The bundled offline jar has no AWS SDK.
* the PostgreSQL JDBC driver for a ``jdbc`` catalog whose ``uri`` is ``jdbc:postgresql:…``. Locally the driver is a
  file: ``CDC_POSTGRES_JDBC_JAR``, else Debian's ``/usr/share/java/postgresql.jar`` (``libpostgresql-jdbc-java``).
* MariaDB Connector/J for a bootstrap from a MySQL/MariaDB source (``jdbc:mysql:…`` / ``jdbc:mariadb:…``; it serves
  both servers). Locally: ``CDC_MARIADB_JDBC_JAR``, else Debian's ``/usr/share/java/mariadb-java-client.jar``
  (``libmariadb-java``, 2.7.6: the version the tests run; 3.x refuses ``jdbc:mysql:`` URLs by default).

Which jars a session gets (``jar_conf``): the user's ``spark.jars`` / ``spark.jars.packages`` always win; otherwise
``CDC_JARS`` decides: ``bundled`` (local jar files, offline: the Iceberg runtime jar from the
``snowpark-connect-deps-iceberg`` wheel and, for a PostgreSQL ``jdbc`` catalog, the driver file above; a needed jar
without a local file still goes to ``spark.jars.packages``), ``packages`` (``spark.jars.packages`` = the coordinates
below, resolved by Spark from Maven or your ``spark.jars.ivySettings`` mirror) or ``auto`` (default): ``bundled`` when
the master is local and every needed jar has a local file, else ``packages``. Under ``spark-submit`` the JVM has
started before the job runs, so jars must be on the spark-submit command line
(``--packages $(python -m cdc.spark.jars --config P.yaml)``, or ``--jars`` with local files).
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
from typing import Any, Mapping, Sequence

from cdc.config.load import load_config

ICEBERG_VERSION = "1.10.2"
SPARK_SCALA = "3.5_2.12"  # pyspark 3.5.x, Scala 2.12
POSTGRESQL_JDBC_VERSION = "42.7.4"
MARIADB_JDBC_VERSION = "2.7.6"

ICEBERG_SPARK_RUNTIME = f"org.apache.iceberg:iceberg-spark-runtime-{SPARK_SCALA}:{ICEBERG_VERSION}"
ICEBERG_AWS_BUNDLE = f"org.apache.iceberg:iceberg-aws-bundle:{ICEBERG_VERSION}"
POSTGRESQL_JDBC = f"org.postgresql:postgresql:{POSTGRESQL_JDBC_VERSION}"
MARIADB_JDBC = f"org.mariadb.jdbc:mariadb-java-client:{MARIADB_JDBC_VERSION}"
ALL = (ICEBERG_SPARK_RUNTIME, ICEBERG_AWS_BUNDLE, POSTGRESQL_JDBC, MARIADB_JDBC)
MAVEN_CENTRAL = "https://repo1.maven.org/maven2"

BUNDLED_JAR_GLOB = f"iceberg-spark-runtime-{SPARK_SCALA}-*.jar"
JARS_ENV = "CDC_JARS"
MODES = ("auto", "bundled", "packages")
USER_KEYS = ("spark.jars", "spark.jars.packages")
POSTGRESQL_JAR_ENV = "CDC_POSTGRES_JDBC_JAR"
POSTGRESQL_JAR_DEFAULT = "/usr/share/java/postgresql.jar"  # Debian: libpostgresql-jdbc-java
MARIADB_JAR_ENV = "CDC_MARIADB_JDBC_JAR"
MARIADB_JAR_DEFAULT = "/usr/share/java/mariadb-java-client.jar"  # Debian: libmariadb-java


def needed(catalog_type: str, warehouse: str | None, properties: Mapping[str, str]) -> tuple[str, ...]:
    """Coordinates a catalog needs (pure): the runtime, plus the AWS bundle for S3/Glue, plus PostgreSQL for JDBC."""
    out = [ICEBERG_SPARK_RUNTIME]
    locations = [warehouse or "", *(str(v) for v in properties.values())]
    if catalog_type == "glue" or any(v.startswith(("s3://", "s3a://", "s3n://")) for v in locations) \
            or "S3FileIO" in str(properties.get("io-impl", "")):
        out.append(ICEBERG_AWS_BUNDLE)
    if catalog_type == "jdbc" and str(properties.get("uri", "")).startswith("jdbc:postgresql:"):
        out.append(POSTGRESQL_JDBC)
    return tuple(out)


def bundled_jar() -> str | None:
    """Path of the Iceberg Spark runtime jar from the installed ``snowpark-connect-deps-iceberg`` wheel, or None."""
    try:
        import snowpark_connect_deps_iceberg as pkg  # type: ignore[import-not-found]
    except ImportError:
        return None
    found = sorted(glob.glob(os.path.join(os.path.dirname(pkg.__file__), "jars", BUNDLED_JAR_GLOB)))
    return found[-1] if found else None


def postgresql_jar(env: Mapping[str, str] | None = None) -> str | None:
    """The local PostgreSQL JDBC driver file (``CDC_POSTGRES_JDBC_JAR``, else Debian's), or None when absent."""
    path = (os.environ if env is None else env).get(POSTGRESQL_JAR_ENV) or POSTGRESQL_JAR_DEFAULT
    return path if os.path.isfile(path) else None


def mariadb_jar(env: Mapping[str, str] | None = None) -> str | None:
    """The local MariaDB Connector/J file (``CDC_MARIADB_JDBC_JAR``, else Debian's), or None when absent."""
    path = (os.environ if env is None else env).get(MARIADB_JAR_ENV) or MARIADB_JAR_DEFAULT
    return path if os.path.isfile(path) else None


def local_files(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Coordinate → a jar file on this machine that provides it, for offline local sessions (besides the runtime)."""
    found = {POSTGRESQL_JDBC: postgresql_jar(env), MARIADB_JDBC: mariadb_jar(env)}
    return {c: f for c, f in found.items() if f}


def choose_mode(mode: str, local: bool, coords: Sequence[str], have_bundled: bool) -> str:
    """``bundled`` or ``packages`` (pure). ``have_bundled``: every coordinate in ``coords`` has a local file.
    Raises ValueError for an unknown ``mode``."""
    if mode not in MODES:
        raise ValueError(f"{JARS_ENV}={mode!r}: expected one of {', '.join(MODES)}")
    if mode != "auto":
        return mode
    return "bundled" if local and have_bundled else "packages"


def jar_conf(user: Mapping[str, str], coords: Sequence[str], local: bool, mode: str = "auto",
             bundled: str | None = None, files: Mapping[str, str] | None = None) -> dict[str, str]:
    """The Spark jar settings for a session (pure): nothing when the user set their own.

    ``bundled``: the offline Iceberg runtime jar; ``files``: other coordinates' local jar files (``local_files``)."""
    if any(k in user for k in USER_KEYS):
        return {}
    have = {**(files or {}), **({ICEBERG_SPARK_RUNTIME: bundled} if bundled else {})}
    if choose_mode(mode, local, coords, all(c in have for c in coords)) == "bundled":
        conf = {"spark.jars": ",".join(have[c] for c in coords if c in have)}
        missing = [c for c in coords if c not in have]
        if missing:
            conf["spark.jars.packages"] = ",".join(missing)
        return {k: v for k, v in conf.items() if v}
    return {"spark.jars.packages": ",".join(coords)}


def for_config(cfg: Any) -> tuple[str, ...]:
    """Coordinates a ``PipelineConfig`` needs (the catalog's; plus the PostgreSQL / MariaDB driver when a table has
    a ``bootstrap`` section reading such a source, ``jobs/bootstrap.py``)."""
    c = cfg.catalog
    out = needed(c.type, c.warehouse, c.properties)
    urls = [b.jdbc_url for b in (getattr(t, "bootstrap", None) for t in getattr(cfg, "tables", ())) if b is not None]
    if POSTGRESQL_JDBC not in out and any(u.startswith("jdbc:postgresql:") for u in urls):
        out = (*out, POSTGRESQL_JDBC)
    if any(u.startswith(("jdbc:mysql:", "jdbc:mariadb:")) for u in urls):
        out = (*out, MARIADB_JDBC)
    return out


def maven_url(coordinate: str, repository: str = MAVEN_CENTRAL) -> str:
    """Download URL of a ``group:artifact:version`` jar in a Maven repository layout (pure)."""
    group, artifact, version = coordinate.split(":")
    return f"{repository.rstrip('/')}/{group.replace('.', '/')}/{artifact}/{version}/{artifact}-{version}.jar"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m cdc.spark.jars", description="Maven coordinates of the job's jars")
    p.add_argument("--config", help="only what this pipeline YAML needs (default: every production jar)")
    p.add_argument("--lines", action="store_true", help="one per line instead of comma-separated")
    p.add_argument("--urls", action="store_true", help="Maven Central download URLs, one per line (docker/Dockerfile)")
    args = p.parse_args(argv)
    if args.config:
        coords = for_config(load_config(args.config))
    else:
        coords = ALL
    if args.urls:
        print("\n".join(maven_url(c) for c in coords))
    else:
        print(("\n" if args.lines else ",").join(coords))
    return 0


if __name__ == "__main__":
    sys.exit(main())
