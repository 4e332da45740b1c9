"""Outages and refusals of the REST catalog and its S3 warehouse give the documented exit codes, as the JDBC
catalog's do: unreachable → 75 (``CatalogUnavailable``, retried), bad credentials → 2 (``CatalogError``, a person
must act). Real servers throughout: Apache Iceberg's REST catalog server and the moto S3 server checking IAM keys;
the REST credential is checked by ``devtools.rest_gateway`` (the stand-in for a catalog service's OAuth2 front: the
test server grants every client). No secret is printed."""

from __future__ import annotations

import pytest

from tests.integration import events
from tests.integration.cli import run_cli, summary_of
from tests.integration.events import pg
from tests.integration.iceberg.object_store import (
    config_of,
    env_of,
    error_line,
    ledger,
    rest_pipeline,
    secrets_of,
    write,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def own_s3():
    """A moto server of this test alone (it is stopped mid-test)."""
    from devtools.s3 import LocalS3

    with LocalS3(auth=True) as server:
        server.create_bucket("lake")
        yield server


@pytest.fixture
def own_rest(own_s3):
    from devtools.rest_catalog import LocalRESTCatalog

    with LocalRESTCatalog(warehouse="s3://lake/rest", s3=own_s3, auth=True) as server:
        yield server


def one_event(broker, raw, key: int = 1) -> None:
    events.produce(broker.bootstrap, raw["tables"][0]["topic"],
                   [pg("c", key, {"id": key, "name": f"n{key}", "bio": None}, 10 + key)])


def assert_no_secrets(res, *secrets: str) -> None:
    for secret in secrets:
        assert secret not in res.stdout + res.stderr


def test_rest_catalog_unreachable_exits_75(broker, s3, rest, tmp_path):
    """Nothing listens at the catalog's uri (a catalog service down): 75, one line naming the catalog."""
    from devtools.broker import free_port

    raw = rest_pipeline(broker, s3, rest)
    raw["catalog"]["uri"] = f"http://127.0.0.1:{free_port()}"
    one_event(broker, raw)
    res = run_cli(write(raw, tmp_path), env=env_of(s3, rest))
    assert res.returncode == 75, res.stderr[-3000:]
    line = error_line(res)
    assert line.startswith("ERROR [CatalogUnavailable]") and "rest catalog" in line, line
    assert_no_secrets(res, *secrets_of(s3, rest))


def test_rest_catalog_server_down_behind_its_gateway_exits_75(broker, own_s3, own_rest, tmp_path, monkeypatch):
    """The catalog's front answers 503 (its server stopped after a committed batch): 75; back up, the next run
    commits the rest."""
    # the REST client retries a 503 (5 times, backing off, by default): once is enough here
    raw = rest_pipeline(broker, own_s3, own_rest, properties={"rest.client.max-retries": "1"})
    env = env_of(own_s3, own_rest)
    path = write(raw, tmp_path)
    one_event(broker, raw, 1)
    assert run_cli(path, env=env).returncode == 0
    own_rest.stop(keep_gateway=True)
    one_event(broker, raw, 2)
    res = run_cli(path, env=env)
    assert res.returncode == 75, res.stderr[-3000:]
    assert error_line(res).startswith("ERROR [CatalogUnavailable]"), res.stderr[-3000:]
    own_rest.start()
    again = run_cli(path, env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert summary_of(again)["tables"][0]["inserted"] == 1
    assert [(r["status"], r["start_offset"], r["end_offset"]) for r in ledger(config_of(path, env), env, monkeypatch)] == [
        ("committed", 0, 1), ("committed", 1, 2)]


def test_bad_rest_credential_exits_2(broker, s3, rest, tmp_path, monkeypatch):
    """A credential the catalog's OAuth2 endpoint refuses: 2, naming what to check; the result file (on S3) says
    the same, and no secret is anywhere."""
    raw = rest_pipeline(broker, s3, rest)
    one_event(broker, raw)
    wrong = "cdc-client:not-the-secret-5f4e3d"
    # the result file on the object store, as in cluster deploy mode (pyarrow's S3 file system; AWS_ENDPOINT_URL
    # names the local server for pyarrow and the AWS SDK alike)
    result_file = f"s3://lake/_cdc_results/{raw['pipeline']}.json"
    s3_env = {**env_of(s3, rest), "AWS_ENDPOINT_URL": s3.endpoint}
    res = run_cli(write(raw, tmp_path), env={**s3_env, "CDC_TEST_REST_CREDENTIAL": wrong,
                                             "CDC_RESULT_FILE": result_file})
    assert res.returncode == 2, res.stderr[-3000:]
    line = error_line(res)
    assert line.startswith("ERROR [CatalogError]") and "credential" in line, line
    assert_no_secrets(res, *secrets_of(s3, rest), "not-the-secret-5f4e3d")
    from cdc.common.result_file import read_text

    for k, v in s3_env.items():
        monkeypatch.setenv(k, v)
    result = read_text(result_file)  # what the Airflow operator reads back
    assert result is not None, s3.keys("lake", "_cdc_results/")
    assert "CatalogError" in result and "not-the-secret-5f4e3d" not in result and s3.secret_access_key not in result


def test_s3_down_exits_75_and_bad_s3_keys_exit_2(broker, own_s3, own_rest, tmp_path):
    """The warehouse's S3 endpoint refusing connections after a committed batch: 75. Keys S3 does not know (the
    job's environment, while the catalog server keeps its own): 2, naming the credentials to check."""
    # The catalog server retries a metadata read for minutes while S3 is down (Iceberg's refresh retries): the job
    # gives up on a REST call after rest.client.socket-timeout-ms, and its own S3 reads after two attempts
    raw = rest_pipeline(broker, own_s3, own_rest, properties={"rest.client.socket-timeout-ms": "20000",
                                                             "s3.retry.num-retries": "1"})
    env = env_of(own_s3, own_rest)
    path = write(raw, tmp_path)
    one_event(broker, raw, 1)
    first = run_cli(path, env=env)
    assert first.returncode == 0, first.stderr[-3000:]

    bad = {**env, "AWS_SECRET_ACCESS_KEY": "wrong-secret-0a1b2c", "AWS_ACCESS_KEY_ID": "AKIAWRONGKEY0000"}
    one_event(broker, raw, 2)
    refused = run_cli(path, env=bad)
    assert refused.returncode == 2, refused.stderr[-3000:]
    line = error_line(refused)
    assert line.startswith("ERROR [CatalogError]") and "credentials" in line, line
    assert_no_secrets(refused, *secrets_of(own_s3, own_rest), "wrong-secret-0a1b2c")

    secret = own_s3.secret_access_key
    own_s3.stop()
    down = run_cli(path, env=env)
    assert down.returncode == 75, down.stderr[-3000:]
    assert error_line(down).startswith("ERROR [CatalogUnavailable]"), down.stderr[-3000:]
    assert_no_secrets(down, secret, own_rest.credential)


def test_the_airflow_side_passes_a_bearer_token_through(s3, rest, monkeypatch):
    """``token`` (instead of ``credential``) reaches pyiceberg's REST client: the gateway's token reads the table, a
    wrong one is refused (401) with no table read."""
    import pyarrow as pa
    from pyiceberg.exceptions import UnauthorizedError

    from cdc.config.model import CatalogConfig
    from cdc_airflow.monitor.ledger import load_table
    from tests.conftest import unique
    from tests.integration.iceberg.object_store import s3_properties

    for k, v in s3.env().items():
        monkeypatch.setenv(k, v)
    good = CatalogConfig(name="lake", type="rest", warehouse="s3://lake/rest",
                         properties={**s3_properties(s3), "uri": rest.uri, "token": rest._gateway.token})
    from pyiceberg.catalog import load_catalog

    from cdc_airflow.monitor.ledger import catalog_properties

    writer = load_catalog("lake", **catalog_properties(good))
    ns = unique("tok")
    writer.create_namespace(ns)
    writer.create_table(f"{ns}.t", pa.schema([("id", pa.int64())])).append(pa.table({"id": [1, 2, 3]}))
    table = load_table(good, f"{ns}.t")
    assert sorted(r["id"] for r in table.scan().to_arrow().to_pylist()) == [1, 2, 3]
    bad = CatalogConfig(name="lake", type="rest", warehouse="s3://lake/rest",
                        properties={**good.properties, "token": "not-a-token"})
    with pytest.raises(UnauthorizedError):
        load_table(bad, f"{ns}.t")
