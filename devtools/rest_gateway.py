"""An OAuth2 front for the local Iceberg REST catalog server (``devtools.rest_catalog``, ``auth=True``).

A stand-in for what a catalog service's deployment adds and Iceberg's test server lacks: it checks credentials.
Iceberg's ``RESTCatalogServer`` grants a token to any client, so bad credentials could never be refused. This
gateway answers ``POST /v1/oauth/tokens`` itself (the Iceberg REST spec's OAuth2 endpoint: ``client_credentials``
with ``client_id:client_secret`` = the configured credential, and ``token-exchange`` of a token it issued), refuses
every other request whose bearer token it did not issue (401, an Iceberg ``ErrorResponse``) and forwards the rest,
unchanged, to the real server. With the server down it answers 503 (``ServiceUnavailableException`` to clients).
"""

from __future__ import annotations

import json
import secrets
import threading
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from devtools.broker import HOST

TOKEN_PATH = "/v1/oauth/tokens"
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "authorization", "accept-encoding"}


class RESTAuthGateway:
    def __init__(self, backend: str, credential: str) -> None:
        self.backend = backend.rstrip("/")
        self.credential = credential
        self.token = secrets.token_hex(16)
        self._server: ThreadingHTTPServer | None = None
        self.refused = 0  # requests refused for their credentials or token

    def __repr__(self) -> str:
        return f"RESTAuthGateway(backend={self.backend!r}, credential=***)"

    @property
    def uri(self) -> str:
        if self._server is None:
            raise RuntimeError("gateway not started")
        return f"http://{HOST}:{self._server.server_address[1]}"

    def start(self) -> RESTAuthGateway:
        gateway = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
                pass

            def do_GET(self) -> None:
                gateway.handle(self)

            do_POST = do_HEAD = do_DELETE = do_PUT = do_GET

        self._server = ThreadingHTTPServer((HOST, 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="rest-gateway", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def handle(self, req: BaseHTTPRequestHandler) -> None:
        length = int(req.headers.get("Content-Length") or 0)
        body = req.rfile.read(length) if length else b""
        path = urllib.parse.urlsplit(req.path).path
        if path == TOKEN_PATH and req.command == "POST":
            self._token(req, body)
            return
        if req.headers.get("Authorization", "") != f"Bearer {self.token}":
            self.refused += 1
            self._reply(req, 401, {"error": {"message": "Not authorized: missing or unknown bearer token",
                                             "type": "NotAuthorizedException", "code": 401}})
            return
        headers = {k: v for k, v in req.headers.items() if k.lower() not in _HOP}
        forward = urllib.request.Request(self.backend + req.path, data=body if body else None, headers=headers,
                                         method=req.command)
        try:
            with urllib.request.urlopen(forward, timeout=120) as resp:  # noqa: S310 - the local server
                status, data, ctype = resp.status, resp.read(), resp.headers.get("Content-Type")
        except urllib.error.HTTPError as exc:
            status, data, ctype = exc.code, exc.read(), exc.headers.get("Content-Type")
        except (urllib.error.URLError, OSError):
            self._reply(req, 503, {"error": {"message": "catalog server unavailable", "code": 503,
                                             "type": "ServiceUnavailableException"}})
            return
        self._send(req, status, data, ctype or "application/json")

    def _token(self, req: BaseHTTPRequestHandler, body: bytes) -> None:
        form = dict(urllib.parse.parse_qsl(body.decode()))
        grant = form.get("grant_type", "")
        if grant == "client_credentials":
            ok = secrets.compare_digest(f"{form.get('client_id', '')}:{form.get('client_secret', '')}",
                                        self.credential)
        elif grant == "urn:ietf:params:oauth:grant-type:token-exchange":
            ok = secrets.compare_digest(form.get("subject_token", ""), self.token)
        else:
            ok = False
        if not ok:
            self.refused += 1
            self._reply(req, 401, {"error": "invalid_client", "error_description": "bad client credentials"})
            return
        self._reply(req, 200, {"access_token": self.token, "token_type": "bearer", "expires_in": 3600,
                               "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"})

    def _reply(self, req: BaseHTTPRequestHandler, status: int, payload: dict[str, Any]) -> None:
        self._send(req, status, json.dumps(payload).encode(), "application/json")

    @staticmethod
    def _send(req: BaseHTTPRequestHandler, status: int, data: bytes, ctype: str) -> None:
        req.send_response(status)
        req.send_header("Content-Type", ctype)
        req.send_header("Content-Length", str(len(data)))
        req.end_headers()
        if req.command != "HEAD":
            req.wfile.write(data)
