"""Pipeline configuration: one YAML file per pipeline → frozen, typed objects.

Validation happens up front (``load_config``); every error names the file and the key. ``${VAR}`` and
``${VAR:-default}`` in string values are replaced from the environment, so secrets (SASL passwords, registry
basic-auth) stay out of the file. ``PipelineConfig.redacted()`` gives a printable view. The objects and the values
each setting accepts live in ``cdc.config.model`` (re-exported here).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Mapping

import yaml

from cdc.common.errors import ConfigError
from cdc.config.bootstrap import parse_bootstrap
from cdc.config.catalogs import refusal
from cdc.config.model import (
    BAD_RECORD_POLICIES,
    CATALOG_TYPES,
    COLUMN_TYPE_NAMES,
    DECIMAL_COLUMN_TYPE,
    DEFAULT_MAX_RECORD_BYTES,
    DEFAULT_PLACEHOLDER,
    DELETE_MODES,
    ENVELOPES,
    FORMATS,
    WRITE_MODES,
    BatchConfig,
    CatalogConfig,
    PipelineConfig,
    TableConfig,
)
from cdc.config.names import collision_problem, helper_collision
from cdc.config.routing import check_entry
from cdc.config.table_layout import LayoutError, TableLayout, merge_defaults, parse_layout

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Top-level sections kept as written (``${ENV}``-substituted) in ``PipelineConfig.sections`` and validated by their
# readers: ``airflow`` by ``cdc_airflow.config.options`` (Airflow side), ``metrics`` by ``cdc.observe.metrics`` (both sides)
READER_SECTIONS = ("airflow", "metrics")
_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def load_config(path: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> PipelineConfig:
    """Read, substitute ``${ENV}`` and validate one pipeline YAML."""
    src = str(path)
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"{src}: cannot read config file ({exc.strerror})") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{src}: not valid YAML: {exc}") from None
    return parse_config(raw, src, os.environ if env is None else env)


def parse_config(raw: Any, src: str = "<memory>", env: Mapping[str, str] | None = None) -> PipelineConfig:
    """Every mistake is a ``ConfigError`` naming ``src`` (and the key where the parser knows it): a check that
    meets a value of a type it does not expect and fails in Python still names the file, never a raw TypeError."""
    p = _Parser(src, os.environ if env is None else env)
    try:
        return p.pipeline(raw)
    except (TypeError, AttributeError, ValueError, KeyError) as exc:
        raise ConfigError(f"{src}: a value of an unexpected type ({type(exc).__name__}: {exc}); check the file "
                          "against docs/configuration.md") from exc


class _Parser:
    def __init__(self, src: str, env: Mapping[str, str]):
        self.src, self.env = src, env

    def fail(self, key: str, msg: str) -> ConfigError:
        return ConfigError(f"{self.src}: key '{key}': {msg}")

    def subst(self, value: Any, key: str) -> Any:
        if isinstance(value, str):

            def repl(m: re.Match[str]) -> str:
                if m.group(1) in self.env:
                    return self.env[m.group(1)]
                if m.group(2) is not None:
                    return m.group(2)
                raise self.fail(key, f"environment variable {m.group(1)} is not set")

            return _ENV.sub(repl, value)
        if isinstance(value, dict):
            return {k: self.subst(v, f"{key}.{k}") for k, v in value.items()}
        if isinstance(value, list):
            return [self.subst(v, f"{key}[{i}]") for i, v in enumerate(value)]
        return value

    def mapping(self, raw: dict[str, Any], key: str, required: bool = False) -> dict[str, Any]:
        v = raw.get(key)
        if v is None:
            if required:
                raise self.fail(key, "is required")
            return {}
        if not isinstance(v, dict):
            raise self.fail(key, f"must be a mapping, got {type(v).__name__}")
        return {str(k): self.subst(val, f"{key}.{k}") for k, val in v.items()}

    def choice(self, value: Any, key: str, choices: tuple[str, ...]) -> str:
        if value not in choices:
            raise self.fail(key, f"must be one of {', '.join(choices)}, got {value!r}")
        return value

    def number(self, value: Any, key: str, kind: type, minimum: float) -> Any:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < minimum:
            raise self.fail(key, f"must be a number >= {minimum}, got {value!r}")
        if kind is int and not isinstance(value, int):
            raise self.fail(key, f"must be a whole number, got {value!r}")
        return kind(value)

    def flag(self, value: Any, key: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(key, f"must be true or false, got {value!r}")
        return value

    def unknown(self, raw: dict[str, Any], allowed: set[str], where: str) -> None:
        extra = sorted(set(raw) - allowed, key=str)  # a YAML key may be a number
        if extra:
            raise self.fail(f"{where}{extra[0]}", f"unknown key (allowed: {', '.join(sorted(allowed))})")

    def pipeline(self, raw: Any) -> PipelineConfig:
        if not isinstance(raw, dict):
            raise ConfigError(f"{self.src}: the file must hold a YAML mapping (pipeline:, kafka:, catalog:, tables:, "
                              f"...), got {type(raw).__name__}")
        top = {"pipeline", "kafka", "schema_registry", "format", "catalog", "spark", "metadata_namespace", "batch",
               "defaults", "tables", "schedule", *READER_SECTIONS}
        self.unknown(raw, top, "")
        name = raw.get("pipeline")
        if not isinstance(name, str) or not _NAME.match(name):
            raise self.fail("pipeline", "is required: a name of letters, digits and _")
        kafka = self.mapping(raw, "kafka", required=True)
        if not kafka.get("bootstrap.servers"):
            raise self.fail("kafka.bootstrap.servers", "is required")
        fmt = self.choice(raw.get("format", "avro"), "format", FORMATS)
        registry = self.mapping(raw, "schema_registry")
        if fmt == "avro" and not registry.get("url"):
            raise self.fail("schema_registry.url", "is required when format is avro")
        meta_ns = raw.get("metadata_namespace", "cdc_meta")
        if not isinstance(meta_ns, str) or not _NAME.match(meta_ns):
            raise self.fail("metadata_namespace", f"must be an identifier, got {meta_ns!r}")
        schedule = raw.get("schedule", "@hourly")
        if schedule is not None and not isinstance(schedule, str):
            raise self.fail("schedule", "must be a cron expression, a preset like @hourly, or null")
        tables_raw = raw.get("tables")
        if not isinstance(tables_raw, list) or not tables_raw:
            raise self.fail("tables", "is required: a non-empty list of {topic, target, ...}")
        defaults = self.mapping(raw, "defaults")
        tables = tuple(self.table(merge_defaults(defaults, t or {}), i) if isinstance(t, dict) or t is None
                       else self._bad_table(i) for i, t in enumerate(tables_raw))
        seen: set[str] = set()
        for t in tables:
            if t.topic and (t.target in seen or t.topic in seen):
                raise self.fail("tables", f"{t.target} / {t.topic} appears twice")
            seen.update((t.target, t.topic) if t.topic else ())  # patterns: cdc.config.routing checks resolved names
        clash = helper_collision(t.target for t in tables if t.topic)
        if clash:
            raise self.fail("tables", collision_problem(*clash, meta_ns))
        return PipelineConfig(
            pipeline=name, kafka=kafka, format=fmt, catalog=self.catalog(raw), tables=tables,
            schema_registry=registry, spark={k: str(v) for k, v in self.mapping(raw, "spark").items()},
            metadata_namespace=meta_ns, batch=self.batch(raw), schedule=schedule, source_path=self.src,
            sections={k: self.subst(raw[k], k) for k in READER_SECTIONS if raw.get(k) is not None},
        )

    def _bad_table(self, i: int) -> TableConfig:
        raise self.fail(f"tables[{i}]", "must be a mapping with topic and target")

    def catalog(self, raw: dict[str, Any]) -> CatalogConfig:
        c = self.mapping(raw, "catalog", required=True)
        self.unknown(c, {"name", "type", "warehouse", "uri", "properties"}, "catalog.")
        name = c.get("name", "lake")
        if not isinstance(name, str) or not _NAME.match(name):
            raise self.fail("catalog.name", f"must be an identifier, got {name!r}")
        ctype = c.get("type", "hadoop")
        if (refused := refusal(str(ctype), "")) is not None:
            raise self.fail("catalog.type", refused)
        ctype = self.choice(ctype, "catalog.type", CATALOG_TYPES)
        warehouse = c.get("warehouse")
        if (refused := refusal(ctype, str(warehouse or ""))) is not None:
            raise self.fail("catalog.warehouse", refused)
        if ctype in ("hadoop", "jdbc") and not warehouse:
            raise self.fail("catalog.warehouse", f"is required for a {ctype} catalog")
        if ctype in ("hadoop", "jdbc") and "://" not in str(warehouse) and not os.path.isabs(str(warehouse)):
            warehouse = str((Path(self.src).parent if self.src != "<memory>" else Path.cwd()) / str(warehouse))
        props = c.get("properties") or {}
        if not isinstance(props, dict):
            raise self.fail("catalog.properties", "must be a mapping")
        props = {str(k): str(v) for k, v in props.items()}
        if c.get("uri") is not None:
            if "uri" in props and props["uri"] != str(c["uri"]):
                raise self.fail("catalog.uri", "is set twice (catalog.uri and catalog.properties.uri) with "
                                               "different values: keep one")
            props["uri"] = str(c["uri"])
        if ctype == "jdbc" and not props.get("uri", "").startswith("jdbc:"):
            raise self.fail("catalog.uri", "is required for a jdbc catalog: jdbc:postgresql://<host>:<port>/<database>"
                                           " (user and password in catalog.properties jdbc.user / jdbc.password)")
        return CatalogConfig(name=name, type=ctype, warehouse=str(warehouse or ""), properties=props)

    def batch(self, raw: dict[str, Any]) -> BatchConfig:
        b = self.mapping(raw, "batch")
        self.unknown(b, {"max_records_per_partition", "chunk_size", "read_timeout_seconds", "claim_timeout_minutes",
                         "table_concurrency", "driver_read_max_records", "key_filter_max_changes",
                         "key_filter_min_target_rows", "bloom_filter_min_target_rows", "one_task_max_target_rows",
                         "row_deltas", "consumer_group_offsets"}, "batch.")
        d = BatchConfig()
        return BatchConfig(
            max_records_per_partition=self.number(b.get("max_records_per_partition", d.max_records_per_partition),
                                                  "batch.max_records_per_partition", int, 1),
            chunk_size=self.number(b.get("chunk_size", d.chunk_size), "batch.chunk_size", int, 1),
            read_timeout_seconds=self.number(b.get("read_timeout_seconds", d.read_timeout_seconds),
                                             "batch.read_timeout_seconds", float, 0.1),
            claim_timeout_minutes=self.number(b.get("claim_timeout_minutes", d.claim_timeout_minutes),
                                              "batch.claim_timeout_minutes", float, 0),
            table_concurrency=self.number(b.get("table_concurrency", d.table_concurrency), "batch.table_concurrency",
                                          int, 1),
            driver_read_max_records=self.number(b.get("driver_read_max_records", d.driver_read_max_records),
                                                "batch.driver_read_max_records", int, 0),
            key_filter_max_changes=self.number(b.get("key_filter_max_changes", d.key_filter_max_changes),
                                               "batch.key_filter_max_changes", int, 0),
            key_filter_min_target_rows=self.number(b.get("key_filter_min_target_rows", d.key_filter_min_target_rows),
                                                   "batch.key_filter_min_target_rows", int, 0),
            bloom_filter_min_target_rows=self.number(
                b.get("bloom_filter_min_target_rows", d.bloom_filter_min_target_rows),
                "batch.bloom_filter_min_target_rows", int, 0),
            one_task_max_target_rows=self.number(b.get("one_task_max_target_rows", d.one_task_max_target_rows),
                                                 "batch.one_task_max_target_rows", int, 0),
            row_deltas=self.flag(b.get("row_deltas", d.row_deltas), "batch.row_deltas"),
            consumer_group_offsets=self.flag(b.get("consumer_group_offsets", d.consumer_group_offsets),
                                             "batch.consumer_group_offsets"),
        )

    def table(self, t: dict[str, Any], i: int) -> TableConfig:
        w = f"tables[{i}]."
        allowed = {"topic", "target", "primary_key", "ordering", "delete_mode", "unavailable_value_placeholder",
                   "on_bad_record", "max_dead_letter_ratio", "allow_field_addition", "max_record_bytes",
                   "column_types", "compacted", "ordering_epoch", "snapshot_deletes", "envelope", "topic_pattern",
                   "write_mode", "track_columns", "partition_by", "sort_by", "properties", "bootstrap"}
        self.unknown(t, allowed, w)
        t = {k: self.subst(v, w + k) for k, v in t.items()}
        topic, target, pattern = t.get("topic"), t.get("target"), t.get("topic_pattern")
        if pattern is not None:
            if topic is not None:
                raise self.fail(w + "topic_pattern", "give topic or topic_pattern, not both")
            problem = check_entry(pattern, target)
            if problem:
                raise self.fail(w + problem[0], problem[1])
            topic, target = "", str(target)
        elif not isinstance(topic, str) or not topic:
            raise self.fail(w + "topic", "is required (or topic_pattern)")
        elif not isinstance(target, str) or target.count(".") < 1 or not all(_NAME.match(p) for p in target.split(".")):
            raise self.fail(w + "target", f"must be namespace.table (identifiers), got {target!r}")
        pk = t.get("primary_key") or ()
        if isinstance(pk, str):
            pk = (pk,)
        if not isinstance(pk, (list, tuple)) or not all(isinstance(k, str) and k for k in pk):
            raise self.fail(w + "primary_key", "must be a list of column names")
        ordering = t.get("ordering", "auto")
        if isinstance(ordering, str) and ordering != "auto":
            ordering = (ordering,)
        if isinstance(ordering, list):
            ordering = tuple(ordering)
        if ordering != "auto" and (not isinstance(ordering, tuple) or not ordering
                                   or not all(isinstance(o, str) and o for o in ordering)):
            raise self.fail(w + "ordering", f"must be auto or a list of field paths such as [source.lsn], got "
                                            f"{t.get('ordering')!r}")
        placeholder = t.get("unavailable_value_placeholder", DEFAULT_PLACEHOLDER)
        if not isinstance(placeholder, str) or not placeholder:
            raise self.fail(w + "unavailable_value_placeholder", "must be a non-empty string")
        ratio = self.number(t.get("max_dead_letter_ratio", 0.01), w + "max_dead_letter_ratio", float, 0)
        if ratio > 1:
            raise self.fail(w + "max_dead_letter_ratio", f"must be between 0 and 1, got {ratio}")
        afa = self.flag(t.get("allow_field_addition", True), w + "allow_field_addition")
        return TableConfig(
            topic=topic, target=target, primary_key=tuple(pk), ordering=ordering,
            delete_mode=self.choice(t.get("delete_mode", "hard"), w + "delete_mode", DELETE_MODES),
            unavailable_value_placeholder=placeholder,
            on_bad_record=self.choice(t.get("on_bad_record", "dead_letter"), w + "on_bad_record", BAD_RECORD_POLICIES),
            max_dead_letter_ratio=ratio, allow_field_addition=afa,
            max_record_bytes=self.number(t.get("max_record_bytes", DEFAULT_MAX_RECORD_BYTES), w + "max_record_bytes",
                                         int, 0),
            column_types=self.column_types(t.get("column_types"), w + "column_types"),
            compacted=self.compacted(t.get("compacted", "auto"), w + "compacted"),
            ordering_epoch=self.number(t.get("ordering_epoch", 0), w + "ordering_epoch", int, 0),
            snapshot_deletes=self.flag(t.get("snapshot_deletes", True), w + "snapshot_deletes"),
            envelope=self.choice(t.get("envelope", "debezium"), w + "envelope", ENVELOPES),
            topic_pattern=pattern or "",
            layout=self.layout(t, w),
            bootstrap=parse_bootstrap(t.get("bootstrap"), w + "bootstrap", self.fail),
            **self.write_mode(t, w),
        )

    def layout(self, t: dict[str, Any], w: str) -> TableLayout:
        try:
            return parse_layout(t)
        except LayoutError as exc:
            raise self.fail(w + exc.key, exc.message) from None

    def write_mode(self, t: dict[str, Any], w: str) -> dict[str, Any]:
        """``write_mode`` and ``track_columns`` (scd2 only) of one table entry."""
        mode = t.get("write_mode")
        if mode is not None:
            self.choice(mode, w + "write_mode", WRITE_MODES)
        track = t.get("track_columns") or ()
        if isinstance(track, str):
            track = (track,)
        if not isinstance(track, (list, tuple)) or not all(isinstance(c, str) and c for c in track):
            raise self.fail(w + "track_columns", "must be a list of column names")
        if track and mode != "scd2":
            raise self.fail(w + "track_columns", "applies to write_mode: scd2 only")
        return {"write_mode": mode, "track_columns": tuple(track)}

    def compacted(self, raw: Any, key: str) -> str | bool:
        if raw not in ("auto", True, False):
            raise self.fail(key, f"must be auto, true or false, got {raw!r}")
        return raw

    def column_types(self, raw: Any, key: str) -> dict[str, str]:
        """``{column: type}``; types normalised to lower case without blanks (``decimal(10,2)``)."""
        if raw is None:
            return {}
        if not isinstance(raw, dict):
            raise self.fail(key, f"must be a mapping of column name to type, got {type(raw).__name__}")
        out = {}
        for col, spec in raw.items():
            norm = spec.strip().lower() if isinstance(spec, str) else spec
            m = DECIMAL_COLUMN_TYPE.match(norm) if isinstance(norm, str) else None
            if m and not (1 <= int(m.group(1)) <= 38 and int(m.group(2)) <= int(m.group(1))):
                raise self.fail(f"{key}.{col}", f"decimal precision must be 1..38 and scale 0..precision, got {spec!r}")
            if not isinstance(col, str) or not col or not (m or norm in COLUMN_TYPE_NAMES):
                raise self.fail(f"{key}.{col}", f"must be one of {', '.join(COLUMN_TYPE_NAMES)} or decimal(p,s), "
                                                f"got {spec!r}")
            out[col] = f"decimal({int(m.group(1))},{int(m.group(2))})" if m else norm
        return out