"""A local S3-compatible server for tests and the demo: the real ``moto`` server process (``moto[server]`` from PyPI,
``python -m moto.server``) on a free loopback port.

Why moto: it installs from PyPI like every other dev dependency (no binary download, no Docker), speaks the S3 REST
API that Iceberg's ``S3FileIO`` (AWS SDK v2) and pyarrow's ``S3FileSystem`` use, path-style, and the same process
serves the Glue API (``glue.endpoint``) and IAM, so one server covers S3 warehouses and a Glue catalog. MinIO would
be a closer S3 but is a binary download, which this workplace cannot fetch.

``auth=True`` makes the server check every request's signature against IAM access keys (moto's
``INITIAL_NO_AUTH_ACTION_COUNT``): the fixture creates one user with a full-access key before anything else, so a
client with any other key is refused (``InvalidAccessKeyId``, 403), as a real S3 refuses bad credentials. The keys
travel only in the environment (``env()``) and in objects, never on a command line; ``repr`` masks the secret.

    with LocalS3() as s3:
        s3.create_bucket("lake")
        s3.endpoint      # http://127.0.0.1:<port>
        s3.env()         # AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_REGION for the job and the reader

``stop()`` then ``start()`` restarts it on the same port (an outage in the middle of a test); moto keeps its state in
memory, so a restarted server is empty (``keep_state``: the buckets are created again, their objects are gone).
The CLI (``python -m devtools.s3 start|stop``) daemonises one for a demo and tracks it with a pidfile.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from devtools.broker import HOST, end_process, free_port, port_in_use

REGION = "us-east-1"
# Before auth is enforced: create the user, its key and its policy (three IAM actions, nothing else).
_SETUP_ACTIONS = 3
_POLICY = '{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}'
# Keys of the unauthenticated mode: moto accepts any, these are what the clients sign with.
OPEN_KEY_ID, OPEN_SECRET = "testing-key-id", "testing-secret-key"


class LocalS3:
    """A ``moto`` server owned by this Python process."""

    def __init__(self, port: int | None = None, auth: bool = False, log_path: str | os.PathLike[str] | None = None
                 ) -> None:
        self._port = port
        self.auth = auth
        self._log_path = log_path
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self.access_key_id, self.secret_access_key = OPEN_KEY_ID, OPEN_SECRET
        self._buckets: list[str] = []

    def __repr__(self) -> str:
        return f"LocalS3(endpoint={self.endpoint if self._port else None!r}, auth={self.auth}, secret=***)"

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("S3 server not started")
        return self._port

    @property
    def endpoint(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def env(self) -> dict[str, str]:
        """The AWS SDK / pyarrow / boto3 environment of a client of this server (credentials and region)."""
        return {"AWS_ACCESS_KEY_ID": self.access_key_id, "AWS_SECRET_ACCESS_KEY": self.secret_access_key,
                "AWS_REGION": REGION, "AWS_DEFAULT_REGION": REGION, "AWS_EC2_METADATA_DISABLED": "true"}

    def start(self, timeout: float = 60.0) -> LocalS3:
        if self._proc is not None:
            return self
        restart = self._port is not None
        if self._port is None:
            self._port = free_port()
        deadline = time.monotonic() + timeout
        while restart and port_in_use(self._port) and time.monotonic() < deadline:
            time.sleep(0.1)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "MOTO_"))}
        if self.auth:
            env["INITIAL_NO_AUTH_ACTION_COUNT"] = str(_SETUP_ACTIONS)
        self._log = open(self._log_path, "ab") if self._log_path else tempfile.TemporaryFile()  # noqa: SIM115
        self._proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", HOST, "-p", str(self._port)],
                                      stdout=self._log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        while not self._ready():
            if self._proc.poll() is not None:
                raise RuntimeError(f"the moto server exited ({self._proc.returncode}) before serving on {self.endpoint}")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"the moto server did not answer on {self.endpoint} within {timeout}s")
            time.sleep(0.1)
        if self.auth:
            self._create_key()
        for bucket in self._buckets:
            self.client("s3").create_bucket(Bucket=bucket)
        return self

    def _ready(self) -> bool:
        import urllib.error
        import urllib.request

        try:  # moto's own API: not an AWS action, so it does not use up INITIAL_NO_AUTH_ACTION_COUNT
            with urllib.request.urlopen(f"{self.endpoint}/moto-api/data.json", timeout=1) as r:  # noqa: S310
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def _create_key(self) -> None:
        iam = self.client("iam", key=(OPEN_KEY_ID, OPEN_SECRET))
        iam.create_user(UserName="cdc")
        key = iam.create_access_key(UserName="cdc")["AccessKey"]
        iam.put_user_policy(UserName="cdc", PolicyName="all", PolicyDocument=_POLICY)
        self.access_key_id, self.secret_access_key = key["AccessKeyId"], key["SecretAccessKey"]

    def client(self, service: str, key: tuple[str, str] | None = None) -> Any:
        """A boto3 client of ``service`` (s3, glue, iam) on this server, with its credentials."""
        import boto3
        from botocore.config import Config

        key_id, secret = key or (self.access_key_id, self.secret_access_key)
        return boto3.client(service, endpoint_url=self.endpoint, region_name=REGION, aws_access_key_id=key_id,
                            aws_secret_access_key=secret,
                            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))

    def create_bucket(self, name: str) -> str:
        """Create ``name`` (again after a restart, too); returns ``s3://<name>``."""
        self.client("s3").create_bucket(Bucket=name)
        if name not in self._buckets:
            self._buckets.append(name)
        return f"s3://{name}"

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        """Every object key under ``prefix`` in ``bucket``."""
        s3, out, token = self.client("s3"), [], None
        while True:
            kw: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, **({"ContinuationToken": token} if token else {})}
            page = s3.list_objects_v2(**kw)
            out += [o["Key"] for o in page.get("Contents", [])]
            if not page.get("IsTruncated"):
                return out
            token = page["NextContinuationToken"]

    def stop(self) -> None:
        end_process(self._proc, self._log, grace=10.0)
        self._proc = self._log = None
        if self.auth:  # a restarted server has no IAM users: a new key
            self.access_key_id, self.secret_access_key = OPEN_KEY_ID, OPEN_SECRET

    def __enter__(self) -> LocalS3:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m devtools.s3", description="a local moto S3/Glue server")
    p.add_argument("action", choices=("start", "stop"))
    p.add_argument("--port", type=int, default=19000)
    p.add_argument("--bucket", default="lake")
    p.add_argument("--state", default=".demo", help="folder of the pidfile and log")
    args = p.parse_args(argv)
    state = Path(args.state)
    pidfile = state / "s3.pid"
    if args.action == "stop":
        if pidfile.exists():
            try:
                os.killpg(int(pidfile.read_text()), signal.SIGTERM)
            except ProcessLookupError:
                pass
            pidfile.unlink()
        return 0
    state.mkdir(parents=True, exist_ok=True)
    server = LocalS3(port=args.port, log_path=state / "s3.log").start()
    server.create_bucket(args.bucket)
    pidfile.write_text(str(server.pid))
    print(f"S3 (moto) on {server.endpoint}, bucket s3://{args.bucket}; clients: AWS_ACCESS_KEY_ID={OPEN_KEY_ID} "
          "AWS_SECRET_ACCESS_KEY=<any> AWS_REGION=us-east-1")
    server._proc = None  # leave it running (the pidfile owns it)
    return 0


if __name__ == "__main__":
    sys.exit(main())
