"""The command-line contract between the jobs (``jobs/ingest.py``, ``jobs/maintenance.py``) and whoever runs them
(a person, ``plugins/cdc_airflow``): flag names, the value formats of the backfill flags, the exit codes and the
result file. One home, so the DAG and the job cannot disagree.

Pure: standard library only (the Airflow side imports this module while parsing DAG files).

Timestamps (``--start-timestamp`` / ``--end-timestamp``, DAG params ``start_timestamp`` / ``end_timestamp``):
ISO-8601 (``2024-05-01T08:00:00Z``, ``2024-05-01 10:00+02:00``, ``2024-05-01``; no zone = UTC) or **epoch
milliseconds** (digits only, at least 12 of them). A number of fewer digits (e.g. 10-digit epoch *seconds*) is
rejected rather than read as a time in 1970. Kafka record timestamps are milliseconds, so that is the one unit.

Exit codes: see ``ExitCode``; ``outcome`` says how a scheduler treats each one.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from enum import IntEnum
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from cdc.common import result_file as results

REPLACE = "--replace"


@dataclass(frozen=True)
class Bounds:
    """Explicit backfill bounds for one topic: per-partition offsets and/or timestamps (epoch ms)."""

    start_offsets: Mapping[int, int] = field(default_factory=dict)
    end_offsets: Mapping[int, int] = field(default_factory=dict)
    start_ts_ms: int | None = None
    end_ts_ms: int | None = None


if TYPE_CHECKING:
    pass

# --- flags of jobs/ingest.py -------------------------------------------------------------------------------------
CONFIG = "--config"
TABLE = "--table"
MAX_RECORDS = "--max-records"
DRY_RUN = "--dry-run"
MODE = "--mode"
START_OFFSETS = "--start-offsets"
END_OFFSETS = "--end-offsets"
START_TIMESTAMP = "--start-timestamp"
END_TIMESTAMP = "--end-timestamp"
MASTER = "--master"
RESET_CURSOR = "--reset-cursor"
JOB_MODES = ("incremental", "backfill")

# Environment variable naming a file the job writes its ``JobResult`` to (set by the Airflow operator).
RESULT_FILE_ENV = "CDC_RESULT_FILE"


@dataclass(frozen=True)
class Retention:
    """One retention setting of ``jobs/maintenance.py``: its DAG param (the flag is its dashed form), default and
    meaning."""

    param: str
    default: float
    description: str
    integer: bool = False

    @property
    def flag(self) -> str:
        return "--" + self.param.replace("_", "-")


MAINTENANCE_RETENTION = (
    Retention("staging_retention_hours", 72, "Drop staged batches committed longer ago than this."),
    Retention("tombstone_retention_hours", 168, "Delete tombstones (late-update guards of deleted keys) older than "
                                                "this. Keep it longer than the worst expected replay/backfill window."),
    Retention("snapshot_retention_hours", 168, "Expire target snapshots older than this (time travel window)."),
    Retention("retain_last", 5, "Always keep at least this many snapshots per table.", integer=True),
    Retention("orphan_retention_hours", 72, "Remove unreferenced files older than this; must exceed the longest job "
                                            "run."),
)
MIN_ORPHAN_RETENTION_HOURS = 24  # the Airflow side refuses less: files of running jobs could be deleted


def maintenance_args(config_path: str, tables: Sequence[str] = (), **values: float) -> list[str]:
    """``jobs/maintenance.py``'s arguments: every retention flag (``values`` by param name, else its default)."""
    known = {r.param: r for r in MAINTENANCE_RETENTION}
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise TypeError(f"unknown maintenance setting(s) {unknown} (known: {', '.join(known)})")
    args = [CONFIG, config_path]
    for r in MAINTENANCE_RETENTION:
        v = values.get(r.param, r.default)
        args += [r.flag, str(int(v)) if r.integer or float(v).is_integer() else str(v)]
    for t in tables:
        args += [TABLE, t]
    return args


class ExitCode(IntEnum):
    """The one table of exit codes. Scheduler behaviour per code: ``outcome``."""

    OK = 0
    OTHER = 1  # anything unclassified (a bug, Spark/JVM failure): retried
    TERMINAL = 2  # a person must act (config, incompatible schema, bad data): never retried
    RETRYABLE = 75  # EX_TEMPFAIL: transient (broker/registry down, another run holds the table): retry later
    INTERRUPTED = 130  # SIGINT / KeyboardInterrupt


_OUTCOMES = {ExitCode.OK: "ok", ExitCode.TERMINAL: "terminal", ExitCode.RETRYABLE: "retryable"}


def outcome(returncode: int) -> str:
    """How a scheduler treats an exit code: ok | terminal (fail, no retry) | retryable | failed (fail, retry)."""
    return _OUTCOMES.get(returncode, "failed")  # type: ignore[call-overload]


class ArgumentError(ValueError):
    """A flag value does not follow the contract; the message names the flag (or param) and the expected form."""


# --- timestamps --------------------------------------------------------------------------------------------------
MIN_EPOCH_MS_DIGITS = 12  # 100000000000 ms = 1973-03-03: anything shorter is a unit mistake (seconds), not a time
EPOCH_MS_PATTERN = rf"\d{{{MIN_EPOCH_MS_DIGITS},15}}"
ISO_PATTERN = r"\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?"
TIMESTAMP_PATTERN = rf"^$|^{EPOCH_MS_PATTERN}$|^{ISO_PATTERN}$"  # JSON-schema pattern of the DAG params
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def parse_timestamp(value: str, name: str = "timestamp") -> int:
    """ISO-8601 (no zone = UTC) or epoch milliseconds → epoch milliseconds. ``name`` goes into the error message."""
    text = value.strip()
    if re.fullmatch(r"\d+", text):
        if len(text) < MIN_EPOCH_MS_DIGITS:
            raise ArgumentError(f"{name}: {value!r} has fewer than {MIN_EPOCH_MS_DIGITS} digits: epoch seconds? "
                                "Give ISO-8601 or epoch milliseconds (seconds followed by 000)")
        return int(text)
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ArgumentError(f"{name}: {value!r} is neither ISO-8601 nor epoch milliseconds") from None
    dt = dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)
    return (dt - _EPOCH) // timedelta(milliseconds=1)


def timestamp_arg(ms: int) -> str:
    """The canonical flag value of a timestamp: epoch milliseconds."""
    return str(int(ms))


def iso(ms: int) -> str:
    """Epoch milliseconds → ISO-8601 UTC (for messages and logs)."""
    return (_EPOCH + timedelta(milliseconds=ms)).isoformat().replace("+00:00", "Z")


# --- offsets -----------------------------------------------------------------------------------------------------
Offsets = dict[str, dict[int, int]]  # {"topic": {partition: offset}}


def parse_offsets(value: str | Mapping[str, Any] | None, name: str = "offsets") -> Offsets:
    """``{"<topic>": {"<partition>": offset}}`` (JSON text or an already decoded mapping) → ``{topic: {p: o}}``."""
    if value is None or value == "":
        return {}
    try:
        raw = json.loads(value) if isinstance(value, str) else value
        out = {str(t): {int(p): int(o) for p, o in parts.items()} for t, parts in raw.items()}
    except (ValueError, AttributeError, TypeError):
        raise ArgumentError(f'{name}: expected JSON like {{"topic": {{"0": 123}}}}, got {value!r}') from None
    bad = [(t, p, o) for t, parts in out.items() for p, o in parts.items() if p < 0 or o < 0]
    if bad:
        t, p, o = bad[0]
        raise ArgumentError(f"{name}: {t} partition {p}: offset {o}: partitions and offsets are >= 0")
    return out


def offsets_arg(offsets: Mapping[str, Mapping[int, int]]) -> str:
    """The canonical flag value of offsets: JSON with string partitions, sorted."""
    return json.dumps({t: {str(p): int(o) for p, o in sorted(parts.items())} for t, parts in sorted(offsets.items())},
                      sort_keys=True)


# --- the parsed backfill range -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class BackfillBounds:
    """The backfill range of one run: explicit ``Bounds`` per topic that has offsets, and ``default`` (the timestamps
    alone) for every other topic. An explicit value: no range given is ``default == Bounds()``, never "falsy"."""

    default: "Bounds"
    topics: Mapping[str, "Bounds"] = field(default_factory=dict)

    def for_topic(self, topic: str) -> "Bounds":
        return self.topics.get(topic, self.default)


# --- the result file ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class JobResult:
    """What a job reports besides its exit code: the JSON summary (success) or the one-line error (failure)."""

    exit_code: int
    summary: dict[str, Any] | None = None
    error: str | None = None

    def to_json(self) -> str:
        return json.dumps({"exit_code": int(self.exit_code), "summary": self.summary, "error": self.error},
                          default=str)

    @classmethod
    def from_json(cls, text: str) -> "JobResult":
        raw = json.loads(text)
        return cls(int(raw["exit_code"]), raw.get("summary"), raw.get("error"))


def write_result(result: JobResult, env: Mapping[str, str] | None = None) -> None:
    """Write ``result`` to ``$CDC_RESULT_FILE`` (a path, or a URI such as ``s3://…``: ``cdc.common.result_file``) when that is
    set; otherwise do nothing."""

    target = (os.environ if env is None else env).get(RESULT_FILE_ENV)
    if not target:
        return
    results.write_text(str(target), result.to_json())


def read_result(path: str | os.PathLike[str]) -> JobResult | None:
    """The result a job wrote, or None when it wrote none (it died first, or does not speak this contract)."""

    try:
        text = results.read_text(str(path))
        return JobResult.from_json(text) if text is not None else None
    except (ValueError, KeyError, TypeError):
        return None


def finish(exit_code: int, summary: dict[str, Any] | None = None, error: str | None = None) -> int:
    """Report ``JobResult`` to the result file (if requested) and return ``exit_code`` for ``sys.exit``."""
    write_result(JobResult(int(exit_code), summary, error))
    return int(exit_code)