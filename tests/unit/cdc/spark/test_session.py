"""The session factory's decisions, as pure functions: which master is in effect, when the driver is pinned to
loopback, which jars a session gets. The real-cluster counterpart is tests/cluster/test_standalone_cluster.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc.common.errors import ConfigError
from cdc.config.load import parse_config
from cdc.spark import jars
from cdc.spark.session import LOCAL_DRIVER_JAVA_OPTIONS, LOCAL_SPARK_CONF, effective_master, is_local, session_conf


def cfg(spark: dict[str, str] | None = None, catalog: dict[str, object] | None = None):
    return parse_config({
        "pipeline": "p", "kafka": {"bootstrap.servers": "127.0.0.1:1"}, "format": "json",
        "catalog": catalog or {"name": "lake", "type": "hadoop", "warehouse": "/tmp/wh"},
        "spark": spark or {}, "tables": [{"topic": "x", "target": "a.b"}],
    })


@pytest.mark.parametrize("submitted", ["spark://10.0.0.5:7077", "yarn", "k8s://https://api:6443"])
def test_spark_submit_to_a_cluster_never_pins_the_driver(submitted: str) -> None:
    """Regression: no YAML master and no --master under ``spark-submit --master <cluster>`` pinned 127.0.0.1."""
    conf = session_conf(cfg(), None, submitted=submitted)
    assert conf["spark.master"] == submitted
    assert "spark.driver.host" not in conf and "spark.driver.bindAddress" not in conf
    assert "spark.executorEnv.PYTHONPATH" not in conf
    assert conf["spark.ui.enabled"] == "true"  # operators watch cluster runs in the Spark UI
    assert session_conf(cfg(), "local[2]")["spark.ui.enabled"] == "false"


@pytest.mark.parametrize("submitted,cli,yaml_master,expected", [
    (None, None, None, "local[*]"),
    (None, None, "spark://h:7077", "spark://h:7077"),
    (None, "local[2]", "spark://h:7077", "local[2]"),
    ("spark://h:7077", None, "local[4]", "spark://h:7077"),  # spark-submit's master wins over the YAML
    ("spark://h:7077", "local[2]", None, "local[2]"),  # the job's own --master wins over everything
    ("local[*]", None, None, "local[*]"),
])
def test_master_in_effect(submitted, cli, yaml_master, expected) -> None:
    assert effective_master(submitted, cli, yaml_master) == expected
    spark = {"spark.master": yaml_master} if yaml_master else {}
    conf = session_conf(cfg(spark), cli, submitted=submitted, package_dir="/src/jobs")
    assert conf["spark.master"] == expected
    pinned = conf.get("spark.driver.bindAddress") == "127.0.0.1" and conf.get("spark.driver.host") == "127.0.0.1"
    assert pinned is is_local(expected)
    assert (conf.get("spark.executorEnv.PYTHONPATH") == "/src/jobs") is is_local(expected)


def test_is_local() -> None:
    assert all(is_local(m) for m in ("local", "local[1]", "local[*]", "local[2,3]", "local-cluster[2,1,1024]"))
    assert not any(is_local(m) for m in ("yarn", "spark://h:7077", "k8s://https://h", "localhost:7077"))


def test_a_local_jvm_compiles_with_c1_only_unless_the_yaml_says_otherwise() -> None:
    assert session_conf(cfg(), "local[2]")["spark.driver.extraJavaOptions"] == LOCAL_DRIVER_JAVA_OPTIONS
    assert "spark.driver.extraJavaOptions" not in session_conf(cfg(), "spark://h:7077")
    own = session_conf(cfg({"spark.driver.extraJavaOptions": "-Dx=1"}), "local[2]")
    assert own["spark.driver.extraJavaOptions"] == "-Dx=1"


def test_a_local_jvm_broadcasts_in_small_chunks_a_cluster_keeps_its_own() -> None:
    assert session_conf(cfg(), "local[2]")["spark.broadcast.blockSize"] == LOCAL_SPARK_CONF["spark.broadcast.blockSize"]
    assert "spark.broadcast.blockSize" not in session_conf(cfg(), "spark://h:7077")
    assert session_conf(cfg({"spark.broadcast.blockSize": "8m"}), "local[2]")["spark.broadcast.blockSize"] == "8m"


def test_user_settings_win_but_not_over_the_master_in_effect() -> None:
    conf = session_conf(cfg({"spark.driver.host": "10.1.1.1", "spark.master": "local[4]"}), None,
                        submitted="spark://h:7077")
    assert conf["spark.driver.host"] == "10.1.1.1" and conf["spark.master"] == "spark://h:7077"


def test_jars_are_coordinates_and_a_local_master_takes_the_files_already_cached() -> None:
    cached = {jars.ICEBERG_SPARK_RUNTIME: "/home/u/.ivy2/jars/org.apache.iceberg_iceberg-spark-runtime.jar"}
    assert session_conf(cfg(), None)["spark.jars.packages"] == jars.ICEBERG_SPARK_RUNTIME  # nothing cached: resolved
    local = session_conf(cfg(), None, jar_files=cached)
    assert local["spark.jars"] == cached[jars.ICEBERG_SPARK_RUNTIME] and "spark.jars.packages" not in local
    remote = session_conf(cfg(), "spark://h:7077", jar_files=cached)
    assert remote["spark.jars.packages"] == jars.ICEBERG_SPARK_RUNTIME and "spark.jars" not in remote
    assert session_conf(cfg(), "spark://h:7077", jar_files=cached, jar_mode="files")["spark.jars"] == \
        cached[jars.ICEBERG_SPARK_RUNTIME]
    # under spark-submit the JVM's classpath is spark-submit's (--jars/--packages): the session adds nothing
    submitted = session_conf(cfg(), None, submitted="spark://h:7077", jar_files=cached)
    assert "spark.jars" not in submitted and "spark.jars.packages" not in submitted
    own = session_conf(cfg({"spark.jars.packages": "g:a:1"}), None, jar_files=cached)
    assert own["spark.jars.packages"] == "g:a:1" and "spark.jars" not in own


def test_ivy_cache_is_where_spark_left_a_resolved_jar(tmp_path) -> None:
    (tmp_path / "jars").mkdir()
    jar = tmp_path / "jars" / "org.apache.iceberg_iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
    jar.write_bytes(b"PK")
    assert jars.cached_jar(jars.ICEBERG_SPARK_RUNTIME, tmp_path) == str(jar)
    assert jars.cached_jar(jars.ICEBERG_AWS_BUNDLE, tmp_path) is None
    assert jars.local_files({}, tmp_path)[jars.ICEBERG_SPARK_RUNTIME] == str(jar)
    assert jars.ivy_home({"spark.jars.ivy": "/srv/ivy"}) == Path("/srv/ivy")


def test_jar_set_follows_catalog_and_warehouse() -> None:
    s3 = cfg(catalog={"name": "lake", "type": "rest", "warehouse": "s3a://bucket/wh", "uri": "http://rest:8181"})
    assert jars.for_config(s3) == (jars.ICEBERG_SPARK_RUNTIME, jars.ICEBERG_AWS_BUNDLE)
    # S3 needs the AWS bundle too: a cached runtime alone does not make the session's jars files
    assert session_conf(s3, "local[2]", jar_files={jars.ICEBERG_SPARK_RUNTIME: "/x.jar"})["spark.jars.packages"] == \
        f"{jars.ICEBERG_SPARK_RUNTIME},{jars.ICEBERG_AWS_BUNDLE}"
    glue = cfg(catalog={"name": "lake", "type": "glue", "warehouse": "/wh"})
    assert jars.ICEBERG_AWS_BUNDLE in jars.for_config(glue)
    pg = cfg(catalog={"name": "lake", "type": "jdbc", "warehouse": "/wh",
                      "properties": {"uri": "jdbc:postgresql://db:5432/iceberg"}})
    assert jars.for_config(pg) == (jars.ICEBERG_SPARK_RUNTIME, jars.POSTGRESQL_JDBC)
    assert set(jars.ALL) == {jars.ICEBERG_SPARK_RUNTIME, jars.ICEBERG_AWS_BUNDLE, jars.POSTGRESQL_JDBC,
                             jars.MARIADB_JDBC}
    with pytest.raises(ConfigError, match="CDC_JARS"):
        jars.choose_mode("maven", True, jars.ALL, True)


def test_submitted_master_starts_no_jvm_outside_spark_submit() -> None:
    from cdc.spark.session import submitted_master

    assert submitted_master({}) is None
    assert submitted_master({"SPARK_ENV_LOADED": "1"}) is None  # spark's env scripts ran, but no JVM is up


def test_wheels_of_py_files_are_shipped_again_as_zips() -> None:
    """PySpark puts only .zip/.egg/.jar py-files on executors' sys.path: a wheel needs a .zip twin."""
    from cdc.spark.session import wheel_zips

    assert wheel_zips("/b/cdc_iceberg-0.1.0-py3-none-any.whl,/b/x.zip, file:/c/other-1.0-py3-none-any.WHL,") == [
        ("/b/cdc_iceberg-0.1.0-py3-none-any.whl", "cdc_iceberg-0.1.0-py3-none-any.zip"),
        ("file:/c/other-1.0-py3-none-any.WHL", "other-1.0-py3-none-any.zip")]
    assert wheel_zips("") == []


def test_result_locations_plain_files_and_uris(tmp_path) -> None:
    """cdc.results: paths and file: URIs are plain files (atomic), other schemes go through pyarrow.fs; one location
    per task try. Object stores are not reachable here: only their classification is tested."""
    from cdc.common import cli_contract as cli
    from cdc.common import result_file as results

    loc = results.result_location(f"file://{tmp_path}/res/", "cdc_demo", "manual__2026-01-01T00:00:00+00:00",
                                  "ingest", "inventory.customers", 2)
    assert loc == (f"file://{tmp_path}/res/cdc_demo/manual__2026-01-01T00_00_00_00_00/"
                   "ingest__inventory.customers__try2.json")
    cli.write_result(cli.JobResult(75, None, "broker down"), {cli.RESULT_FILE_ENV: loc})
    assert cli.read_result(loc) == cli.JobResult(75, None, "broker down")
    assert (tmp_path / "res" / "cdc_demo").is_dir() and not list(tmp_path.rglob("*.tmp"))
    assert cli.read_result(f"{tmp_path}/missing.json") is None
    assert all(results.is_local(x) for x in ("/a/b", "rel/x.json", "file:///a", r"C:\\r.json"))
    assert not any(results.is_local(x) for x in ("s3://b/k", "hdfs://nn/p", "gs://b/k", "abfs://c@a/p"))


def test_maven_urls_of_the_jar_set() -> None:
    assert jars.maven_url(jars.ICEBERG_AWS_BUNDLE) == (
        "https://repo1.maven.org/maven2/org/apache/iceberg/iceberg-aws-bundle/1.10.1/iceberg-aws-bundle-1.10.1.jar")
    assert jars.maven_url(jars.POSTGRESQL_JDBC, "https://mirror/m2/") == (
        "https://mirror/m2/org/postgresql/postgresql/42.7.4/postgresql-42.7.4.jar")


def test_python_workers_use_this_interpreter_only_locally() -> None:
    from cdc.spark.session import python_env

    assert python_env("local[2]", "/venv/bin/python") == {"PYSPARK_PYTHON": "/venv/bin/python",
                                                          "PYSPARK_DRIVER_PYTHON": "/venv/bin/python"}
    assert python_env("spark://h:7077", "/venv/bin/python") == {} == python_env("yarn", "/venv/bin/python")


def test_preloaded_modules_wait_for_the_jvm_gateway_then_are_imported() -> None:
    """In a fresh interpreter: nothing is imported before PySpark's gateway exists (PySpark forks the JVM with a
    ``preexec_fn``, and a fork during another thread's import hung the job), then every module is, and a module that
    does not exist does not stop the others."""
    import subprocess
    import sys

    code = ("import sys, time; from pyspark import SparkContext; from cdc.spark.session import JOB_MODULES, preload_modules; "
            "t = preload_modules(('no_such_module_xyz', *JOB_MODULES)); time.sleep(1.0); "
            "early = [m for m in JOB_MODULES if m in sys.modules]; "
            "SparkContext._gateway = object(); t.join(60); "
            "print(early, [m for m in JOB_MODULES if m not in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    early, missing = out.stdout.strip().rsplit("] [", 1)
    assert "pandas" not in early and "polars_avro" not in early and missing == "]", out.stdout
