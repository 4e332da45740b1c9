"""Errors of the catalog's services, named (pure): unreachable → retry later, refused → a person must act.

Iceberg's ``JdbcCatalog`` reaches PostgreSQL on every catalog operation (table load, commit, namespace), so a database
that is down, restarting or out of connections fails any phase. Those are transient like an unreachable broker
(``CatalogUnavailable``, exit 75); wrong credentials, a missing database, missing grants or no JDBC driver are not
(``CatalogError``, exit 2). The same rule for a ``rest`` catalog (its service unreachable or answering 5xx → 75;
OAuth2 credentials or token refused, 401/403 → 2) and for an ``s3://`` warehouse (``S3FileIO``: the endpoint
unreachable, throttling or 5xx → 75; unknown keys, bad signatures, access denied, a missing bucket → 2), whatever the
catalog. Called from ``cdc.run.outcome.unwrap_task_error`` on the text of a Spark/Py4J error.
"""

from __future__ import annotations

import re

from cdc.common.errors import CatalogError, CatalogUnavailable, CdcError
from cdc.iceberg.sql_catalog import redact_url

_CONFLICT_MARKERS = ("ValidationException", "CommitFailedException", "CommitStateUnknownException",
                     "Found conflicting files", "AlreadyExistsException")


def is_commit_conflict(exc: BaseException) -> bool:
    text = str(exc)
    return any(m in text for m in _CONFLICT_MARKERS)


_JDBC = ("org.apache.iceberg.jdbc", "org.postgresql", "PSQLException", "JdbcCatalog", "No suitable driver")
_TERMINAL = re.compile(r"password authentication failed|no pg_hba\.conf entry|permission denied for|"
                       r"role \"[^\"]*\" does not exist|database \"[^\"]*\" does not exist|No suitable driver|"
                       r"ClassNotFoundException: org\.postgresql")
_TRANSIENT = ("Connection refused", "refused. Check that the hostname", "The connection attempt failed",
              "Connection reset", "SocketTimeoutException", "timed out", "the database system is starting up",
              "the database system is shutting down", "the database system is in recovery mode", "too many clients",
              "remaining connection slots", "terminating connection", "An I/O error occurred",
              "This connection has been closed", "Connection failed", "UnknownHostException",
              "could not serialize access", "deadlock detected")
# Two runs creating / upgrading the catalog's own tables at once (a fresh database): the loser's DDL fails; a rerun
# finds them in place.
_CATALOG_TABLES = re.compile(r"iceberg_tables|iceberg_namespace_properties|update SQL schema|initialize JDBC catalog")
_DDL_RACE = ("already exists", "tuple concurrently updated", "duplicate key value violates unique constraint")
_PSQL_LINE = re.compile(r"(PSQLException|UncheckedSQLException|SQLException|SQLNonTransientConnectionException|"
                        r"SQLTransientConnectionException): (.+)$")


def classify(text: str, context: str) -> CdcError | None:
    """Our error for an object store, REST catalog or JDBC catalog failure in ``text`` (a Java error's full text),
    or None when it is not one."""
    for service in (object_store_error, rest_error):
        if (found := service(text, context)) is not None:
            return found
    return jdbc_error(text, context)


# The AWS SDK's exceptions (S3FileIO; the Glue client): their class names, not stack frames, mark them
_S3 = re.compile(r"(S3Exception|SdkClientException|AwsServiceException|GlueException|SdkServiceException|"
                 r"NoSuchBucketException|AccessDeniedException \(Service)")
_S3_TERMINAL = re.compile(r"Status Code: 40[03]|InvalidAccessKeyId|SignatureDoesNotMatch|AccessDenied|FORBIDDEN|"
                          r"Unable to load credentials|Unable to load region|NoSuchBucket|InvalidToken|ExpiredToken|"
                          r"UnrecognizedClientException|InvalidClientTokenId")
_S3_TRANSIENT = re.compile(r"Unable to execute HTTP request|Connection refused|Connection reset|timed out|"
                           r"Status Code: 50[0234]|SlowDown|Throttling|UnknownHostException|Unable to unmarshall")
_S3_LINE = re.compile(r"((?:S3|SdkClient|AwsService|Glue|SdkService|NoSuchBucket)Exception): (.+)$")


def object_store_error(text: str, context: str) -> CdcError | None:
    """The warehouse's object storage (or an AWS service) refusing the job or out of reach, or None."""
    if not _S3.search(text):
        return None
    detail = _detail_of(text, _S3_LINE)
    if _S3_TERMINAL.search(text):
        return CatalogError(f"{context}: the warehouse's object storage refused the job: {detail}. Check the S3 "
                            "credentials (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY of the environment, or "
                            "catalog.properties s3.access-key-id / s3.secret-access-key from ${ENV}), the bucket and "
                            "its policy, s3.endpoint and client.region")
    if _S3_TRANSIENT.search(text):
        return CatalogUnavailable(f"{context}: the warehouse's object storage is unreachable: {detail}. Nothing was "
                                  "committed by this step; check that the S3 endpoint is up (catalog.properties "
                                  "s3.endpoint), then retry")
    return None


_REST = re.compile(r"(RESTException|NotAuthorizedException|ServiceUnavailableException|ServiceFailureException|"
                   r"HttpHostConnectException|org\.apache\.hc\.client5|OAuth2|oauth/tokens)")
_REST_TERMINAL = re.compile(r"NotAuthorizedException|ForbiddenException|invalid_client|unauthorized_client|"
                            r"invalid_grant|invalid_scope|Malformed request: .*credential")
_REST_TRANSIENT = re.compile(r"HttpHostConnectException|Connection refused|Connection reset|"
                             r"ServiceUnavailableException|ServiceFailureException|SocketTimeoutException|"
                             r"ConnectTimeoutException|NoHttpResponseException|UnknownHostException|timed out|"
                             r"Error occurred while processing \w+ request")
_REST_LINE = re.compile(r"((?:RESTException|NotAuthorizedException|ForbiddenException|ServiceUnavailableException|"
                        r"ServiceFailureException|HttpHostConnectException)): (.+)$")


def rest_error(text: str, context: str) -> CdcError | None:
    """A REST catalog's service refusing the job's credentials or out of reach, or None."""
    if not _REST.search(text):
        return None
    detail = _detail_of(text, _REST_LINE)
    if _REST_TERMINAL.search(text):
        return CatalogError(f"{context}: the rest catalog refused the job's credentials: {detail}. Check "
                            "catalog.properties credential (client_id:client_secret) or token, oauth2-server-uri and "
                            "scope (secrets from ${ENV})")
    if _REST_TRANSIENT.search(text):
        return CatalogUnavailable(f"{context}: the rest catalog is unreachable: {detail}. Nothing was committed by "
                                  "this step; check that the catalog service is up and catalog.uri is right, then retry")
    return None


def _detail_of(text: str, pattern: re.Pattern[str]) -> str:
    """The innermost line matching ``pattern`` (``Class: message``), credentials in URLs masked."""
    found = [f"{m.group(1)}: {m.group(2)}" for line in text.splitlines() if (m := pattern.search(line.strip()))]
    line = found[-1] if found else next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return redact_url(line)[:400].rstrip(".")


def jdbc_error(text: str, context: str) -> CdcError | None:
    """A jdbc catalog's database refusing the job or out of reach, or None."""
    if not any(m in text for m in _JDBC):
        return None
    detail = _detail(text)
    if _TERMINAL.search(text):
        return CatalogError(f"{context}: the jdbc catalog's database refused the job: {detail}. Check catalog.uri, "
                            "catalog.properties jdbc.user / jdbc.password (from ${ENV}), the database's grants and "
                            "the PostgreSQL JDBC driver jar (cdc.spark.jars)")
    if _CATALOG_TABLES.search(text) and any(m in text for m in _DDL_RACE):
        return CatalogUnavailable(f"{context}: another run created or upgraded the jdbc catalog's own tables at the "
                                  f"same time: {detail}. Nothing was committed by this step; retry")
    if any(m in text for m in _TRANSIENT):
        return CatalogUnavailable(f"{context}: the jdbc catalog's database is unreachable: {detail}. Nothing was "
                                  "committed by this step; check that the database is up and catalog.uri is right, "
                                  "then retry")
    return None


def _detail(text: str) -> str:
    """The innermost SQL error line (PostgreSQL's message), with any credentials in a URL masked."""
    found = [m.group(0) for line in text.splitlines() if (m := _PSQL_LINE.search(line.strip()))]
    line = found[-1] if found else next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return redact_url(line)[:400].rstrip(".")