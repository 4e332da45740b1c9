"""``pip install`` of the project wheel into a fresh virtualenv (third-party packages from the project venv, no
source tree): the library, the Airflow side and the console entry points work from the installed package."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from tests.cluster import standalone


def test_wheel_installs_library_and_entry_points(cdc_wheel: Path, tmp_path: Path) -> None:
    names = set(zipfile.ZipFile(cdc_wheel).namelist())
    sources = {f"{pkg}/{p.relative_to(base).as_posix()}" for pkg, base in (("cdc", standalone.REPO / "jobs/cdc"),
               ("cdc_airflow", standalone.REPO / "plugins/cdc_airflow")) for p in base.rglob("*.py")}
    assert sources - names == set()  # every module of both packages, each phase folder included
    assert {"cdc/apps/ingest.py", "cdc/apps/maintenance.py", "cdc/apps/bootstrap.py"} <= names  # the jobs, as copies
    py = standalone.bare_venv(tmp_path / "venv")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--quiet", "--no-deps",
                    str(cdc_wheel)], check=True, capture_output=True, timeout=300)
    env = standalone.clean_env()
    cwd = str(tmp_path)  # not the repository

    def run(*cmd: str) -> subprocess.CompletedProcess:
        return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=120)

    where = run(str(py), "-c", "import cdc, cdc.apps.ingest, cdc_airflow.runs.commands; print(cdc.__file__)")
    assert where.returncode == 0, where.stderr
    assert "site-packages" in where.stdout and str(standalone.REPO) not in where.stdout
    bad = tmp_path / "missing.yaml"
    for script in ("cdc-ingest", "cdc-maintenance"):
        proc = run(str(py.parent / script), "--config", str(bad))
        assert proc.returncode == 2, (script, proc.stdout, proc.stderr)  # ConfigError: a person must act
        assert "missing.yaml" in proc.stderr
    jars = run(str(py), "-m", "cdc.spark.jars")
    assert jars.stdout.strip().split(",") == [
        "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2", "org.apache.iceberg:iceberg-aws-bundle:1.10.1",
        "org.postgresql:postgresql:42.7.4", "org.mariadb.jdbc:mariadb-java-client:2.7.6"]
