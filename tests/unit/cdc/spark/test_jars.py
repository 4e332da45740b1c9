"""Jars are checked before a JVM starts (``cdc.spark.jars.preflight``): a missing file or an unknown coordinate is a
person's to fix (exit 2), a repository out of reach is transient (exit 75); each message names the jar and where it
was looked for. The repository is a fake probe except in the last test, a real closed loopback port."""

from __future__ import annotations

import socket

import pytest

from cdc.common.errors import ConfigError
from cdc.spark import jars


@pytest.fixture(autouse=True)
def empty_caches(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.m2, no ~/.ivy2: every coordinate must be resolved


def test_a_missing_jar_file_is_named_before_spark_starts(tmp_path) -> None:
    there = tmp_path / "there.jar"
    there.write_bytes(b"PK")
    jars.preflight({"spark.jars": str(there)})
    with pytest.raises(ConfigError, match=r"jar file /nope/postgresql.jar \(spark.jars\) does not exist"):
        jars.preflight({"spark.jars": f"{there},/nope/postgresql.jar"})


def test_a_coordinate_no_repository_has_is_a_config_error_naming_the_urls() -> None:
    with pytest.raises(ConfigError, match=r"jar org.example:nope:1 .* in no repository: "
                                          r"https://repo1.maven.org/maven2/org/example/nope/1/nope-1.jar \(HTTP 404\)"):
        jars.preflight({"spark.jars.packages": "org.example:nope:1"}, probe=lambda url, t: 404)
    with pytest.raises(ConfigError, match="not group:artifact:version"):
        jars.preflight({"spark.jars.packages": "iceberg-runtime"}, probe=lambda url, t: 200)


def test_a_repository_out_of_reach_is_retryable_and_a_cached_jar_needs_none(tmp_path) -> None:
    def down(url, timeout):
        raise OSError("Name or service not known")

    with pytest.raises(jars.JarsUnavailable, match=r"iceberg-spark-runtime.*not in the local caches.*"
                                                   r"https://repo1.maven.org/maven2 \(Name or service not known\)") as e:
        jars.preflight({"spark.jars.packages": jars.ICEBERG_SPARK_RUNTIME}, probe=down)
    assert e.value.exit_code == 75
    jars.preflight({"spark.jars.packages": jars.ICEBERG_SPARK_RUNTIME}, probe=lambda url, t: 200)  # found: fine
    ivy = tmp_path / "ivy"
    (ivy / "jars").mkdir(parents=True)
    (ivy / "jars" / "org.apache.iceberg_iceberg-spark-runtime-3.5_2.12-1.10.2.jar").write_bytes(b"PK")
    jars.preflight({"spark.jars.packages": jars.ICEBERG_SPARK_RUNTIME, "spark.jars.ivy": str(ivy)}, probe=down)
    jars.preflight({"spark.jars.packages": "a:b:1", "spark.jars.ivySettings": "/etc/ivy.xml"}, probe=down)  # theirs
    m2 = tmp_path / ".m2" / "repository" / "org" / "example" / "x" / "1"  # Maven's local repository (HOME=tmp_path)
    m2.mkdir(parents=True)
    (m2 / "x-1.jar").write_bytes(b"PK")
    jars.preflight({"spark.jars.packages": "org.example:x:1"}, probe=down)


def test_a_closed_repository_port_is_retryable_naming_the_repository() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    repo = f"http://127.0.0.1:{port}/maven2"
    with pytest.raises(jars.JarsUnavailable, match=rf"{repo} \("):
        jars.preflight({"spark.jars.packages": "org.example:x:1", "spark.jars.repositories": repo},
                       probe=lambda url, t: jars._head(url, t) if url.startswith(repo) else 404)


def test_credentials_in_a_repository_url_are_never_shown() -> None:
    def down(url, timeout):
        raise OSError("timed out")

    with pytest.raises(jars.JarsUnavailable) as e:
        jars.preflight({"spark.jars.packages": "org.example:x:1",
                        "spark.jars.repositories": "https://deploy:s3cret@repo.example.com/maven"}, probe=down)
    assert "s3cret" not in str(e.value) and "https://***@repo.example.com/maven" in str(e.value)
