"""``cdc.spark.jvm_cache``: which archive a job's JVM maps or writes, and when it runs without one."""

from __future__ import annotations

import os

from cdc.spark import jvm_cache
from cdc.spark.jvm_cache import ClassCache, cache_key, class_cache, with_cache

CONF = {"spark.master": "local[*]", "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1"}


def env_for(tmp_path, **more):
    jars = tmp_path / "spark" / "jars"
    jars.mkdir(parents=True, exist_ok=True)
    (jars / "spark-core.jar").write_bytes(b"core")
    java = tmp_path / "jdk" / "bin"
    java.mkdir(parents=True, exist_ok=True)
    (java / "java").write_bytes(b"java")
    (tmp_path / "jdk" / "release").write_text('JAVA_VERSION="17.0.15"\nIMPLEMENTOR="x"\n')
    return {"SPARK_HOME": str(tmp_path / "spark"), "JAVA_HOME": str(tmp_path / "jdk"),
            jvm_cache.ENV: str(tmp_path / "cache"), **more}


def test_the_first_run_of_a_classpath_writes_the_archive_under_its_own_name_and_later_runs_map_it(tmp_path):
    env = env_for(tmp_path)
    first = class_cache(CONF, False, env)
    assert first is not None and first.dump_to is not None and not first.archive.exists()
    assert first.dump_to.parent == first.archive.parent and first.dump_to.name.endswith(f".{os.getpid()}.partial")
    assert f"-XX:ArchiveClassesAtExit={first.dump_to}" in first.java_options()
    first.archive.write_bytes(b"archive")  # what finish() publishes once the JVM has written it
    later = class_cache(CONF, False, env)
    assert later == ClassCache(first.archive, None)
    assert later.java_options().endswith(f"-XX:SharedArchiveFile={first.archive}")


def test_the_jvm_s_warnings_go_to_stderr_so_that_stdout_still_ends_with_the_summary(tmp_path):
    cache = class_cache(CONF, False, env_for(tmp_path))
    assert cache is not None and "-XX:+DisplayVMOutputToStderr -Xlog:disable -Xlog:all=warning,cds*=off:stderr" in \
        cache.java_options()


def test_a_changed_jar_java_or_jvm_option_names_another_archive(tmp_path):
    env = env_for(tmp_path)
    jar = tmp_path / "spark" / "jars" / "spark-core.jar"
    base = cache_key(env["JAVA_HOME"] + "/bin/java", [str(jar)], CONF)
    assert cache_key(env["JAVA_HOME"] + "/bin/java", [str(jar)], CONF) == base
    extra = tmp_path / "iceberg.jar"
    extra.write_bytes(b"iceberg")
    assert cache_key(env["JAVA_HOME"] + "/bin/java", [str(jar)], {**CONF, "spark.jars": str(extra)}) != base
    assert cache_key(env["JAVA_HOME"] + "/bin/java", [str(jar)],
                     {**CONF, "spark.driver.extraJavaOptions": ""}) != base
    jar.write_bytes(b"a newer spark-core")
    assert cache_key(env["JAVA_HOME"] + "/bin/java", [str(jar)], CONF) != base


def test_a_jar_rebuilt_at_the_same_driver_classpath_names_another_archive(tmp_path):
    """The JVM refuses an archive whose classpath jars changed since, silently; the same path is not enough."""
    env = env_for(tmp_path)
    java, own = env["JAVA_HOME"] + "/bin/java", tmp_path / "cdc-localfs.jar"
    own.write_bytes(b"v1")
    conf = {**CONF, "spark.driver.extraClassPath": f"{own}:/opt/jars/*"}
    base = cache_key(java, [], conf)
    own.write_bytes(b"v2 rebuilt")
    assert cache_key(java, [], conf) != base


def test_off_or_jvm_options_from_the_yaml_or_an_unwritable_directory_run_without_an_archive(tmp_path):
    assert class_cache(CONF, False, env_for(tmp_path, **{jvm_cache.ENV: "off"})) is None
    assert class_cache(CONF, True, env_for(tmp_path)) is None  # the YAML chose spark.driver.extraJavaOptions
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    assert class_cache(CONF, False, env_for(tmp_path, **{jvm_cache.ENV: str(blocked / "cache")})) is None


def test_the_archive_option_is_added_to_the_driver_s_jvm_options(tmp_path):
    cache = ClassCache(tmp_path / "k.jsa", None)
    conf = with_cache(dict(CONF), cache)
    assert conf["spark.driver.extraJavaOptions"] == f"-XX:TieredStopAtLevel=1 {cache.java_options()}"
    assert with_cache(dict(CONF), None) == CONF


def test_an_archive_a_killed_run_began_is_removed_after_an_hour(tmp_path):
    env = env_for(tmp_path)
    root = tmp_path / "cache"
    root.mkdir()
    dead, young, mine = (root / "k.999999999.partial", root / "k.999999998.partial", root / f"k.{os.getpid()}.partial")
    for f in (dead, young, mine):
        f.write_bytes(b"half")
    for f in (dead, mine):
        os.utime(f, (1, 1))
    class_cache(CONF, False, env)
    assert (dead.exists(), young.exists(), mine.exists()) == (False, True, True)


def test_a_java_without_dynamic_archives_or_of_unknown_version_runs_without_one(tmp_path):
    env = env_for(tmp_path)
    release = tmp_path / "jdk" / "release"
    assert jvm_cache.java_major(env["JAVA_HOME"] + "/bin/java") == 17
    release.write_text('JAVA_VERSION="11.0.2"\n')
    assert class_cache(CONF, False, env) is None  # -XX:ArchiveClassesAtExit would stop the JVM from starting
    release.write_text('JAVA_VERSION="1.8.0_402"\n')
    assert jvm_cache.java_major(env["JAVA_HOME"] + "/bin/java") == 8
    release.unlink()
    assert class_cache(CONF, False, env) is None


def test_prepare_keeps_the_archive_for_finish_and_leaves_a_running_jvm_alone(tmp_path, monkeypatch):
    from pyspark import SparkContext

    for k, v in env_for(tmp_path).items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(jvm_cache, "started", None)
    monkeypatch.setattr(SparkContext, "_gateway", None)  # no JVM yet: it starts with the archive's options
    conf = jvm_cache.prepare(dict(CONF), False)
    assert jvm_cache.started is not None and jvm_cache.started.dump_to is not None
    assert conf == with_cache(dict(CONF), jvm_cache.started)
    monkeypatch.setattr(jvm_cache, "started", None)
    monkeypatch.setattr(SparkContext, "_gateway", object())  # a JVM runs already: its options cannot change
    assert jvm_cache.prepare(dict(CONF), False) == CONF and jvm_cache.started is None
