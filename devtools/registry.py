"""A small in-memory Confluent Schema Registry (REST API subset) for tests and the demo.

No real registry (JVM) is installable here, and ``MockSchemaRegistryClient``
would bypass HTTP entirely, hiding URL/auth/serialisation bugs in the jobs.
This server speaks enough of the real REST API for confluent-kafka's
``SchemaRegistryClient``, ``AvroSerializer`` and ``AvroDeserializer`` (2.x) and
for Spark-side code that calls the registry over HTTP.

Semantics mirrored from Confluent (so tests exercise realistic behaviour):

* schema ids are global: the same (type, canonical schema) gets the same id in
  every subject; registering an identical schema again returns the existing id;
* versions are per subject, starting at 1; soft delete hides a subject/version,
  ``?permanent=true`` forgets it;
* errors are JSON ``{"error_code": ..., "message": ...}`` with Confluent codes
  (40401 subject, 40402 version, 40403 schema, 40408 subject config, 42201 invalid schema);
* compatibility levels are stored and returned but NOT enforced.

Standard library only: ``ThreadingHTTPServer`` in a daemon thread.
"""

from __future__ import annotations

import argparse
import base64
import json
import signal
import socket
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
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
class _Version:
    version: int
    schema_id: int
    deleted: bool = False


@dataclass
class _State:
    """All registry data; guarded by ``lock`` because the HTTP server is threaded."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    schemas: dict[int, dict[str, Any]] = field(default_factory=dict)  # id -> {"schema","schemaType","references"}
    ids_by_key: dict[tuple[str, str, str], int] = field(default_factory=dict)
    subjects: dict[str, list[_Version]] = field(default_factory=dict)
    global_compatibility: str = "BACKWARD"
    subject_compatibility: dict[str, str] = field(default_factory=dict)

    def versions(self, subject: str, include_deleted: bool = False) -> list[_Version]:
        live = [v for v in self.subjects.get(subject, []) if include_deleted or not v.deleted]
        if not live:
            raise _subject_not_found(subject)
        return live

    def find_version(self, subject: str, version: str) -> _Version:
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

    def subject_version_body(self, subject: str, v: _Version) -> dict[str, Any]:
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


class _Handler(BaseHTTPRequestHandler):
    """Routes requests to the registry state; one instance per request."""

    protocol_version = "HTTP/1.1"  # keep-alive: httpx reuses connections
    server: _RegistryHTTPServer

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in two writes; without NODELAY, Nagle + delayed ACK adds ~40 ms per request.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence per-request logs
        pass

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", CONTENT_TYPE)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _authorized(self) -> bool:
        expected = self.server.credentials
        if expected is None:
            return True
        header = self.headers.get("Authorization", "")
        if not header.startswith("Basic "):
            return False
        try:
            return base64.b64decode(header[6:]).decode() == expected
        except ValueError:
            return False

    def _dispatch(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not self._authorized():
            challenge = {"WWW-Authenticate": 'Basic realm="registry"'}
            self._send(401, {"error_code": 401, "message": "Unauthorized"}, challenge)
            return
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        parts = [unquote(p) for p in url.path.strip("/").split("/") if p]
        try:
            body = json.loads(raw) if raw else {}
            with self.server.state.lock:
                status, payload = route(self.server.state, method, parts, query, body)
        except RegistryError as err:
            self._send(err.status, {"error_code": err.code, "message": err.message})
            return
        except ValueError as exc:
            self._send(422, {"error_code": 42201, "message": f"Invalid request: {exc}"})
            return
        self._send(status, payload)


def _flag(query: dict[str, str], name: str) -> bool:
    return query.get(name, "false").lower() == "true"


def route(state: _State, method: str, parts: list[str], query: dict[str, str], body: Any) -> tuple[int, Any]:
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
    state: _State, method: str, subject: str, rest: list[str], query: dict[str, str], body: Any
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
            existing.append(_Version(max((v.version for v in existing), default=0) + 1, schema_id))
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
    state: _State, method: str, subject: str | None, query: dict[str, str], body: Any
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


class _RegistryHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], state: _State, credentials: str | None) -> None:
        super().__init__(address, _Handler)
        self.state = state
        self.credentials = credentials


class LocalSchemaRegistry:
    """In-process schema registry bound to 127.0.0.1 (port 0 = pick a free one).

    Usage::

        with LocalSchemaRegistry() as registry:
            client = SchemaRegistryClient({"url": registry.url})
    """

    def __init__(self, port: int = 0, username: str | None = None, password: str | None = None) -> None:
        if (username is None) != (password is None):
            raise ValueError("give both username and password, or neither")
        self._port = port
        self._credentials = f"{username}:{password}" if username is not None else None
        self._state = _State()
        self._server: _RegistryHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("registry not started")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def client_config(self) -> dict[str, str]:
        """Config dict for ``SchemaRegistryClient`` (includes basic auth when enabled)."""
        conf = {"url": self.url}
        if self._credentials is not None:
            conf["basic.auth.user.info"] = self._credentials
        return conf

    def start(self) -> LocalSchemaRegistry:
        if self._server is None:
            self._server = _RegistryHTTPServer(("127.0.0.1", self._port), self._state, self._credentials)
            self._thread = threading.Thread(
                target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="schema-registry", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    def serve_forever(self) -> None:
        """Foreground mode for the CLI; returns on KeyboardInterrupt/SIGINT."""
        self.start()
        assert self._thread is not None
        try:
            while self._thread.is_alive():
                self._thread.join(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            self.stop()

    def __enter__(self) -> LocalSchemaRegistry:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _raise_interrupt(signum: int, frame: object) -> None:
    """SIGTERM (``kill PID`` from the Makefile) shuts down cleanly, like Ctrl-C."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.registry")
    sub = parser.add_subparsers(dest="cmd", required=True)
    serve = sub.add_parser("serve", help="serve in the foreground until SIGINT/SIGTERM")
    serve.add_argument("--port", type=int, default=8081)
    serve.add_argument("--username")
    serve.add_argument("--password")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _raise_interrupt)
    registry = LocalSchemaRegistry(args.port, args.username, args.password)
    registry.start()
    print(registry.url, flush=True)
    registry.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
