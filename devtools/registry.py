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

Standard library only: ``ThreadingHTTPServer`` in a daemon thread; the API itself (state + router) is
``devtools.registry_api``.
"""

from __future__ import annotations

import argparse
import base64
import json
import signal
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from devtools.registry_api import RegistryError, RegistryState, route

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


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



class _RegistryHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], state: RegistryState, credentials: str | None) -> None:
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
        self._state = RegistryState()
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
