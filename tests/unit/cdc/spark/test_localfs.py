"""``cdc.spark.localfs``: the settings it adds (pure) and its fallbacks. Building the jar for real (Janino) and using it
from a JVM is ``tests/integration/spark/test_localfs_spark.py``."""

from __future__ import annotations

import logging
from pathlib import Path

from cdc.spark import localfs
from cdc.spark.localfs import CLASS, CLASSPATH_KEY, IMPL_KEY, with_local_fs


def test_the_jar_goes_first_on_the_driver_classpath_and_names_the_file_system() -> None:
    conf = with_local_fs({"spark.master": "local[2]", CLASSPATH_KEY: "/opt/extra.jar"}, Path("/c/cdc-localfs.jar"))
    assert conf[IMPL_KEY] == CLASS
    assert conf[CLASSPATH_KEY].split(":") == ["/c/cdc-localfs.jar", "/opt/extra.jar"]
    # local-cluster[...] executors are JVMs of their own that create files too
    assert conf["spark.executor.extraClassPath"] == "/c/cdc-localfs.jar"


def test_settings_that_name_a_file_system_or_no_jar_leave_the_conf_as_it_is() -> None:
    own = {IMPL_KEY: "org.example.MyFs"}
    assert with_local_fs(own, Path("/c/cdc-localfs.jar")) == own
    assert with_local_fs({"spark.master": "local"}, None) == {"spark.master": "local"}


def test_off_builds_nothing(tmp_path: Path) -> None:
    assert localfs.jar({localfs.ENV: "off"}) is None


def test_a_jar_that_cannot_be_built_is_a_warning_not_an_error(tmp_path: Path, caplog) -> None:
    """No Janino where SPARK_HOME says Spark's jars are: the job runs on Hadoop's file system."""
    (tmp_path / "spark" / "jars").mkdir(parents=True)
    with caplog.at_level(logging.WARNING, logger="cdc.session"):
        assert localfs.jar({localfs.ENV: str(tmp_path / "cache"), "SPARK_HOME": str(tmp_path / "spark")}) is None
    assert CLASS in caplog.text and "not built" in caplog.text
    assert not list((tmp_path / "cache").rglob("*.jar"))


def test_the_jar_is_named_by_the_source_and_the_jars_it_was_built_against(tmp_path: Path) -> None:
    java, jar = tmp_path / "java", tmp_path / "hadoop-client-api.jar"
    java.write_text("x")
    jar.write_text("1")
    before = localfs.jar_key(str(java), [str(jar)])
    assert localfs.jar_key(str(java), [str(jar)]) == before
    jar.write_text("22")
    assert localfs.jar_key(str(java), [str(jar)]) != before


def test_a_classpath_of_spark_defaults_is_kept_behind_the_jar(tmp_path: Path) -> None:
    """A ``--conf`` of a classpath replaces the one ``spark-defaults.conf`` sets (the docker image's jars)."""
    (tmp_path / "spark-defaults.conf").write_text(
        "# comment\nspark.driver.extraClassPath   /opt/cdc/jars/*\nspark.executor.extraClassPath=/opt/x.jar\n"
        "spark.cores.max: 2\n")
    defaults = localfs.spark_defaults({"SPARK_CONF_DIR": str(tmp_path)})
    assert defaults == {"spark.driver.extraClassPath": "/opt/cdc/jars/*",
                        "spark.executor.extraClassPath": "/opt/x.jar", "spark.cores.max": "2"}
    conf = with_local_fs({CLASSPATH_KEY: "/own.jar"}, Path("/c/cdc-localfs.jar"), defaults)
    assert conf[CLASSPATH_KEY] == "/c/cdc-localfs.jar:/own.jar"  # the settings' own value wins over the defaults
    assert conf["spark.executor.extraClassPath"] == "/c/cdc-localfs.jar:/opt/x.jar"
    assert localfs.spark_defaults({"SPARK_CONF_DIR": str(tmp_path / "none")}) == {}
