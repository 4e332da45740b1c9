"""The JVM jars the job needs, in one place: Maven coordinates, resolved by Spark (``spark.jars.packages`` /
``--packages``, Ivy) and cached locally, checked before Spark starts.

Pure (standard library only), so the session factory, the Airflow side, the Dockerfile and people can all use it:

    python -m cdc.spark.jars                          # every production coordinate, comma-separated (for --packages)
    python -m cdc.spark.jars --config P.yaml          # only what this pipeline's catalog/warehouse needs
    python -m cdc.spark.jars --urls                   # Maven Central URLs (docker/Dockerfile downloads these)

* ``iceberg-spark-runtime`` always (the Iceberg catalog, SQL extensions, MERGE).
* ``iceberg-aws-bundle`` for S3 (``S3FileIO``: ``s3://`` / ``s3a://`` warehouses, also needed by maintenance's
  orphan-file removal there) and for the Glue catalog.
* the PostgreSQL JDBC driver for a ``jdbc`` catalog whose ``uri`` is ``jdbc:postgresql:…``. Locally the driver may be
  a file: ``CDC_POSTGRES_JDBC_JAR``, else Debian's ``/usr/share/java/postgresql.jar`` (``libpostgresql-jdbc-java``).
* MariaDB Connector/J for a bootstrap from a MySQL/MariaDB source (``jdbc:mysql:…`` / ``jdbc:mariadb:…``; it serves
  both servers). Locally: ``CDC_MARIADB_JDBC_JAR``, else Debian's ``/usr/share/java/mariadb-java-client.jar``
  (``libmariadb-java``, 2.7.6: the version the tests run; 3.x refuses ``jdbc:mysql:`` URLs by default).

Which jars a session gets (``jar_conf``): the user's ``spark.jars`` / ``spark.jars.packages`` always win; otherwise
``CDC_JARS`` decides: ``files`` (local jar files: what Spark's Ivy resolution already put into its cache,
``<spark.jars.ivy, default ~/.ivy2>/jars``, and the driver files above; a jar without a file goes to
``spark.jars.packages``), ``packages`` (``spark.jars.packages`` = the coordinates, resolved by Spark from Maven
Central, ``spark.jars.repositories`` or your ``spark.jars.ivySettings``) or ``auto`` (default): ``files`` when the
master is local and every needed jar has a file (no resolution at every start), else ``packages``. What is to be
resolved is checked first (``preflight``): a coordinate no repository has (exit 2) or a repository that cannot be
reached (exit 75) is named, with where it looked, before a JVM starts. Under ``spark-submit`` the JVM has started
before the job runs, so jars must be on the spark-submit command line
(``--packages $(python -m cdc.spark.jars --config P.yaml)``, or ``--jars`` with local files).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Mapping, Sequence

from cdc.common.errors import ConfigError, RetryableError
from cdc.config import storage
from cdc.config.load import load_config

ICEBERG_VERSION = "1.10.2"
SPARK_SCALA = "3.5_2.12"  # pyspark 3.5.x, Scala 2.12
POSTGRESQL_JDBC_VERSION = "42.7.4"
MARIADB_JDBC_VERSION = "2.7.6"

ICEBERG_SPARK_RUNTIME = f"org.apache.iceberg:iceberg-spark-runtime-{SPARK_SCALA}:{ICEBERG_VERSION}"
# The bundle holds only the (shaded) AWS SDK; S3FileIO and GlueCatalog are in the Spark runtime. Maven Central serves
# no iceberg-aws-bundle 1.10.2 ("Could not find artifact", checked 2026-12-04), so the newest one it has, 1.10.1.
AWS_BUNDLE_VERSION = "1.10.1"
ICEBERG_AWS_BUNDLE = f"org.apache.iceberg:iceberg-aws-bundle:{AWS_BUNDLE_VERSION}"
POSTGRESQL_JDBC = f"org.postgresql:postgresql:{POSTGRESQL_JDBC_VERSION}"
MARIADB_JDBC = f"org.mariadb.jdbc:mariadb-java-client:{MARIADB_JDBC_VERSION}"
ALL = (ICEBERG_SPARK_RUNTIME, ICEBERG_AWS_BUNDLE, POSTGRESQL_JDBC, MARIADB_JDBC)
MAVEN_CENTRAL = "https://repo1.maven.org/maven2"

JARS_ENV = "CDC_JARS"
MODES = ("auto", "files", "packages")
USER_KEYS = ("spark.jars", "spark.jars.packages")
POSTGRESQL_JAR_ENV = "CDC_POSTGRES_JDBC_JAR"
POSTGRESQL_JAR_DEFAULT = "/usr/share/java/postgresql.jar"  # Debian: libpostgresql-jdbc-java
MARIADB_JAR_ENV = "CDC_MARIADB_JDBC_JAR"
MARIADB_JAR_DEFAULT = "/usr/share/java/mariadb-java-client.jar"  # Debian: libmariadb-java


def needed(catalog_type: str, warehouse: str | None, properties: Mapping[str, str]) -> tuple[str, ...]:
    """Coordinates a catalog needs (pure): the runtime, plus the AWS bundle for S3/Glue, plus PostgreSQL for JDBC."""
    out = [ICEBERG_SPARK_RUNTIME]
    locations = [warehouse or "", *(str(v) for v in properties.values())]
    if catalog_type == "glue" or any(storage.on_object_storage(v, properties) for v in locations):
        out.append(ICEBERG_AWS_BUNDLE)
    if catalog_type == "jdbc" and str(properties.get("uri", "")).startswith("jdbc:postgresql:"):
        out.append(POSTGRESQL_JDBC)
    return tuple(out)


class JarsUnavailable(RetryableError):
    """A jar to resolve is not cached and its repository cannot be reached (retry once the network is back)."""


def ivy_home(user: Mapping[str, str] | None = None) -> Path:
    """Spark's Ivy home (``spark.jars.ivy``, default ``~/.ivy2``): resolved jars are kept in its ``jars/``."""
    return Path((user or {}).get("spark.jars.ivy") or Path.home() / ".ivy2")


def cached_jar(coordinate: str, ivy: Path) -> str | None:
    """The jar of ``group:artifact:version`` as Spark's Ivy resolution left it (``jars/group_artifact-version.jar``),
    or None."""
    group, artifact, version = coordinate.split(":")
    path = ivy / "jars" / f"{group}_{artifact}-{version}.jar"
    return str(path) if path.is_file() else None


def postgresql_jar(env: Mapping[str, str] | None = None) -> str | None:
    """The local PostgreSQL JDBC driver file (``CDC_POSTGRES_JDBC_JAR``, else Debian's), or None when absent."""
    path = (os.environ if env is None else env).get(POSTGRESQL_JAR_ENV) or POSTGRESQL_JAR_DEFAULT
    return path if os.path.isfile(path) else None


def mariadb_jar(env: Mapping[str, str] | None = None) -> str | None:
    """The local MariaDB Connector/J file (``CDC_MARIADB_JDBC_JAR``, else Debian's), or None when absent."""
    path = (os.environ if env is None else env).get(MARIADB_JAR_ENV) or MARIADB_JAR_DEFAULT
    return path if os.path.isfile(path) else None


def local_files(env: Mapping[str, str] | None = None, ivy: Path | None = None) -> dict[str, str]:
    """Coordinate → a jar file on this machine that provides it: Debian's JDBC drivers (or the files the environment
    names), else what Spark's Ivy resolution cached."""
    drivers = {POSTGRESQL_JDBC: postgresql_jar(env), MARIADB_JDBC: mariadb_jar(env)}
    home = ivy_home() if ivy is None else ivy
    found = {c: drivers.get(c) or cached_jar(c, home) for c in ALL}
    return {c: f for c, f in found.items() if f}


def choose_mode(mode: str, local: bool, coords: Sequence[str], have_files: bool) -> str:
    """``files`` or ``packages`` (pure). ``have_files``: every coordinate in ``coords`` has a local file.
    Raises ConfigError for an unknown ``mode``."""
    if mode not in MODES:
        raise ConfigError(f"{JARS_ENV}={mode!r}: expected one of {', '.join(MODES)}")
    if mode != "auto":
        return mode
    return "files" if local and have_files else "packages"


def jar_conf(user: Mapping[str, str], coords: Sequence[str], local: bool, mode: str = "auto",
             files: Mapping[str, str] | None = None) -> dict[str, str]:
    """The Spark jar settings for a session (pure): nothing when the user set their own.

    ``files``: coordinates' local jar files (``local_files``)."""
    if any(k in user for k in USER_KEYS):
        return {}
    have = dict(files or {})
    if choose_mode(mode, local, coords, all(c in have for c in coords)) == "files":
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


def repositories(user: Mapping[str, str]) -> list[str]:
    """Where Spark resolves ``spark.jars.packages`` from (besides the local caches): ``spark.jars.repositories``,
    then Maven Central."""
    extra = [r.strip() for r in str(user.get("spark.jars.repositories", "")).split(",") if r.strip()]
    return [*extra, MAVEN_CENTRAL]


def preflight(conf: Mapping[str, str], timeout: float = 10.0, probe: Any = None) -> None:
    """Before a JVM starts: every local file of ``spark.jars`` exists, and every coordinate of
    ``spark.jars.packages`` is cached (``~/.ivy2``, ``~/.m2``) or found in a repository. A missing file or an unknown
    coordinate is a ``ConfigError`` (exit 2); repositories that cannot be reached a ``JarsUnavailable`` (exit 75).
    With ``spark.jars.ivySettings`` (your own resolvers) the coordinates are left to Spark. ``probe(url, timeout)``:
    the HTTP status of a HEAD request (tests)."""
    for item in (j.strip() for j in str(conf.get("spark.jars", "")).split(",") if j.strip()):
        path = item[len("file:"):] if item.startswith("file:") else item
        if "://" not in item and not Path(path).is_file():
            raise ConfigError(f"jar file {path} (spark.jars) does not exist: install it or correct the path (the "
                              f"PostgreSQL driver: apt-get install libpostgresql-jdbc-java or {POSTGRESQL_JAR_ENV}; "
                              f"MariaDB Connector/J: libmariadb-java or {MARIADB_JAR_ENV})")
    packages = [c.strip() for c in str(conf.get("spark.jars.packages", "")).split(",") if c.strip()]
    if not packages or conf.get("spark.jars.ivySettings"):
        return
    ivy, m2 = ivy_home(conf), Path.home() / ".m2" / "repository"
    probe = probe or _head
    for coordinate in packages:
        parts = coordinate.split(":")
        if len(parts) != 3 or not all(parts):
            raise ConfigError(f"spark.jars.packages: {coordinate!r} is not group:artifact:version")
        if cached_jar(coordinate, ivy) or Path(maven_url(coordinate, str(m2))).is_file():  # ~/.m2: the same layout
            continue
        failures, missing = [], []
        for repo in repositories(conf):
            url = maven_url(coordinate, repo)
            try:
                status = probe(url, timeout)
            except OSError as exc:  # DNS, refused, timeout, TLS: the repository is not reachable from here
                failures.append(f"{_shown(repo)} ({getattr(exc, 'reason', exc)})")
                continue
            if 200 <= status < 400:
                break
            missing.append(f"{_shown(url)} (HTTP {status})")
        else:
            if missing and not failures:
                raise ConfigError(f"jar {coordinate} (spark.jars.packages) is in no repository: {'; '.join(missing)}."
                                  " Check the coordinate, or add the repository that has it to spark.jars.repositories")
            raise JarsUnavailable(f"jar {coordinate} is not in the local caches ({ivy / 'jars'}, {m2}) and "
                                  f"{'; '.join(failures + missing)} could not serve it: check the network or proxy, "
                                  "set spark.jars.repositories to a mirror you reach, or give the file in spark.jars")


def _shown(url: str) -> str:
    """A repository URL as messages show it: credentials in it (``https://user:secret@host/…``) masked."""
    return re.sub(r"//[^/@]+@", "//***@", url)


def _head(url: str, timeout: float) -> int:
    request = urllib.request.Request(url, method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - a repository URL
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


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
