"""Shared paths, ports and names of the local demo, plus ``say`` and ``DemoError``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STATE = REPO / ".demo"
PIPELINE = REPO / "pipelines" / "demo.yaml"
# CDC_DEMO_CATALOG=rest-s3: the tables live on a local S3 (moto) behind Apache Iceberg's REST catalog server instead
# of a hadoop catalog in .demo/warehouse; the pipeline is pipelines/demo.yaml with that catalog (.demo/pipelines/)
CATALOG = os.environ.get("CDC_DEMO_CATALOG", "hadoop")
CATALOGS = ("hadoop", "rest-s3")
S3_PORT, REST_PORT = 19000, 18181
PY = sys.executable
HOST = "127.0.0.1"
BROKER_PORT, REGISTRY_PORT, API_PORT, CONNECT_PORT, POSTGRES_PORT = 19092, 18081, 18080, 18083, 15432
PARTITIONS = 3
DAG_ID = "cdc_demo"
TARGETS = {"customers": "inventory.customers", "orders": "inventory.orders"}
SERVICES = ("api-server", "scheduler", "dag-processor", "triggerer", "connect", "postgres", "registry",
            "iceberg-rest", "s3", "broker")  # stop order


def pipeline_path() -> Path:
    """The demo's pipeline YAML: pipelines/demo.yaml, or its rest-s3 variant (``CDC_DEMO_CATALOG``)."""
    return STATE / "pipelines" / "demo.yaml" if CATALOG == "rest-s3" else PIPELINE


def say(msg: str = "") -> None:
    print(msg, flush=True)


class DemoError(RuntimeError):
    pass
