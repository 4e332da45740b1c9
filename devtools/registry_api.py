"""The Confluent Schema Registry REST API subset as pure code: the in-memory state and the request router.

No I/O here: ``devtools.registry`` puts this behind a threaded HTTP server. Split out so the API surface reads like
the Confluent reference table, and so it can be tested without sockets.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

COMPATIBILITY_LEVELS = {
    "NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE"
}


class RegistryError(Exception):
    """An error answered to the client with a Confluent error code."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def _canonical(schema: str, schema_type: str) -> str:
    """Identity key for a schema: JSON schemas compare by parsed content, not whitespace."""
    if schema_type in ("AVRO", "JSON"):
        try:
            return json.dumps(json.loads(schema), sort_keys=True, separators=(",", ":"))
        except ValueError as exc:
            raise RegistryError(422, 42201, f"Invalid schema: {exc}") from exc
    return schema


@dataclass
class SchemaVersion:
    version: int
    schema_id: int
    deleted: bool = False


@dataclass
class RegistryState:
    """All registry data; guarded by ``lock`` because the HTTP server is threaded."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    schemas: dict[int, dict[str, Any]] = field(default_factory=dict)  # id -> {"schema","schemaType","references"}
    ids_by_key: dict[tuple[str, str, str], int] = field(default_factory=dict)
    subjects: dict[str, list[SchemaVersion]] = field(default_factory=dict)
    global_compatibility: str = "BACKWARD"
    subject_compatibility: dict[str, str] = field(default_factory=dict)

    def versions(self, subject: str, include_deleted: bool = False) -> list[SchemaVersion]:
        live = [v for v in self.subjects.get(subject, []) if include_deleted or not v.deleted]
        if not live:
            raise _subject_not_found(subject)
        return live

    def find_version(self, subject: str, version: str) -> SchemaVersion:
        live = self.versions(subject)
        if version in ("latest", "-1"):
            return live[-1]
        try:
            wanted = int(version)
        except ValueError as exc:
            raise RegistryError(422, 42202, f"Invalid version {version!r}") from exc
        for v in live:
            if v.version == wanted:
                return v
        raise RegistryError(404, 40402, f"Version {version} not found.")

    def schema_body(self, schema_id: int) -> dict[str, Any]:
        if schema_id not in self.schemas:
            raise RegistryError(404, 40403, "Schema not found")
        stored = self.schemas[schema_id]
        body: dict[str, Any] = {"schema": stored["schema"]}
        if stored["schemaType"] != "AVRO":  # Confluent omits the type for AVRO
            body["schemaType"] = stored["schemaType"]
        if stored["references"]:
            body["references"] = stored["references"]
        return body

    def subject_version_body(self, subject: str, v: SchemaVersion) -> dict[str, Any]:
        return {"subject": subject, "version": v.version, "id": v.schema_id, **self.schema_body(v.schema_id)}

    def id_for(self, body: dict[str, Any], create: bool) -> int | None:
        if not isinstance(body.get("schema"), str):
            raise RegistryError(422, 42201, "Invalid schema: 'schema' must be a string")
        schema_type = body.get("schemaType") or "AVRO"
        refs = json.dumps(body.get("references") or [], sort_keys=True)
        key = (schema_type, _canonical(body["schema"], schema_type), refs)
        if key not in self.ids_by_key and create:
            new_id = max(self.schemas, default=0) + 1
            self.schemas[new_id] = {
                "schema": body["schema"],
                "schemaType": schema_type,
                "references": body.get("references") or [],
            }
            self.ids_by_key[key] = new_id
        return self.ids_by_key.get(key)


def _flag(query: dict[str, str], name: str) -> bool:
    return query.get(name, "false").lower() == "true"


def route(state: RegistryState, method: str, parts: list[str], query: dict[str, str], body: Any) -> tuple[int, Any]:
    """Pure request router (no I/O), so the API surface reads like the Confluent reference table."""
    n = len(parts)
    head = parts[0] if parts else ""
    if n == 0 and method == "GET":
        return 200, {}
    if head == "schemas" and method == "GET":
        if n == 2 and parts[1] == "types":
            return 200, ["AVRO", "JSON", "PROTOBUF"]
        if n >= 3 and parts[1] == "ids":
            schema_id = int(parts[2])
            body_ = state.schema_body(schema_id)  # raises 40403
            if n == 3:
                return 200, body_  # ?subject=/format= accepted and ignored
            usages = [(s, v) for s, vs in state.subjects.items() for v in vs if v.schema_id == schema_id]
            usages = [(s, v) for s, v in usages if _flag(query, "deleted") or not v.deleted]
            if n == 4 and parts[3] == "versions":
                return 200, [{"subject": s, "version": v.version} for s, v in usages]
            if n == 4 and parts[3] == "subjects":
                return 200, sorted({s for s, _ in usages})
    if head == "subjects":
        if n == 1 and method == "GET":
            deleted = _flag(query, "deleted")
            live = (s for s, vs in state.subjects.items() if vs and (deleted or any(not v.deleted for v in vs)))
            return 200, sorted(live)
        if n >= 2:
            return _subject_route(state, method, parts[1], parts[2:], query, body)
    if head == "config":
        return _config_route(state, method, parts[1] if n > 1 else None, query, body)
    if head == "mode" and method == "GET":
        return 200, {"mode": "READWRITE"}
    raise RegistryError(404, 404, f"HTTP 404 Not Found: {method} /{'/'.join(parts)}")


def _subject_route(
    state: RegistryState, method: str, subject: str, rest: list[str], query: dict[str, str], body: Any
) -> tuple[int, Any]:
    if not rest:
        if method == "POST":  # lookup: is this schema registered under subject?
            versions = state.versions(subject, include_deleted=_flag(query, "deleted"))
            schema_id = state.id_for(body, create=False)
            for v in versions:
                if v.schema_id == schema_id:
                    return 200, state.subject_version_body(subject, v)
            raise RegistryError(404, 40403, "Schema not found")
        if method == "DELETE":
            if _flag(query, "permanent"):
                versions = state.versions(subject, include_deleted=True)
                del state.subjects[subject]
                state.subject_compatibility.pop(subject, None)
            else:
                versions = state.versions(subject)
                for v in versions:
                    v.deleted = True
            return 200, [v.version for v in versions]
    elif rest[0] == "versions":
        if len(rest) == 1 and method == "GET":
            return 200, [v.version for v in state.versions(subject, include_deleted=_flag(query, "deleted"))]
        if len(rest) == 1 and method == "POST":
            schema_id = state.id_for(body, create=True)
            assert schema_id is not None
            existing = state.subjects.setdefault(subject, [])
            for v in existing:
                if v.schema_id == schema_id and not v.deleted:
                    return 200, {"id": schema_id}
            existing.append(SchemaVersion(max((v.version for v in existing), default=0) + 1, schema_id))
            return 200, {"id": schema_id}
        if len(rest) >= 2:
            v = state.find_version(subject, rest[1])
            if len(rest) == 2 and method == "GET":
                return 200, state.subject_version_body(subject, v)
            if len(rest) == 3 and rest[2] == "schema" and method == "GET":
                return 200, json.loads(state.schemas[v.schema_id]["schema"])
            if len(rest) == 2 and method == "DELETE":
                if _flag(query, "permanent"):
                    state.subjects[subject].remove(v)
                else:
                    v.deleted = True
                return 200, v.version
    raise RegistryError(404, 404, f"HTTP 404 Not Found: {method} /subjects/{subject}/{'/'.join(rest)}")


def _config_route(
    state: RegistryState, method: str, subject: str | None, query: dict[str, str], body: Any
) -> tuple[int, Any]:
    if method == "GET":
        if subject is None:
            return 200, {"compatibilityLevel": state.global_compatibility}
        if subject in state.subject_compatibility:
            return 200, {"compatibilityLevel": state.subject_compatibility[subject]}
        if _flag(query, "defaultToGlobal"):
            return 200, {"compatibilityLevel": state.global_compatibility}
        raise RegistryError(404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured")
    if method == "PUT":
        level = str(body.get("compatibility") or body.get("compatibilityLevel") or "").upper()
        if level not in COMPATIBILITY_LEVELS:
            raise RegistryError(422, 42203, f"Invalid compatibility level {level!r}")
        if subject is None:
            state.global_compatibility = level
        else:
            state.subject_compatibility[subject] = level
        return 200, {"compatibility": level}
    if method == "DELETE":
        if subject is None:
            raise RegistryError(405, 405, "Cannot delete the global config")
        if subject not in state.subject_compatibility:
            raise _subject_not_found(subject)
        return 200, {"compatibilityLevel": state.subject_compatibility.pop(subject)}
    raise RegistryError(405, 405, f"Method {method} not allowed on /config")
