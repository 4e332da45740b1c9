"""A local Kafka broker (``devtools.broker``) detached from the process that starts it, tracked by a pidfile: ``make
demo``'s broker, and ``python -m devtools.broker_daemon start|stop``."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

from devtools.broker import HOST, free_ports, port_in_use, prepare, wait_until_ready


def _is_broker(pid: int) -> bool:
    """Guard against PID reuse: only signal a process whose command line is a Kafka broker."""
    try:
        return b"kafka.Kafka" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still answers kill(0); treat it as dead.
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


def daemon_start(port: int, pidfile: str, log_path: str | None = None, timeout: float = 60.0,
                 home: str | None = None) -> str:
    """Start a broker detached from this process (own session), write ``pidfile``, return the bootstrap. Its log
    lives in ``home`` (default: beside the pidfile, emptied first: every demo starts from scratch)."""
    if os.path.exists(pidfile):
        old = int(Path(pidfile).read_text().strip() or 0)
        if old and pid_alive(old) and _is_broker(old):
            raise RuntimeError(f"broker already running with pid {old} ({pidfile})")
    if port_in_use(port):
        raise RuntimeError(f"port {port} is already in use")
    where = Path(home) if home else Path(pidfile).with_suffix(".kafka")
    shutil.rmtree(where, ignore_errors=True)
    argv = prepare(where, port, free_ports(1, (port,))[0])
    log: IO[bytes] | int = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115
    proc = subprocess.Popen(argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
    Path(pidfile).write_text(f"{proc.pid}\n")
    bootstrap = f"{HOST}:{port}"
    try:
        wait_until_ready(bootstrap, timeout, alive=lambda: proc.poll() is None)
    except Exception:
        daemon_stop(pidfile)
        raise
    return bootstrap


def daemon_stop(pidfile: str, grace: float = 30.0) -> bool:
    """Stop the broker recorded in ``pidfile``; returns False if it was not running."""
    try:
        pid = int(Path(pidfile).read_text().strip())
    except (OSError, ValueError):
        return False
    stopped = False
    if pid_alive(pid) and _is_broker(pid):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
        stopped = True
    with contextlib.suppress(OSError):
        os.unlink(pidfile)
    return stopped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.broker_daemon", description=__doc__.splitlines()[0].rstrip(","))
    sub = parser.add_subparsers(dest="cmd", required=True)
    start = sub.add_parser("start", help="start a daemonised Kafka broker and print its bootstrap address")
    start.add_argument("--port", type=int, default=9092)
    start.add_argument("--pidfile", required=True)
    start.add_argument("--log", default=None, help="append the broker's output to this file")
    stop = sub.add_parser("stop", help="stop the broker recorded in --pidfile")
    stop.add_argument("--pidfile", required=True)
    args = parser.parse_args(argv)
    if args.cmd == "start":
        print(daemon_start(args.port, args.pidfile, args.log), flush=True)
        return 0
    if not daemon_stop(args.pidfile):
        print(f"no running broker in {args.pidfile}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
