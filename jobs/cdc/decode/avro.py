"""Decoder for Debezium events written by the Confluent AvroConverter (wire format: magic 0, 4-byte schema id, datum).

Writer schemas are fetched by id from the schema registry (cached); every value is resolved to the *reader* schema,
the newest registered version of ``<topic>-value`` at the time the batch schema was resolved, so records written
with older versions get the defaults of added fields. The registry is reached through a ``SchemaSource``:
``RegistrySource`` (confluent_kafka ``SchemaRegistryClient``, created lazily, dropped when pickled) or, in tests,
``StaticSource``. Registry unreachable / 5xx → ``SchemaRegistryUnavailable`` (retryable, not a dead letter).

Avro date/time ``logicalType`` annotations are stripped before reading (fastavro would build datetime objects);
the Connect semantics (``connect.name``) drive conversion instead. ``decimal`` is kept: fastavro yields ``Decimal``.
"""

from __future__ import annotations

import copy
import json
import struct
import threading
from io import BytesIO
from typing import Any, Mapping, Protocol, Sequence
from urllib.parse import urlsplit

from fastavro import parse_schema, schemaless_reader
from fastavro.read import SchemaResolutionError

from cdc.common.errors import ConfigError, DecodeError, SchemaRegistryUnavailable
from cdc.config.model import DEFAULT_PLACEHOLDER
from cdc.decode.avro_resolve import bytes_defaults
from cdc.decode.base import Decoder, Sample
from cdc.decode.connect_types import ConnectField, columns_of, converter, from_avro
from cdc.decode.envelope import RowPlan, row_plan, to_event
from cdc.decode.model import TOMBSTONE, Event
from cdc.schema.columns import Column
from cdc.schema.widening import merge_columns

_HEADER = struct.Struct(">bI")
_KEEP_LOGICAL = {"decimal"}


class SchemaNotFound(LookupError):
    """The registry answered 404 for a schema id or subject."""


class SchemaSource(Protocol):
    def schema(self, schema_id: int) -> str: ...  # the schema text; SchemaNotFound if unknown

    def latest(self, subject: str) -> tuple[int, str]: ...  # (id, text) of the newest version; SchemaNotFound


class StaticSource:
    """In-memory schemas (tests, tools): ``schemas`` id → schema, ``subjects`` subject → ids (oldest first)."""

    def __init__(self, schemas: Mapping[int, Any], subjects: Mapping[str, Sequence[int]] | None = None):
        self.schemas = {i: s if isinstance(s, str) else json.dumps(s) for i, s in schemas.items()}
        self.subjects = {k: list(v) for k, v in (subjects or {}).items()}
        self.calls = 0

    def schema(self, schema_id: int) -> str:
        self.calls += 1
        if schema_id not in self.schemas:
            raise SchemaNotFound(f"schema id {schema_id}")
        return self.schemas[schema_id]

    def latest(self, subject: str) -> tuple[int, str]:
        self.calls += 1
        if not self.subjects.get(subject):
            raise SchemaNotFound(f"subject {subject!r}")
        sid = self.subjects[subject][-1]
        return sid, self.schemas[sid]


_CLIENTS: dict[str, Any] = {}  # registry settings (canonical JSON) → a client this process's sources share
_CLIENTS_GUARD = threading.Lock()


def shared_client(conf: Mapping[str, Any]) -> Any:
    """One ``SchemaRegistryClient`` per process and registry settings (thread-safe): each client builds an HTTP
    client with its own TLS context, about 18 ms of CPU, once per table of a job before. Schemas by id never
    change, so its cache of them is shared too; what ``RegistrySource.latest`` asks is never served from its cache.
    A client without ``clear_latest_caches`` (which caches the latest versions for good) is not shared."""
    from confluent_kafka.schema_registry import SchemaRegistryClient

    key = json.dumps(conf, sort_keys=True, default=str)
    with _CLIENTS_GUARD:
        client = _CLIENTS.get(key)
        if client is None:
            client = SchemaRegistryClient(dict(conf))
            if hasattr(client, "clear_latest_caches"):
                _CLIENTS[key] = client
        return client


class RegistrySource:
    """Confluent schema registry over HTTP; the client (``shared_client``) is looked up on first use and never
    pickled."""

    def __init__(self, conf: Mapping[str, Any]):
        self.conf = dict(conf)
        self._client: Any = None
        parts = urlsplit(str(self.conf.get("url", "")).split(",")[0])
        self.where = f"{parts.scheme}://{parts.hostname}:{parts.port}" if parts.hostname else "<no url>"

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_client": None}

    def _call(self, what: str, fn: str, *args: Any) -> Any:
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        if self._client is None:
            try:
                self._client = shared_client(self.conf)
            except (ValueError, TypeError) as exc:
                raise ConfigError(f"schema_registry: invalid client settings ({exc})") from None
        try:
            if fn == "get_latest_version" and hasattr(self._client, "clear_latest_caches"):
                self._client.clear_latest_caches()  # the newest version as the registry has it now, as a new client
            return getattr(self._client, fn)(*args)
        except SchemaRegistryError as exc:
            status = exc.http_status_code
            if status == 404:
                raise SchemaNotFound(what) from None
            if status in (401, 403):
                raise ConfigError(f"schema registry {self.where} refused access to {what} (HTTP {status}): "
                                  "check schema_registry credentials") from None
            if status >= 500 or status in (408, 429) or status < 0:
                raise SchemaRegistryUnavailable(f"schema registry {self.where} failed for {what} (HTTP {status}); "
                                                "retry later") from None
            raise DecodeError(f"schema registry {self.where} rejected the lookup of {what}: HTTP {status} "
                              f"{exc.error_message}") from None
        except Exception as exc:  # httpx transport errors, timeouts, DNS, TLS
            raise SchemaRegistryUnavailable(f"schema registry {self.where} unreachable while fetching {what} "
                                            f"({type(exc).__name__}); retry later") from None

    def schema(self, schema_id: int) -> str:
        return self._call(f"schema id {schema_id}", "get_schema", schema_id).schema_str

    def latest(self, subject: str) -> tuple[int, str]:
        reg = self._call(f"subject {subject!r}", "get_latest_version", subject)
        return reg.schema_id, reg.schema.schema_str


class _ValuePlan:
    """How values of one writer schema id are read: fastavro writer/reader schemas (reader None: the writer's own),
    ``reader_id`` (None when reading with the writer schema alone) and the row plan for the bound columns."""

    __slots__ = ("writer", "reader", "rows", "reader_id")

    def __init__(self, writer: Any, reader: Any, rows: RowPlan, reader_id: int | None = None):
        self.writer, self.reader, self.rows, self.reader_id = writer, reader, rows, reader_id


class AvroDecoder(Decoder):
    def __init__(self, topic: str, registry_conf: Mapping[str, Any] | None = None,
                 placeholder: str = DEFAULT_PLACEHOLDER, subject_strategy: str = "topic",
                 source: SchemaSource | None = None):
        if subject_strategy != "topic":
            raise ConfigError(f"subject name strategy {subject_strategy!r} is not supported (only 'topic': "
                              "subjects <topic>-key and <topic>-value)")
        self.topic = topic
        self.placeholder = placeholder
        self.value_subject, self.key_subject = f"{topic}-value", f"{topic}-key"
        self.source: SchemaSource = source if source is not None else RegistrySource(registry_conf or {})
        self._texts: dict[int, str] = {}  # schema id → text: pickled along, so tasks rarely ask the registry
        self._reader: tuple[int, str] | None = None  # newest value schema (id, text)
        self._columns: list[Column] | None = None
        self._reset()

    def _reset(self) -> None:
        self._parsed: dict[int, Any] = {}
        self._plans: dict[int, _ValuePlan] = {}
        self._key_plans: dict[int, tuple[Any, Any]] = {}
        self._refreshed = False

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for k in ("_parsed", "_plans", "_key_plans"):
            state[k] = {}
        return state

    # ------------------------------------------------------------------------------------------------- schema side

    def resolve_columns(self, samples: Sequence[Sample], existing: Sequence[Column] = ()) -> list[Column]:
        return merge_columns(existing, self.source_columns(samples, existing))

    def source_columns(self, samples: Sequence[Sample], existing: Sequence[Column] = ()) -> list[Column]:
        try:
            self._reader = self._latest(self.value_subject)
        except DecodeError as exc:
            raise not_avro(exc, self.topic, samples) from None
        struct_ = self.row_struct(from_avro(json.loads(self._reader[1])))
        return columns_of(struct_) if struct_ is not None else []

    def record_columns(self, key: bytes | None, value: bytes | None,
                       existing: Sequence[Column] = ()) -> list[Column] | None:
        """The writer schema's row columns (from the 5-byte header; one registry lookup per schema id)."""
        if value is None or len(value) < 5 or value[0] != 0:
            return None
        sid = _HEADER.unpack_from(value)[1]
        cache = self.__dict__.setdefault("_writer_columns", {})
        if sid not in cache:
            try:
                struct_ = self.row_struct(from_avro(json.loads(self._text(sid))))
            except DecodeError:
                struct_ = None
            cache[sid] = columns_of(struct_) if struct_ is not None else None
        return cache[sid]

    def key_columns(self, samples: Sequence[Sample]) -> list[Column]:
        try:
            _, text = self._latest(self.key_subject)
        except DecodeError:
            return []  # no key subject: keyless topic
        node = from_avro(json.loads(text))
        return columns_of(node) if node.type == "struct" else []

    def bind(self, columns: Sequence[Column]) -> "AvroDecoder":
        if self._reader is None:
            self._reader = self._latest(self.value_subject)
        bound = copy.copy(self)
        bound._texts = dict(self._texts)
        bound._columns = list(columns)
        bound._reset()
        return bound

    def _latest(self, subject: str) -> tuple[int, str]:
        try:
            sid, text = self.source.latest(subject)
        except SchemaNotFound:
            raise DecodeError(f"subject {subject!r} not found in the schema registry") from None
        self._texts[sid] = text
        return sid, text

    def _text(self, sid: int) -> str:
        text = self._texts.get(sid)
        if text is None:
            try:
                text = self._texts[sid] = self.source.schema(sid)
            except SchemaNotFound:
                raise DecodeError(f"unknown schema id {sid} (not in the schema registry)") from None
        return text

    def _parse(self, sid: int) -> Any:
        parsed = self._parsed.get(sid)
        if parsed is None:
            try:
                schema = _strip_logical(json.loads(self._text(sid)))
                parsed = self._parsed[sid] = bytes_defaults(parse_schema(schema))
            except (ValueError, TypeError, KeyError) as exc:
                raise DecodeError(f"schema id {sid} is not a valid Avro schema: {exc}") from None
        return parsed

    # ------------------------------------------------------------------------------------------------- record side

    # The vectorised path (cdc.decode.avro_batch) may stage this decoder's records; False: per record only.
    vectorised = True

    def row_struct(self, envelope: ConnectField) -> ConnectField | None:
        """The row image's struct in a value schema (subclasses: other record shapes, e.g. flattened records)."""
        return _row_struct(envelope)

    def event(self, datum: Any, key: dict[str, Any] | None, rows: RowPlan, sid: int) -> Event:
        """The Event of one decoded value (subclasses: other record shapes)."""
        return to_event(datum, key, rows, sid)

    def decode(self, key: bytes | None, value: bytes | None) -> Event:
        k = self._decode_key(key)
        if value is None:
            return Event(TOMBSTONE, key=k)
        sid, datum, plan = self.read_value(value)
        return self.event(datum, k, plan.rows, sid)

    def read_value(self, value: bytes) -> tuple[int, Any, _ValuePlan]:
        """(schema id, datum resolved to the reader schema, plan) of a non-null value; DecodeError if corrupt."""
        sid, body = _split(value, "value")
        plan = self.value_plan(sid)
        buf = BytesIO(body)
        try:
            datum = schemaless_reader(buf, plan.writer, plan.reader)
        except SchemaResolutionError:
            if plan.reader is None:
                raise DecodeError(f"Avro value (schema id {sid}) does not match its writer schema") from None
            # The newest schema cannot read this older writer's data (e.g. a column narrowed long → int with
            # compatibility NONE): decode with the writer schema alone; the bound column types decide what fits.
            plan = self._plans[sid] = self._writer_plan(sid)
            buf = BytesIO(body)
            try:
                datum = schemaless_reader(buf, plan.writer, None)
            except Exception as exc:
                raise DecodeError(f"corrupt Avro value (schema id {sid}): {type(exc).__name__}: {exc}") from None
        except Exception as exc:  # EOFError, struct.error, UnicodeDecodeError ...
            raise DecodeError(f"corrupt Avro value (schema id {sid}): {type(exc).__name__}: {exc}") from None
        if buf.tell() != len(body):
            raise DecodeError(f"corrupt Avro value (schema id {sid}): {len(body) - buf.tell()} trailing bytes")
        return sid, datum, plan

    def value_plan(self, sid: int) -> _ValuePlan:
        """The plan values of schema id ``sid`` are decoded with (cached; the vectorised path uses the same one, so
        both resolve a writer schema to the same reader schema)."""
        return self._plans.get(sid) or self._value_plan(sid)

    def _value_plan(self, sid: int) -> _ValuePlan:
        if self._reader is None:
            self._reader = self._latest(self.value_subject)
        writer = self._parse(sid)
        if sid > self._reader[0] and not self._refreshed:  # registered after the batch schema was resolved
            self._refreshed = True
            self._reader = self._latest(self.value_subject)
        reader_id = self._reader[0]
        if sid > reader_id:
            raise DecodeError(f"schema id {sid} is newer than the latest version (id {reader_id}) of subject "
                              f"{self.value_subject!r}")
        reader = None if sid == reader_id else self._parse(reader_id)
        envelope = from_avro(json.loads(self._texts[reader_id]))
        columns = self._columns
        if columns is None:  # decode() before bind(): the reader schema's own columns
            s = self.row_struct(envelope)
            columns = self._columns = columns_of(s) if s is not None else []
        plan = self._plans[sid] = _ValuePlan(writer, reader, row_plan(columns, self.row_struct(envelope),
                                                                      self.placeholder,
                                                                      ignore_extra=self.ignore_unknown_fields),
                                             reader_id)
        return plan

    def _writer_plan(self, sid: int) -> _ValuePlan:
        envelope = from_avro(json.loads(self._text(sid)))
        columns = self._columns if self._columns is not None else []
        return _ValuePlan(self._parse(sid), None, row_plan(columns, self.row_struct(envelope), self.placeholder,
                                                           ignore_extra=self.ignore_unknown_fields))

    def _decode_key(self, key: bytes | None) -> dict[str, Any] | None:
        if key is None:
            return None
        sid, body = _split(key, "key")
        plan = self._key_plans.get(sid)
        if plan is None:
            writer = self._parse(sid)
            plan = self._key_plans[sid] = (writer, converter(from_avro(json.loads(self._text(sid)))))
        try:
            datum = schemaless_reader(BytesIO(body), plan[0], None)
            return plan[1](datum) if isinstance(datum, dict) else {"key": datum}
        except DecodeError as exc:
            raise DecodeError(f"key: {exc}") from None
        except Exception as exc:
            raise DecodeError(f"corrupt Avro key (schema id {sid}): {type(exc).__name__}: {exc}") from None


def _is_json(data: bytes | None) -> bool:
    return bool(data) and bytes(data[:64]).lstrip()[:1] in (b"{", b"[")


def not_avro(exc: DecodeError, topic: str, samples: Sequence[Sample]) -> DecodeError:
    """A registry error of the value subject (none registered) when the sampled records are JSON says so: the
    topic holds JsonConverter records and the YAML says ``format: avro``."""
    if any(_is_json(value) for _key, value in samples):
        return DecodeError(f"{exc}, and the records of topic {topic} are not Confluent Avro: this is JSON, set "
                           "format: json")
    return exc


def _split(data: bytes, what: str) -> tuple[int, memoryview | bytes]:
    if _is_json(data):
        raise DecodeError(f"{what} is not Confluent Avro: this is JSON (it starts with "
                          f"{bytes(data[:1]).decode('latin-1')!r}), set format: json")
    if len(data) < 5:
        raise DecodeError(f"{what} too short for the Confluent wire format ({len(data)} bytes)")
    magic, sid = _HEADER.unpack_from(data)
    if magic != 0:
        raise DecodeError(f"unknown magic byte 0x{magic & 0xFF:02x} in {what} (expected 0x00: Confluent wire format)")
    return sid, data[5:]


def _row_struct(envelope: ConnectField) -> ConnectField | None:
    if envelope.type != "struct":
        return None
    for name in ("after", "before"):
        f = envelope.child(name)
        if f is not None and f.type == "struct":
            return f
    return None


def _strip_logical(schema: Any) -> Any:
    """Drop Avro logical types other than decimal (values stay raw ints; Connect semantics convert them)."""
    if isinstance(schema, list):
        return [_strip_logical(s) for s in schema]
    if isinstance(schema, dict):
        return {k: _strip_logical(v) for k, v in schema.items()
                if not (k == "logicalType" and v not in _KEEP_LOGICAL)}
    return schema


__all__ = ["AvroDecoder", "RegistrySource", "SchemaNotFound", "SchemaSource", "StaticSource"]
