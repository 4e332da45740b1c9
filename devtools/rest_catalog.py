"""A real Iceberg REST catalog server for tests and the demo: Apache Iceberg's own ``RESTCatalogServer`` (the
"iceberg-rest-fixture" of Iceberg's REST compatibility kit, ``org.apache.iceberg:iceberg-open-api`` test fixtures
from Maven Central; jar set ``devtools/jars/iceberg-rest.pom.xml``) run as a JVM, as ``devtools.broker`` runs Kafka.

Behind the REST servlet is an Iceberg ``JdbcCatalog`` on a SQLite file in the server's home (so a restart keeps the
tables) and, for an ``s3://`` warehouse, ``S3FileIO`` on the given endpoint (``devtools.s3``, path-style). The server
is configured through its ``CATALOG_*`` environment variables (``CATALOG_S3_ENDPOINT`` → ``s3.endpoint``); S3
credentials reach it as ``AWS_*`` variables only, because it logs its catalog properties at start.

The server does not check credentials (its OAuth2 token endpoint grants any client), so ``auth=True`` puts
``RESTAuthGateway`` (``devtools.rest_gateway``) in front of it: ``uri`` is then the gateway's, which grants tokens
only to ``client_id:client_secret`` = ``credential`` and refuses requests without that token (401), as an
OAuth2-protected catalog service does.

    with LocalRESTCatalog(warehouse="s3://lake/wh", s3=s3_server) as rest:
        rest.uri        # http://127.0.0.1:<port>

For a demo on object storage: ``python -m devtools.s3 start`` then ``python -m devtools.rest_catalog start`` (a server
on 127.0.0.1:18181 with its warehouse on that S3, no authentication; ``stop`` ends it, by pidfile in ``.demo/``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from devtools import maven
from devtools.broker import HOST, end_process, free_port, port_in_use

JAR_SET = "iceberg-rest"  # devtools/jars/iceberg-rest.pom.xml
MAIN = "org.apache.iceberg.rest.RESTCatalogServer"
JVM_OPTIONS = ("-Xms64m", "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true")
S3_FILE_IO = "org.apache.iceberg.aws.s3.S3FileIO"


class LocalRESTCatalog:
    """An Iceberg REST catalog server owned by this Python process. ``s3``: a ``devtools.s3.LocalS3`` for an
    ``s3://`` warehouse; ``auth``: front it with the credential-checking gateway."""

    def __init__(self, warehouse: str | None = None, s3: Any = None, auth: bool = False,
                 credential: str = "cdc-client:rest-S3cret-9a8b7c", home: str | os.PathLike[str] | None = None,
                 log_path: str | os.PathLike[str] | None = None) -> None:
        self._home = Path(home) if home else None
        self._own_home = home is None
        self._warehouse = warehouse
        self.s3 = s3
        self.auth = auth
        self.credential = credential
        self._log_path = log_path
        self._port: int | None = None
        self._proc: Any = None
        self._log: IO[bytes] | None = None
        self._gateway: Any = None

    def __repr__(self) -> str:
        return f"LocalRESTCatalog(uri={self.uri if self._port else None!r}, auth={self.auth}, credential=***)"

    @property
    def home(self) -> Path:
        if self._home is None:
            raise RuntimeError("REST catalog not started")
        return self._home

    @property
    def warehouse(self) -> str:
        return self._warehouse or (self.home / "warehouse").as_uri()

    @property
    def server_uri(self) -> str:
        """The REST server itself (no authentication)."""
        if self._port is None:
            raise RuntimeError("REST catalog not started")
        return f"http://{HOST}:{self._port}"

    @property
    def uri(self) -> str:
        """What clients use: the gateway's address with ``auth``, else the server's."""
        return self._gateway.uri if self._gateway is not None else self.server_uri

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def environment(self) -> dict[str, str]:
        """The server's environment: its catalog properties as ``CATALOG_*`` variables, S3 credentials as ``AWS_*``."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CATALOG_", "AWS_"))}
        env.update({"CATALOG_REST_PORT": str(self._port), "CATALOG_WAREHOUSE": self.warehouse,
                    "CATALOG_URI": f"jdbc:sqlite:{self.home / 'catalog.db'}",
                    "CATALOG_JDBC_SCHEMA__VERSION": "V1"})
        if self.s3 is not None:
            env.update({"CATALOG_IO__IMPL": S3_FILE_IO, "CATALOG_S3_ENDPOINT": self.s3.endpoint,
                        "CATALOG_S3_PATH__STYLE__ACCESS": "true", "CATALOG_CLIENT_REGION": "us-east-1",
                        **self.s3.env()})
        return env

    def start(self, timeout: float = 90.0) -> LocalRESTCatalog:
        if self._proc is not None:
            return self
        import subprocess

        if self._home is None:
            self._home = Path(tempfile.mkdtemp(prefix="cdc-rest-"))
        self._home.mkdir(parents=True, exist_ok=True)
        restart = self._port is not None
        if self._port is None:
            self._port = free_port()
        deadline = time.monotonic() + timeout
        while restart and port_in_use(self._port) and time.monotonic() < deadline:
            time.sleep(0.2)
        java = shutil.which("java") or "java"
        self._log = open(self._log_path, "ab") if self._log_path else open(self.home / "server.log", "ab")  # noqa: SIM115
        self._proc = subprocess.Popen([java, *JVM_OPTIONS, "-cp", maven.classpath(JAR_SET), MAIN],
                                      stdout=self._log, stderr=subprocess.STDOUT, env=self.environment(),
                                      cwd=str(self.home), start_new_session=True)
        while not self._ready():
            if self._proc.poll() is not None:
                raise RuntimeError(f"the REST catalog server exited ({self._proc.returncode}) before serving on "
                                   f"{self.server_uri}; log: {self._log_path or self.home / 'server.log'}")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"the REST catalog server did not answer on {self.server_uri} in {timeout}s")
            time.sleep(0.2)
        if self.auth and self._gateway is None:
            from devtools.rest_gateway import RESTAuthGateway

            self._gateway = RESTAuthGateway(self.server_uri, self.credential).start()
        return self

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.server_uri}/v1/config", timeout=1) as r:  # noqa: S310
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def stop(self, keep_gateway: bool = False) -> None:
        """Stop the server (``keep_gateway``: the gateway stays up, answering 502 for it: a restart keeps its
        port and tables)."""
        end_process(self._proc, self._log, grace=15.0)
        self._proc = self._log = None
        if self._gateway is not None and not keep_gateway:
            self._gateway.stop()
            self._gateway = None

    def close(self) -> None:
        self.stop()
        if self._own_home and self._home is not None:
            shutil.rmtree(self._home, ignore_errors=True)

    def __enter__(self) -> LocalRESTCatalog:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class _DemoS3:
    """The S3 server ``python -m devtools.s3 start`` left running (its endpoint and open-mode keys)."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint

    def env(self) -> dict[str, str]:
        from devtools.s3 import OPEN_KEY_ID, OPEN_SECRET, REGION

        return {"AWS_ACCESS_KEY_ID": OPEN_KEY_ID, "AWS_SECRET_ACCESS_KEY": OPEN_SECRET, "AWS_REGION": REGION}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m devtools.rest_catalog", description="a local Iceberg REST catalog")
    p.add_argument("action", choices=("start", "stop"))
    p.add_argument("--port", type=int, default=18181)
    p.add_argument("--s3-endpoint", default="http://127.0.0.1:19000", help="'' for a local warehouse")
    p.add_argument("--warehouse", default="s3://lake/rest")
    p.add_argument("--state", default=".demo", help="folder of the pidfile, log and catalog database")
    args = p.parse_args(argv)
    state = Path(args.state).resolve()
    pidfile = state / "iceberg-rest.pid"
    if args.action == "stop":
        if pidfile.exists():
            try:
                os.killpg(int(pidfile.read_text()), signal.SIGTERM)
            except ProcessLookupError:
                pass
            pidfile.unlink()
        return 0
    s3 = _DemoS3(args.s3_endpoint) if args.s3_endpoint else None
    server = LocalRESTCatalog(warehouse=args.warehouse if s3 else None, s3=s3, home=state / "iceberg-rest",
                              log_path=state / "iceberg-rest.log")
    server._port = args.port
    server.start()
    pidfile.write_text(str(server.pid))
    print(f"Iceberg REST catalog on {server.uri}, warehouse {server.warehouse}")
    return 0  # left running: the pidfile owns it


if __name__ == "__main__":
    sys.exit(main())
