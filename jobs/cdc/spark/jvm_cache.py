"""Class data sharing for a local master's JVM: a job process starts from an archive of the classes an earlier run
loaded, instead of loading and verifying Spark's, Hadoop's and Iceberg's classes again.

A micro-batch process spends seconds of CPU loading classes (issue 16, target 2: a 100-event batch 14.8 s → 11.1 s
and 17 → 13 CPU s with an archive, on 2 cores). Java 13+ writes such an archive at exit (``-XX:ArchiveClassesAtExit``)
and maps it at start (``-XX:SharedArchiveFile``). The first job of a classpath writes it (that process exits about
ten seconds later, after its summary); every later one uses it. The archive is named by what it depends on (the
``java`` binary, Spark's jars, the extra jars and the JVM options, ``cache_key``): after an upgrade a new one is
written. The JVM checks the archive against its classpath itself and runs without it when it does not match, so a
stale or damaged archive costs the speed-up, never the run. Written under a process-unique name and renamed once
the JVM has exited cleanly, an archive is never seen half-written.

Only the job entry points use it (``cdc-ingest``, ``python jobs/ingest.py``) and only for a local master whose
``spark.driver.extraJavaOptions`` the YAML does not set. ``CDC_JVM_CLASS_CACHE``: the directory (default
``~/.cache/cdc-iceberg/jvm``, about 150 MB per archive) or ``off``. Off as well for a Java older than 13.
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from cdc.common.log import setup_logging

ENV = "CDC_JVM_CLASS_CACHE"
OFF = "off"
DEFAULT_DIR = Path("~/.cache/cdc-iceberg/jvm")
WAIT_SECONDS = 120  # for the JVM to write the archive at exit (about 10 s here)


@dataclass(frozen=True)
class ClassCache:
    archive: Path  # the finished archive of this classpath
    dump_to: Path | None  # where this run writes it (None: it exists, this run uses it)

    def java_options(self) -> str:
        # The JVM's warnings and its own console output go to stderr (stdout ends with the job's summary, and the JVM
        # writes the archive after it); the archive's messages (classes it cannot hold, a classpath that no longer
        # matches) are dropped.
        logs = "-XX:+DisplayVMOutputToStderr -Xlog:disable -Xlog:all=warning,cds*=off:stderr"
        if self.dump_to is None:
            return f"{logs} -XX:SharedArchiveFile={self.archive}"
        return f"{logs} -XX:ArchiveClassesAtExit={self.dump_to}"


def file_stamp(path: str) -> str:
    """What a cache key holds of a file: its real path, size and modification time."""
    try:
        st = os.stat(path)
    except OSError:
        return f"{path}:missing"
    return f"{os.path.realpath(path)}:{st.st_size}:{int(st.st_mtime)}"


def java_binary(env: Mapping[str, str]) -> str:
    home = env.get("JAVA_HOME")
    return os.path.join(home, "bin", "java") if home else (shutil.which("java") or "java")


MIN_JAVA = 13  # -XX:ArchiveClassesAtExit (dynamic archives); Spark 3.5 also runs on Java 8 and 11


def java_major(java: str) -> int | None:
    """The major version of the JDK ``java`` belongs to, from its ``release`` file (None: unknown)."""
    release = Path(os.path.realpath(java)).parent.parent / "release"
    try:
        for line in release.read_text().splitlines():
            if line.startswith("JAVA_VERSION="):
                parts = line.split("=", 1)[1].strip().strip('"').split(".")
                return int(parts[1] if parts[0] == "1" else parts[0])
    except (OSError, ValueError, IndexError):
        return None
    return None


def spark_jars_dir(env: Mapping[str, str]) -> str:
    home = env.get("SPARK_HOME")
    if home:
        return os.path.join(home, "jars")
    import pyspark

    return os.path.join(os.path.dirname(pyspark.__file__), "jars")


def cache_key(java: str, spark_jars: list[str], conf: Mapping[str, str]) -> str:
    """A name for the archive of this JVM and classpath (pure but for the files' size and time)."""
    parts = [file_stamp(java), *(file_stamp(j) for j in sorted(spark_jars)),
             *(file_stamp(j) for j in sorted(filter(None, conf.get("spark.jars", "").split(",")))),
             *(conf.get(k, "") for k in ("spark.driver.extraJavaOptions", "spark.driver.extraClassPath",
                                         "spark.driver.memory")),  # the heap's size decides compressed pointers
             *(file_stamp(j) for j in conf.get("spark.driver.extraClassPath", "").split(os.pathsep) if j),
             *(os.environ.get(k, "") for k in ("JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS"))]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:20]


def class_cache(conf: Mapping[str, str], user_java_options: bool, env: Mapping[str, str] | None = None) \
        -> ClassCache | None:
    """The archive for a job about to start its JVM with ``conf`` (None: off, the YAML chose the JVM options, or a
    Java without dynamic archives)."""
    env = os.environ if env is None else env
    where = env.get(ENV, "")
    if where.strip().lower() == OFF or user_java_options:
        return None
    java = java_binary(env)
    if (java_major(java) or 0) < MIN_JAVA:
        return None
    root = Path(where or DEFAULT_DIR).expanduser()
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError:  # an unwritable home: run without
        return None
    _drop_stale(root)
    jars = glob.glob(os.path.join(spark_jars_dir(env), "*.jar"))
    archive = root / f"{cache_key(java, jars, conf)}.jsa"
    if archive.is_file():
        return ClassCache(archive, None)
    return ClassCache(archive, root / f"{archive.stem}.{os.getpid()}.partial")


# The archive of the JVM this process started (one per process: PySpark starts one JVM), set by ``cdc.spark.session``.
started: ClassCache | None = None


def _drop_stale(root: Path, now: float | None = None) -> None:
    """Remove archives a run began and never published (it was killed): older than an hour, their writer gone."""
    import time

    for partial in root.glob("*.partial"):
        pid = partial.suffixes[-2].lstrip(".") if len(partial.suffixes) >= 2 else ""
        try:
            old = (now or time.time()) - partial.stat().st_mtime > 3600
            if old and not (pid.isdigit() and os.path.exists(f"/proc/{pid}")):
                partial.unlink()
        except OSError:
            pass


def finish() -> None:
    """At the end of the job process (whatever its result): for a run that writes the archive, stop Spark, let the
    JVM exit and write it, and publish it (rename). Anything that goes wrong leaves no archive; the next run tries
    again. Afterwards this process has no JVM."""
    global started
    cache, started = started, None
    if cache is None or cache.dump_to is None:
        return
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    try:
        if SparkContext._active_spark_context is not None:
            SparkContext._active_spark_context.stop()
        if proc is None:
            return
        proc.stdin.close()  # the JVM exits when its stdin closes, and writes the archive on its way out
        code = proc.wait(timeout=WAIT_SECONDS)
        SparkContext._gateway = SparkContext._jvm = None  # gone: a later session would start a new one
        if code == 0 and cache.dump_to.is_file() and cache.dump_to.stat().st_size > 0:
            os.replace(cache.dump_to, cache.archive)
    except Exception as exc:  # noqa: BLE001 - the job's own result is already reported
        print(f"JVM class cache: not written ({type(exc).__name__}: {exc})", file=sys.stderr)
    finally:
        if cache.dump_to.exists():
            cache.dump_to.unlink(missing_ok=True)


def prepare(conf: dict[str, str], user_java_options: bool) -> dict[str, str]:
    """``conf`` for the JVM this process is about to start, with its class archive (kept in ``started`` for
    ``finish``), and the choice logged; ``conf`` unchanged when the JVM runs already or the archive is off."""
    global started
    from pyspark import SparkContext

    if SparkContext._gateway is not None:  # the JVM runs already: its options are set
        return conf
    started = class_cache(conf, user_java_options)
    if started is not None:
        import logging


        setup_logging()
        logging.getLogger("cdc.session").info(
            "JVM class cache: %s %s", "using" if started.dump_to is None else
            "this run writes (once per classpath, when it ends)", started.archive)
    return with_cache(conf, started)


def with_cache(conf: dict[str, str], cache: ClassCache | None) -> dict[str, str]:
    """``conf`` with the archive's option added to the driver's JVM options (pure)."""
    if cache is None:
        return conf
    opts = " ".join(filter(None, (conf.get("spark.driver.extraJavaOptions", ""), cache.java_options())))
    return {**conf, "spark.driver.extraJavaOptions": opts}


__all__ = ["ENV", "ClassCache", "cache_key", "class_cache", "file_stamp", "finish", "prepare", "started", "with_cache"]
