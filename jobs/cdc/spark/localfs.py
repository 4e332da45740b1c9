"""A local file system for a local master's JVM that sets file permissions without starting a process.

Hadoop's ``file:`` file system sets the permission of every file it creates, and without Hadoop's native library
(pyspark ships none) it does so by running ``chmod`` in a child process: about 7 ms of CPU per file here. Every
Iceberg commit creates five to ten files (data, manifests, manifest list, metadata, version hint, and their ``.crc``
checksums), so a job of 20 small tables ran about 1,800 ``chmod`` processes per batch (issue 16, target 3; JVM CPU
of a warm 20-table batch 72 → 63 s without them).

``ForklessLocalFileSystem`` is Hadoop's own ``LocalFileSystem`` (checksums and all) whose raw file system sets the
same POSIX permissions with ``java.nio`` instead (a sticky bit, and a directory holding a setuid/setgid bit, which
``chmod`` keeps and ``chmod(2)`` would drop, still go to ``chmod``). There is no Java compiler in a JRE, so the class
is compiled once per JVM and Hadoop jar with Janino, the compiler Spark itself ships, into
``~/.cache/cdc-iceberg/localfs/<key>/cdc-localfs.jar`` (``CDC_LOCAL_FS``: another directory, or ``off``). Only a
local master's JVM started by this process or by the Airflow operator's ``spark-submit`` gets it (the jar first on the
driver's and executors' ``extraClassPath``, the class as ``spark.hadoop.fs.file.impl``), and only when the settings
name no ``fs.file.impl`` of their own; a cluster's executors would not have the jar, and object stores never run
``chmod``. If the class cannot be built the job runs on Hadoop's file system, with a warning.
"""

from __future__ import annotations

import glob
import hashlib
import logging
import os
import re
import subprocess
import tempfile
import zipfile
from pathlib import Path
from typing import Mapping

from cdc.spark.jvm_cache import file_stamp, java_binary, spark_jars_dir

ENV = "CDC_LOCAL_FS"
OFF = "off"
DEFAULT_DIR = Path("~/.cache/cdc-iceberg/localfs")
CLASS = "cdc.hadoop.ForklessLocalFileSystem"
IMPL_KEY = "spark.hadoop.fs.file.impl"
CLASSPATH_KEY = "spark.driver.extraClassPath"
CLASSPATH_KEYS = (CLASSPATH_KEY, "spark.executor.extraClassPath")
JAR = "cdc-localfs.jar"

SOURCE = """\
package cdc.hadoop;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermissions;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/** Hadoop's LocalFileSystem, setting permissions in-process (cdc.spark.localfs). */
public class ForklessLocalFileSystem extends LocalFileSystem {
    public ForklessLocalFileSystem() {
        super(new Raw());
    }

    public static class Raw extends RawLocalFileSystem {
        public void setPermission(Path p, FsPermission permission) throws IOException {
            String mode = permission.toString();
            java.nio.file.Path path = pathToFile(p).toPath();
            // chmod with a four-digit mode keeps a directory's setuid/setgid bits (3072 = 06000); chmod(2) would not
            if (permission.getStickyBit() || mode.length() != 9
                    || (Files.isDirectory(path) && (((Integer) Files.getAttribute(path, "unix:mode")).intValue() & 3072) != 0)) {
                super.setPermission(p, permission);
                return;
            }
            Files.setPosixFilePermissions(path, PosixFilePermissions.fromString(mode));
        }
    }
}
"""

log = logging.getLogger("cdc.session")


def jar_key(java: str, hadoop_jars: list[str]) -> str:
    """A name for the jar built with this ``java`` against these Hadoop jars (pure but for the files' stamps)."""

    parts = [SOURCE, file_stamp(java), *(file_stamp(j) for j in sorted(hadoop_jars))]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:20]


def build(java: str, spark_jars: str, out: Path) -> None:
    """Compile ``SOURCE`` with Janino from ``spark_jars`` and write the jar to ``out`` (atomically)."""
    jars = sorted(glob.glob(os.path.join(spark_jars, "*.jar")))
    compiler = [j for j in jars if os.path.basename(j).startswith(("janino-", "commons-compiler-"))]
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        src = Path(tmp, "src", *CLASS.split(".")).with_suffix(".java")
        src.parent.mkdir(parents=True)
        src.write_text(SOURCE)
        classes = Path(tmp, "classes")
        classes.mkdir()
        done = subprocess.run(
            [java, "-cp", os.pathsep.join(compiler), "org.codehaus.commons.compiler.samples.CompilerDemo",
             "-d", str(classes), "-classpath", os.pathsep.join(jars), str(src)],
            capture_output=True, text=True, timeout=120)
        built = sorted(classes.rglob("*.class"))
        if done.returncode != 0 or not built:
            raise RuntimeError(f"Janino: {(done.stderr or done.stdout).strip()[-500:] or 'no class written'}")
        partial = Path(tmp, JAR)
        with zipfile.ZipFile(partial, "w") as jar:
            for f in built:
                jar.write(f, f.relative_to(classes).as_posix())
        try:  # published once: a JVM class archive (cdc.spark.jvm_cache) holds the jar's time, a rebuilt one would void it
            os.link(partial, out)
        except FileExistsError:
            pass


def jar(env: Mapping[str, str] | None = None) -> Path | None:
    """The built jar for this JVM (built now if missing); None when off or it cannot be built (logged)."""

    env = os.environ if env is None else env
    where = env.get(ENV, "")
    if where.strip().lower() == OFF:
        return None
    java, spark_jars = java_binary(env), spark_jars_dir(env)
    hadoop = glob.glob(os.path.join(spark_jars, "hadoop-*.jar"))
    try:  # absolute: local-cluster executors resolve their classpath in work directories of their own
        out = Path(where or DEFAULT_DIR).expanduser().resolve() / jar_key(java, hadoop) / JAR
        if out.is_file():
            return out
        build(java, spark_jars, out)
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:  # RuntimeError: also no home directory
        log.warning("local file system: %s not built (%s); Hadoop's own is used (one chmod process per file)",
                    CLASS, exc)
        return None
    return out


def spark_defaults(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The settings of ``spark-defaults.conf`` (``SPARK_CONF_DIR``, else ``SPARK_HOME/conf``, else pyspark's)."""

    env = os.environ if env is None else env
    conf_dir = env.get("SPARK_CONF_DIR") or os.path.join(os.path.dirname(spark_jars_dir(env)), "conf")
    out: dict[str, str] = {}
    try:
        lines = Path(conf_dir, "spark-defaults.conf").read_text().splitlines()
    except OSError:
        return out
    for line in lines:  # Java properties: "key value", "key=value" or "key: value"
        line = line.strip()
        if line and not line.startswith(("#", "!")):
            key, *value = re.split(r"\s*[=:]\s*|\s+", line, maxsplit=1)
            out[key] = value[0].strip() if value else ""
    return out


def with_local_fs(conf: Mapping[str, str], built: Path | None, defaults: Mapping[str, str] | None = None) \
        -> dict[str, str]:
    """``conf`` with the forkless file system on the driver's and the executors' classpath (``local-cluster[...]``
    runs executors in JVMs of their own, on this machine) and as ``fs.file.impl`` (pure); unchanged without a jar or
    when the settings name a ``fs.file.impl`` already. A classpath the settings do not set is taken from
    ``defaults`` (``spark-defaults.conf``, which a ``--conf`` of the same key would replace)."""
    if built is None or IMPL_KEY in conf:
        return dict(conf)
    out = {**conf, IMPL_KEY: CLASS}
    for key in CLASSPATH_KEYS:
        rest = conf.get(key, (defaults or {}).get(key, ""))
        out[key] = os.pathsep.join(filter(None, (str(built), rest)))
    return out


__all__ = ["CLASS", "ENV", "build", "jar", "jar_key", "spark_defaults", "with_local_fs"]
