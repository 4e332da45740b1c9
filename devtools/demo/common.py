"""Shared paths, ports and names of the local demo, plus ``say`` and ``DemoError``."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STATE = REPO / ".demo"
PIPELINE = REPO / "pipelines" / "demo.yaml"
PY = sys.executable
HOST = "127.0.0.1"
BROKER_PORT, REGISTRY_PORT, API_PORT, CONNECT_PORT, POSTGRES_PORT = 19092, 18081, 18080, 18083, 15432
PARTITIONS = 3
DAG_ID = "cdc_demo"
TARGETS = {"customers": "inventory.customers", "orders": "inventory.orders"}
SERVICES = ("api-server", "scheduler", "dag-processor", "triggerer", "connect", "postgres", "registry",
            "broker")  # stop order


def say(msg: str = "") -> None:
    print(msg, flush=True)


class DemoError(RuntimeError):
    pass
