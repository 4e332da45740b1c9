"""Session fixtures of the cluster tests: the project wheel, an interpreter without the project, a real Spark
standalone cluster (master + 2 workers, started once per test session, stopped by process group at the end)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from tests.airflow_env import airflow_db  # noqa: F401  (fixture re-export; sets AIRFLOW_* on import)
from tests.cluster import standalone


@pytest.fixture(scope="session")
def cdc_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel executors get with --py-files (``pip wheel . --no-deps``, as ``make wheel``)."""
    return standalone.build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="session")
def executor_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The executors' interpreter: the declared third-party dependencies, and no ``cdc`` anywhere on its path."""
    import subprocess

    py = standalone.bare_venv(tmp_path_factory.mktemp("executor-venv") / "venv")
    env = standalone.clean_env()
    ok = subprocess.run([str(py), "-c", "import " + ", ".join(standalone.EXECUTOR_MODULES)], env=env,
                        capture_output=True, text=True, cwd="/")
    assert ok.returncode == 0, ok.stderr
    no_cdc = subprocess.run([str(py), "-c", "import cdc"], env=env, capture_output=True, text=True, cwd="/")
    assert "No module named 'cdc'" in no_cdc.stderr, no_cdc.stderr
    return str(py)


@pytest.fixture(scope="session")
def spark_cluster() -> Iterator[standalone.Cluster]:
    base = standalone.session_dir(standalone.REPO / "test-output" / "spark-cluster")
    yield from standalone.start_cluster(base, workers=2)
