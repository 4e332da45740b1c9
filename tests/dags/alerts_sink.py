"""An ``airflow.on_failure`` target for tests: appends every alert it gets to $CDC_TEST_ALERTS (JSON lines)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def record(alert: dict[str, Any]) -> None:
    with open(os.environ["CDC_TEST_ALERTS"], "a") as f:
        f.write(json.dumps(alert, default=str) + "\n")


def recorded() -> list[dict[str, Any]]:
    path = Path(os.environ["CDC_TEST_ALERTS"])
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
