"""``cdc.spark.localfs`` for real: the jar Janino builds, and a local JVM that writes an Iceberg table with it where no
``chmod`` program exists (Hadoop's own file system cannot)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from cdc.spark import localfs

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]

# A Spark job run where PATH has every program of /usr/bin and /bin but chmod: it writes an Iceberg table and reports
# the permissions of what it wrote, and whether Hadoop's own raw local file system can set a permission there.
_JOB = r"""
import json, os, stat, sys
from pathlib import Path
from cdc.config.load import parse_config
from cdc.spark.session import build_session
wh = Path(sys.argv[1])
cfg = parse_config({"pipeline": "fs", "kafka": {"bootstrap.servers": "127.0.0.1:1"}, "format": "json",
                    "catalog": {"name": "lake", "type": "hadoop", "warehouse": str(wh)},
                    "spark": {"spark.sql.shuffle.partitions": "1"}, "tables": [{"topic": "x", "target": "a.b"}]})
spark = build_session(cfg, "cdc-localfs-test", master="local[1]")
out = {"impl": spark.sparkContext._jsc.hadoopConfiguration().get("fs.file.impl")}
try:
    spark.sql("CREATE TABLE lake.ns.t (id BIGINT) USING iceberg")
    spark.sql("INSERT INTO lake.ns.t VALUES (1), (2)")
    out["rows"] = spark.table("lake.ns.t").count()
except Exception as exc:
    out["error"] = str(exc).splitlines()[0][:300]
files = [p for p in wh.rglob("*") if p.is_file()]
out["modes"] = sorted({oct(stat.S_IMODE(p.stat().st_mode)) for p in files})
out["files"] = len(files)
jvm = spark.sparkContext._jvm
probe = wh / "probe"
probe.write_text("x")
raw = jvm.org.apache.hadoop.fs.RawLocalFileSystem()
raw.initialize(jvm.java.net.URI("file:///"), spark.sparkContext._jsc.hadoopConfiguration())
try:
    raw.setPermission(jvm.org.apache.hadoop.fs.Path(str(probe)), jvm.org.apache.hadoop.fs.permission.FsPermission("600"))
    out["hadoop_chmod"] = "ok"
except Exception as exc:
    out["hadoop_chmod"] = "failed"
print(json.dumps(out))
spark.stop()
"""


def path_without_chmod(where: Path) -> str:
    where.mkdir()
    for d in ("/usr/local/bin", "/usr/bin", "/bin"):
        for exe in Path(d).glob("*") if Path(d).is_dir() else ():
            link = where / exe.name
            if exe.name != "chmod" and not link.exists():
                link.symlink_to(exe)
    return str(where)


def test_the_jar_holds_the_file_system_class(tmp_path: Path) -> None:
    built = localfs.jar({localfs.ENV: str(tmp_path)})
    assert built is not None and built.is_file()
    import zipfile

    names = zipfile.ZipFile(built).namelist()
    assert "cdc/hadoop/ForklessLocalFileSystem.class" in names and "cdc/hadoop/ForklessLocalFileSystem$Raw.class" in names
    assert localfs.jar({localfs.ENV: str(tmp_path)}) == built  # built once


def test_a_local_jvm_writes_iceberg_files_with_hadoops_permissions_and_no_chmod_process(tmp_path: Path) -> None:
    """Fails without ``cdc.spark.localfs``: Hadoop's file system runs ``chmod`` for every file it creates ("Cannot run
    program chmod"). The files get the permissions Hadoop gives them (0644 under umask 022)."""
    env = {**os.environ, "PATH": path_without_chmod(tmp_path / "bin"), "PYSPARK_PYTHON": sys.executable,
           "CDC_JVM_CLASS_CACHE": "off"}
    wh = tmp_path / "wh"
    done = subprocess.run([sys.executable, "-c", _JOB, str(wh)], env=env, capture_output=True, text=True,
                          timeout=300, cwd=str(REPO))
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["hadoop_chmod"] == "failed"  # the check can fail: Hadoop's own would need chmod here
    assert out.get("error") is None and out["rows"] == 2, out
    assert out["impl"] == localfs.CLASS
    assert out["files"] >= 6 and out["modes"] == [oct(0o666 & ~0o022)]


def test_permissions_are_set_in_process_and_a_sticky_bit_still_reaches_chmod(spark, tmp_path: Path) -> None:
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    fs = jvm.org.apache.hadoop.fs.FileSystem.getLocal(conf)
    assert fs.getClass().getName() == localfs.CLASS  # the session's file: file system
    f, d = tmp_path / "f", tmp_path / "d"
    f.write_text("x")
    d.mkdir()
    perm = jvm.org.apache.hadoop.fs.permission.FsPermission
    fs.setPermission(jvm.org.apache.hadoop.fs.Path(str(f)), perm("640"))
    fs.setPermission(jvm.org.apache.hadoop.fs.Path(str(d)), perm("1777"))
    assert stat.S_IMODE(f.stat().st_mode) == 0o640
    assert stat.S_IMODE(d.stat().st_mode) == 0o1777


def test_a_directory_keeps_the_setgid_bit_it_inherits_as_with_chmod(spark, tmp_path: Path) -> None:
    """Hadoop sets every directory it creates to 0755 (umask 022) with ``chmod 0755``, which keeps a setgid bit the
    directory inherited from its parent (a warehouse under a shared group's directory); ``chmod(2)`` would drop it."""
    jvm = spark.sparkContext._jvm
    fs = jvm.org.apache.hadoop.fs.FileSystem.getLocal(spark.sparkContext._jsc.hadoopConfiguration())
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o2775)
    assert fs.mkdirs(jvm.org.apache.hadoop.fs.Path(str(shared / "ns" / "table")))
    for d in (shared / "ns", shared / "ns" / "table"):
        assert stat.S_IMODE(d.stat().st_mode) == 0o2755, oct(d.stat().st_mode)
