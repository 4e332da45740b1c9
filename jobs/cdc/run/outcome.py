"""What a table's run reports and how failures are named: ``TableResult`` (the summary entry), ``phase`` (times a
phase and turns foreign errors into ours) and ``unwrap_task_error`` (Spark/Py4J text → our error classes)."""

from __future__ import annotations

import re
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

from cdc.common import cli_contract as cli
from cdc.common import errors
from cdc.common.errors import CdcError, ConcurrentRunError
from cdc.iceberg import failures as catalog_errors
from cdc.iceberg.failures import is_commit_conflict
from cdc.kafka.plan import OffsetRange
from cdc.observe import progress

_TASK_ERROR = re.compile(r"\[cdc:(\w+)\] (.+)")


@dataclass
class TableResult:
    table: str
    topic: str
    status: str = "empty"  # committed | empty | dry_run
    mode: str = "incremental"
    batch_id: int | None = None
    ranges: list[OffsetRange] = field(default_factory=list)
    events_read: int = 0
    events_skipped: int = 0
    dead_letters: int = 0
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    snapshot_id: int | None = None
    recovered_batch_id: int | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """The table's entry in the job's JSON summary."""
        return {**self.__dict__, "ranges": [r.summary() for r in self.ranges]}

    def add(self, other: "TableResult") -> None:
        for k in ("events_read", "events_skipped", "dead_letters", "inserted", "updated", "deleted"):
            setattr(self, k, getattr(self, k) + getattr(other, k))
        for k, v in other.seconds.items():
            self.seconds[k] = round(self.seconds.get(k, 0.0) + v, 3)


@contextmanager
def phase(result: TableResult, name: str) -> Iterator[None]:
    t0 = time.monotonic()
    progress.phase_started(result, name)
    try:
        yield
    except CdcError:
        raise
    except Exception as exc:  # Spark/Py4J errors: unwrap ours from task tracebacks, else name the phase
        raise unwrap_task_error(exc, f"table {result.table}: {name} failed") from exc
    finally:
        result.seconds[name] = round(result.seconds.get(name, 0.0) + time.monotonic() - t0, 3)
        progress.phase_ended(result, name, time.monotonic() - t0)


def unwrap_task_error(exc: BaseException, context: str) -> CdcError:
    """Turn a Spark/Py4J error into one of ours with a one-line message.

    Errors raised in Python tasks come back as text: ``[cdc:<Class>] <message>`` (see ``cdc.stage.reader.map_chunks``)
    recovers our class and message. Otherwise: Iceberg commit conflicts → ``ConcurrentRunError`` (retryable);
    storage / catalog failures (permissions, missing or non-directory paths, metadata I/O) → ``CatalogError``;
    anything else → ``CdcError`` (exit 1). The message is the most specific line of the Java error (the innermost
    ``Caused by``), not Py4J's "An error occurred while calling o123.sql".
    """
    text = str(exc)
    found = _TASK_ERROR.findall(text)
    if found:
        name, message = found[-1]
        cls = getattr(errors, name, None)
        if not (isinstance(cls, type) and issubclass(cls, CdcError)):
            cls = CdcError
        return cls(message.strip())
    detail = _java_detail(text) or type(exc).__name__
    if is_commit_conflict(exc):
        return ConcurrentRunError(f"{context}: another writer committed to the same table at the same time "
                                  f"({detail[:300]}); nothing was committed by this run. Retry later")

    if (jdbc := catalog_errors.classify(text, context)) is not None:
        return jdbc
    if any(m in text for m in _STORAGE_MARKERS):
        return errors.CatalogError(f"{context}: the Iceberg catalog/warehouse is not usable: {detail[:400]}. Check "
                                   "catalog.warehouse (path exists, is a directory, is writable) and catalog settings")
    return CdcError(f"{context}: {detail[:500]}")


_STORAGE_MARKERS = ("AccessDeniedException", "Permission denied", "ParentNotDirectoryException", "Not a directory",
                    "is not a directory", "Read-only file system", "No space left on device", "RuntimeIOException",
                    "FileNotFoundException", "NoSuchNamespaceException", "Mkdirs failed", "Failed to create file",
                    "NotFoundException: Failed to open input stream", "AuthorizationException", "ForbiddenException")
_JAVA_LINE = re.compile(r"^(?:Caused by: )?([\w$.]+(?:Exception|Error))(?:: (.*))?$")


def _java_detail(text: str) -> str:
    """The most specific line of a Java/Py4J error text: innermost ``Caused by: X: msg`` → ``X: msg``."""
    best = None
    for raw in text.splitlines():
        line = raw.strip().lstrip(": ").strip()
        if not line or line.startswith("at ") or line.startswith("...") or line.startswith("An error occurred while"):
            continue
        m = _JAVA_LINE.match(line)
        if m:
            best = f"{m.group(1).rsplit('.', 1)[-1]}: {m.group(2) or ''}".rstrip(": ")
        elif best is None:
            best = line
    return best or ""


def job_failed(exc: BaseException, job: str) -> int:
    """How a job ends on an error: one ``ERROR [<Class>] <message>`` line on stderr (``CDC_TRACEBACK=1`` adds the
    traceback of an unclassified error: Spark/JVM, a bug), the same line in ``$CDC_RESULT_FILE``, and the exit code
    (``CdcError.exit_code``; interrupted; Spark/Py4J errors through :func:`unwrap_task_error`)."""
    import os
    import sys
    import traceback


    if isinstance(exc, CdcError):
        line, code = f"ERROR [{type(exc).__name__}] {exc}", exc.exit_code
    elif isinstance(exc, KeyboardInterrupt):
        line, code = "ERROR interrupted", cli.ExitCode.INTERRUPTED
    else:
        if os.environ.get("CDC_TRACEBACK"):
            traceback.print_exception(exc)
        err = unwrap_task_error(exc, job)
        line, code = f"ERROR [{type(err).__name__}] {err}", err.exit_code
    print(line, file=sys.stderr, flush=True)
    return cli.finish(code, error=line)
