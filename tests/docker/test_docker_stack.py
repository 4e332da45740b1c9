"""docker/ checked offline (no Docker engine here): what can be verified without running the stack.

The compose file parses; every file it or the Dockerfiles reference exists; the stack's pipeline YAML (mounted from
docker/pipelines, not in pipelines/) validates and becomes its DAGs; every long-running service has a health check
and every depends_on waits for a condition; Kafka's log dirs, the REST catalog's JDBC database are on volumes;
Debezium Connect is 3.x and registered with create-or-update; JAVA_HOME is architecture-neutral; the image gets the
AWS bundle; spark.cores.max lets the pool's concurrent applications share the worker; and every module plugins/,
dags/ and the job import is provided by requirements.txt (directly or through declared dependencies).
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"
COMPOSE = DOCKER / "docker-compose.yml"
PIPELINE = DOCKER / "pipelines" / "docker.yaml"
CONDITIONS = {"service_healthy", "service_completed_successfully"}


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def services(compose) -> dict:
    return compose["services"]


def one_shot(svc: dict) -> bool:
    return (svc.get("labels") or {}).get("cdc.one-shot") == "true"


def env(svc: dict) -> dict:
    e = svc.get("environment") or {}
    return e if isinstance(e, dict) else dict(item.split("=", 1) for item in e)


def test_compose_parses_and_every_referenced_file_exists(compose, services):
    assert {"kafka", "schema-registry", "connect", "connect-register", "iceberg-rest", "minio", "postgres",
            "airflow-apiserver", "airflow-scheduler", "spark-master", "spark-worker"} <= set(services)
    named = set(compose.get("volumes") or {})
    for name, svc in services.items():
        build = svc.get("build")
        if build:
            context = (DOCKER / build["context"]).resolve()
            dockerfile = context / build.get("dockerfile", "Dockerfile")
            assert dockerfile.is_file(), f"{name}: {dockerfile}"
            for src in copy_sources(dockerfile):
                assert (context / src).exists(), f"{name}: {dockerfile.name} copies missing {src}"
        for vol in svc.get("volumes") or []:
            source = vol.split(":", 1)[0]
            if source.startswith((".", "/")):
                assert (DOCKER / source).exists(), f"{name}: bind mount source {source} is missing"
            else:
                assert source in named, f"{name}: volume {source} is not declared"


def copy_sources(dockerfile: Path) -> list[str]:
    out = []
    for line in dockerfile.read_text().splitlines():
        parts = line.split()
        if parts[:1] == ["COPY"]:
            args = [p for p in parts[1:] if not p.startswith("--")]
            out += args[:-1]
    return out


def test_every_long_running_service_is_health_checked_and_every_dependency_has_a_condition(services):
    for name, svc in services.items():
        if one_shot(svc):
            assert svc.get("restart") == "no", name
        else:
            test = (svc.get("healthcheck") or {}).get("test")
            assert test and test[0] in ("CMD", "CMD-SHELL") and len(test) > 1, f"{name} has no health check"
        deps = svc.get("depends_on") or {}
        assert isinstance(deps, dict), f"{name}: depends_on must name a condition for each service"
        for dep, spec in deps.items():
            assert dep in services, f"{name} depends on unknown {dep}"
            cond = (spec or {}).get("condition")
            assert cond in CONDITIONS, f"{name} → {dep}: condition {cond!r}"
            if cond == "service_healthy":
                assert not one_shot(services[dep]) and services[dep].get("healthcheck"), f"{name} → {dep}"
            else:
                assert one_shot(services[dep]), f"{name} → {dep}: only one-shot services complete"
    # the scheduler runs the Spark jobs: it waits for what they reach
    assert {"kafka", "schema-registry", "iceberg-rest", "spark-master"} <= set(services["airflow-scheduler"]
                                                                            ["depends_on"])


def test_kafka_keeps_its_log_on_the_volume(services):
    kafka = services["kafka"]
    log_dirs = env(kafka)["KAFKA_LOG_DIRS"]
    mounts = {v.split(":")[1]: v.split(":")[0] for v in kafka["volumes"]}
    assert any(log_dirs == m or log_dirs.startswith(m + "/") for m in mounts), (log_dirs, mounts)
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", env(kafka)["CLUSTER_ID"])  # Kafka's base64 UUID form


def test_rest_catalog_is_the_maintained_image_with_a_persistent_jdbc_backend(services):
    from cdc.spark.jars import ICEBERG_VERSION

    rest = services["iceberg-rest"]
    image, tag = rest["image"].split(":")
    assert image == "apache/iceberg-rest-fixture"
    assert tag.split(".")[:2] == ICEBERG_VERSION.split(".")[:2]  # the same Iceberg minor version as the jobs
    e = env(rest)
    assert e["CATALOG_CATALOG__IMPL"] == "org.apache.iceberg.jdbc.JdbcCatalog"
    uri = e["CATALOG_URI"]
    assert uri.startswith("jdbc:") and "memory" not in uri
    db_file = uri.split("file:", 1)[1]
    assert any(db_file.startswith(v.split(":")[1] + "/") for v in rest["volumes"]), "catalog DB not on a volume"
    assert e["CATALOG_IO__IMPL"] == "org.apache.iceberg.aws.s3.S3FileIO"


def test_debezium_connect_3_registered_with_create_or_update(services):
    base = (DOCKER / "connect" / "Dockerfile").read_text()
    m = re.search(r"^FROM quay\.io/debezium/connect:(\d+)\.", base, re.M)
    assert m and int(m.group(1)) >= 3
    assert "kafka-connect-avro-converter" in base  # Debezium's images lack Confluent's Avro converter
    reg = services["connect-register"]
    command = " ".join(reg["command"])
    config = json.loads((DOCKER / "connect" / "inventory-postgres.json").read_text())
    assert "-X PUT" in command and f"/connectors/{config['name']}/config" in command
    assert "config" not in config and config["connector.class"].endswith("PostgresConnector")  # PUT takes the map
    assert config["key.converter"] == config["value.converter"] == "io.confluent.connect.avro.AvroConverter"
    assert config["topic.prefix"] + ".inventory.customers" in PIPELINE.read_text()


def test_image_java_home_is_architecture_neutral_and_has_the_aws_bundle():
    from cdc.spark.jars import ALL, ICEBERG_AWS_BUNDLE, maven_url

    text = (DOCKER / "Dockerfile").read_text()
    homes = re.findall(r"JAVA_HOME=(\S+)", text)
    assert homes and not any(a in h for h in homes for a in ("amd64", "arm64", "aarch64", "x86_64"))
    assert "python -m cdc.spark.jars --urls" in text and ICEBERG_AWS_BUNDLE in ALL
    out = subprocess.run([sys.executable, "-m", "cdc.spark.jars", "--urls"], capture_output=True, text=True, check=True,
                         timeout=60).stdout.split()
    assert maven_url(ICEBERG_AWS_BUNDLE) in out
    assert re.search(r"pip install [^\n]*-r /opt/cdc/requirements\.txt", text)


def test_two_applications_share_the_worker(services):
    text = (DOCKER / "Dockerfile").read_text()
    cfg = yaml.safe_load(PIPELINE.read_text())
    cores_max = int(cfg["spark"]["spark.cores.max"])
    assert f"spark.cores.max {cores_max}" in text  # also the default of every application (maintenance too)
    worker_cores = sum(int(re.search(r"--cores (\d+)", " ".join(s["command"])).group(1))
                       for n, s in services.items() if n.startswith("spark-worker"))
    slots = int(re.search(r"pools set cdc_spark (\d+)", " ".join(services["airflow-init"]["command"])).group(1))
    assert slots >= 2 and slots * cores_max <= worker_cores


def test_the_stack_pipeline_lives_with_docker_validates_and_becomes_its_dags(services):
    from cdc.config.load import load_config

    cfg = load_config(PIPELINE, env={})  # ${VAR:-default}: the compose hostnames
    assert cfg.pipeline == "docker_inventory" and cfg.catalog.type == "rest"
    assert [t.target for t in cfg.tables] == ["inventory.customers", "inventory.orders", "inventory.products"]
    assert [t.describe() for t in cfg.tables[0].layout.partition_by] == ["bucket(8, id)"]
    assert not list((REPO / "pipelines").glob("docker*.y*ml"))  # make demo's DAG list stays local
    for name in ("airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer"):
        assert "./pipelines:/opt/cdc/pipelines:ro" in services[name]["volumes"], name
    assert "CDC_PIPELINES_DIR=/opt/cdc/pipelines" in (DOCKER / "Dockerfile").read_text()

    from tests import airflow_env  # noqa: F401  (AIRFLOW_HOME etc. for the DAG parse below)

    parse = ("import json, sys; from airflow.dag_processing.dagbag import DagBag; b = DagBag(sys.argv[1]); "
             "print(json.dumps({'errors': {k: str(v) for k, v in b.import_errors.items()}, 'dags': sorted(b.dags)}))")
    out = subprocess.run([sys.executable, "-c", parse, str(REPO / "dags")], capture_output=True, text=True,
                         timeout=180, check=True, env={**os.environ, "CDC_PIPELINES_DIR": str(PIPELINE.parent)})
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["errors"] == {}
    assert {"cdc_docker_inventory", "cdc_docker_inventory_maintenance"} <= set(result["dags"])


# --- the image's requirements cover every runtime import ----------------------------------------------------------

FIRST_PARTY = {"cdc", "cdc_airflow", "jobs", "dags", "plugins", "tests", "devtools", "bench"}


def imported_modules(roots: list[Path]) -> dict[str, str]:
    """Top-level module → one file importing it (absolute imports in every .py under ``roots``)."""
    out: dict[str, str] = {}
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                    names = [node.module]
                for n in names:
                    out.setdefault(n.split(".")[0], str(path.relative_to(REPO)))
    return out


def requirement_closure(lines: list[str]) -> set[str]:
    """Normalised names of the requirements and, through installed metadata, all they depend on (with extras)."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    todo = [Requirement(x.split("#")[0].strip()) for x in lines if x.split("#")[0].strip()]
    seen: dict[str, set[str]] = {}
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        extras = set(req.extras)
        if name in seen and extras <= seen[name]:
            continue
        seen[name] = seen.get(name, set()) | extras
        try:
            requires = metadata.requires(req.name) or []
        except metadata.PackageNotFoundError:
            continue
        for r in map(Requirement, requires):
            if r.marker is None or any(r.marker.evaluate({"extra": e}) for e in (seen[name] or {""})):
                todo.append(r)
    return set(seen)


def test_requirements_provide_every_module_the_dags_plugins_and_job_import():
    from packaging.utils import canonicalize_name

    modules = imported_modules([REPO / "plugins", REPO / "dags", REPO / "jobs"])
    provided = requirement_closure((REPO / "requirements.txt").read_text().splitlines())
    owners = metadata.packages_distributions()
    missing = {}
    for mod, where in sorted(modules.items()):
        if mod in sys.stdlib_module_names or mod in FIRST_PARTY or mod == "__future__":
            continue
        dists = {canonicalize_name(d) for d in owners.get(mod, [])}
        if not dists & provided:
            missing[mod] = (where, sorted(dists))
    assert missing == {}, f"imported but not provided by requirements.txt: {missing}"
    assert {"pyiceberg", "apache-airflow", "confluent-kafka", "pyspark"} <= provided
