"""The one exceptions module.

Two families: ``RetryableError`` (try again later, nothing was committed: broker or registry unreachable, commit
conflict) and ``TerminalError`` (a person must act: bad config, bad data under ``on_bad_record: fail``, incompatible
schema change). Airflow maps terminal errors to ``AirflowFailException`` (no retries).

Every error message names what it can (table, topic, partition, offset) and says what to do. Messages never contain
secrets: build them from names and offsets, not from config dicts.
"""

from __future__ import annotations

from cdc.common.cli_contract import ExitCode


class CdcError(Exception):
    """Base class. ``exit_code`` is what ``jobs/ingest.py`` exits with."""

    exit_code = int(ExitCode.OTHER)
    retryable = False


class TerminalError(CdcError):
    """A person must act before a rerun can succeed."""

    exit_code = int(ExitCode.TERMINAL)


class RetryableError(CdcError):
    """Transient: rerunning the same command later is safe and expected to succeed."""

    exit_code = int(ExitCode.RETRYABLE)
    retryable = True


class ConfigError(TerminalError):
    """The pipeline YAML is invalid. The message names the file and the key."""


class DecodeError(TerminalError):
    """One Kafka record could not be decoded (corrupt bytes, unknown schema, not a Debezium event, ...).

    Raised by pure decoders; the reader turns it into a dead letter or, with ``on_bad_record: fail``, into a
    ``BadRecordError`` naming topic/partition/offset.
    """


class UnboundColumns(DecodeError):
    """A record carries non-null values in columns of its own schema that the batch schema lacks (a schema the
    batch's samples did not show, e.g. a column dropped at the source mid-batch). The reader always stages it as an
    error row; the job then widens the batch schema with the record's columns and stages the batch again
    (``cdc.run``), so it only stays a dead letter when that is not possible."""


class BadRecordError(TerminalError):
    """A record could not be ingested and the table is configured with ``on_bad_record: fail``."""


class DeadLetterRatioExceeded(TerminalError):
    """More records of one batch went to dead letters than ``max_dead_letter_ratio`` allows."""


class SchemaEvolutionError(TerminalError):
    """An incompatible source schema change (narrowing, type change, decimal scale change)."""


class OrderingError(TerminalError):
    """An event lacks the source log position used for ordering (e.g. ``source.lsn``)."""


class PositionRegression(TerminalError):
    """Source positions went far backwards (database failover, RESET MASTER, new cluster): raise ordering_epoch."""


class SchemaRegistryUnavailable(RetryableError):
    """The schema registry could not be reached; nothing was committed."""


class KafkaUnavailable(RetryableError):
    """The broker could not be reached or a read did not finish in time; nothing was committed."""


class TopicNotFound(TerminalError):
    """A configured topic does not exist on the broker."""


class ConcurrentRunError(RetryableError):
    """Another run holds the table's batch (ledger claim or Iceberg commit conflict)."""


class CatalogError(TerminalError):
    """The Iceberg catalog or warehouse is not usable (unwritable path, missing namespace rights, ...)."""


class CatalogUnavailable(RetryableError):
    """The catalog's service (a jdbc catalog's database) could not be reached; nothing was committed by the step."""


def one_line(exc: BaseException, limit: int | None = None) -> str:
    """``Type: first line of the message`` (cut to ``limit`` characters), for warnings, step reports and status pages."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:limit]
