"""The JDBC catalog's second reader: pyiceberg's SQL catalog on the same database (pure, standard library only).

Spark writes through Iceberg's Java ``JdbcCatalog`` (``catalog: {type: jdbc, uri: jdbc:postgresql://…}``); the
Airflow side (plan, status view, assets) reads the same tables with pyiceberg's ``SqlCatalog``, which takes a
SQLAlchemy URL instead of a JDBC one. Both store one row per table in ``iceberg_tables`` (``catalog_name`` = the
catalog's ``name``, ``table_namespace`` = the dot-joined namespace) and namespaces in
``iceberg_namespace_properties``, so they see the same tables when they use the same catalog name.

``jdbc.schema-version``: Java's ``V0`` schema lacks the ``iceberg_type`` column (views) that pyiceberg adds when it
creates the tables; pyiceberg reads either (rows without a type are tables). The job asks for ``V1`` unless the
YAML says otherwise (``cdc.spark.session``), so both sides agree on one schema.

    sqlalchemy_url("jdbc:postgresql://db:5432/iceberg", {"jdbc.user": "cdc", "jdbc.password": "pw"})
    == "postgresql+psycopg://cdc:pw@db:5432/iceberg"
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Mapping
from urllib.parse import parse_qsl, quote, urlencode

if TYPE_CHECKING:
    from cdc.config.model import CatalogConfig

POSTGRES_DRIVER = "postgresql+psycopg"  # SQLAlchemy dialect + psycopg 3
DEFAULT_PORT = 5432
_PG = re.compile(r"^jdbc:postgresql://(?P<hosts>[^/?]*)(?:/(?P<db>[^?]*))?(?:\?(?P<query>.*))?$")
# PostgreSQL JDBC URL parameters → libpq connection parameters (others are JDBC-only and dropped)
_PG_PARAMS = {"sslmode": "sslmode", "sslrootcert": "sslrootcert", "sslcert": "sslcert", "sslkey": "sslkey",
              "connectTimeout": "connect_timeout", "ApplicationName": "application_name",
              "applicationName": "application_name", "targetServerType": "target_session_attrs"}
_TARGET_SESSION = {"any": "any", "primary": "read-write", "master": "read-write", "secondary": "read-only",
                   "preferSecondary": "prefer-standby", "preferslave": "prefer-standby"}
_SECRET_PARAM = re.compile(r"(?i)(password=)[^&;]*")


def sqlalchemy_url(jdbc_url: str, properties: Mapping[str, str] = {}) -> str:
    """The SQLAlchemy URL for pyiceberg's ``SqlCatalog`` of a JDBC URL plus ``jdbc.user`` / ``jdbc.password``.

    ``jdbc:postgresql://host[:port][,host2[:port]]/db?params`` → ``postgresql+psycopg://user:pw@host:port/db?...``
    (user and password from the properties, else from the URL's ``user`` / ``password`` parameters; ``ssl=true`` →
    ``sslmode=require``); ``jdbc:sqlite:<path>`` → ``sqlite:///<path>``. Raises ValueError for anything else."""
    if jdbc_url.startswith("jdbc:sqlite:"):
        path = jdbc_url[len("jdbc:sqlite:"):]
        return "sqlite:///" + ("" if path in ("", ":memory:") else path)
    m = _PG.match(jdbc_url.strip())
    if not m:
        raise ValueError(f"catalog.uri {redact_url(jdbc_url)!r}: expected jdbc:postgresql://<host>:<port>/<database>"
                         " (or jdbc:sqlite:<path>) for pyiceberg's SQL catalog")
    params = dict(parse_qsl(m.group("query") or "", keep_blank_values=True))
    user = properties.get("jdbc.user") or params.pop("user", "")
    password = properties.get("jdbc.password") or params.pop("password", "")
    params.pop("user", None)
    params.pop("password", None)
    query: dict[str, str] = {}
    if params.get("ssl", "").lower() == "true" and "sslmode" not in params:
        query["sslmode"] = "require"
    for k, v in params.items():
        if k in _PG_PARAMS:
            query[_PG_PARAMS[k]] = _TARGET_SESSION.get(v, v) if k == "targetServerType" else v
    hosts = [_with_port(h) for h in m.group("hosts").split(",") if h] or [f"localhost:{DEFAULT_PORT}"]
    auth = quote(user, safe="") + (":" + quote(password, safe="") if password else "") + "@" if user else ""
    db = m.group("db") or user or "postgres"
    pairs = list(query.items())
    if len(hosts) > 1:  # SQLAlchemy's psycopg dialect: one host=<host>:<port> parameter per host
        pairs += [("host", h) for h in hosts]
    tail = f"?{urlencode(pairs)}" if pairs else ""
    return f"{POSTGRES_DRIVER}://{auth}{hosts[0] if len(hosts) == 1 else ''}/{quote(db, safe='')}{tail}"


def _with_port(host: str) -> str:
    """``host`` / ``[v6]`` → with the default port; ``host:port`` / ``[v6]:port`` unchanged."""
    return host if re.match(r"^(\[[^\]]*\]|[^:\[\]]+):\d+$", host) else f"{host}:{DEFAULT_PORT}"


def redact_url(url: str) -> str:
    """A URL safe to print: ``user:password@`` and ``password=`` parameters masked."""
    url = re.sub(r"(://[^:/@?]+):[^@/]*@", r"\1:***@", url)
    return _SECRET_PARAM.sub(r"\1***", url)


def pyiceberg_properties(catalog: "CatalogConfig") -> dict[str, str]:
    """``load_catalog`` properties of a ``jdbc`` catalog for pyiceberg's SQL catalog.

    The reader never creates the catalog's tables (``init_catalog_tables: false``): the job does, when it first
    writes. The catalog's other properties (FileIO settings such as ``s3.endpoint``) pass under pyiceberg's names
    (``cdc.config.storage``); ``jdbc.*`` are the Java driver's."""
    from cdc.config.storage import pyiceberg_properties

    props = pyiceberg_properties(catalog.warehouse, {k: v for k, v in catalog.properties.items()
                                                     if not k.startswith("jdbc.") and k != "uri"})
    return {**props, "type": "sql", "uri": sqlalchemy_url(catalog.uri, catalog.properties),
            "warehouse": catalog.warehouse, "init_catalog_tables": "false"}
