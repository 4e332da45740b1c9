"""The job through a SASL_SSL listener of a real broker (``LocalBroker(security="sasl_ssl")``: SCRAM-SHA-512 over
TLS, a CA made at start): librdkafka's settings come from the pipeline YAML's ``kafka:`` section, the password from
``${ENV}``; it never shows in the job's output, its result file, the ledger or an error, also when it is wrong (an
authentication failure is a mistake a person must fix: exit 2, naming the broker and the mechanism)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import REPO
from tests.integration.cli import finish, start_job, summary_of
from tests.integration.events import pg, produce, row
from tests.scenarios.reliability import cli, ledger_rows, pipeline, table_rows, topic, write

pytestmark = pytest.mark.integration

ENV = "CDC_TEST_SASL_PASSWORD"


@pytest.fixture(scope="module")
def secured():
    from devtools.broker import LocalBroker

    out = REPO / "test-output"
    out.mkdir(exist_ok=True)
    b = LocalBroker(security="sasl_ssl", log_path=out / "kafka-sasl.log").start()
    try:
        yield b
    finally:
        b.stop()


def sasl_pipeline(secured, warehouse, **batch) -> dict:
    raw = pipeline(secured, warehouse)
    conf = secured.client_conf()
    raw["kafka"] = {**conf, "sasl.password": "${" + ENV + "}"}
    raw["batch"].update(batch)
    return raw


def test_the_job_ingests_through_sasl_ssl_and_never_shows_the_password(spark, secured, warehouse, tmp_path):
    from confluent_kafka import Producer

    raw = sasl_pipeline(secured, warehouse)
    producer = Producer(secured.client_conf())  # the SASL_SSL listener takes writes as well
    for k, v in [pg("c", i, row(i, f"n{i}"), 10 + i) for i in range(4)]:
        producer.produce(topic(raw), key=k, value=v)
    assert producer.flush(20) == 0
    result = tmp_path / "result.json"
    res = finish(start_job(write(raw, tmp_path), env={ENV: secured.sasl_password, "CDC_RESULT_FILE": str(result)}))
    assert res.returncode == 0, res.stderr[-3000:]
    summary = summary_of(res)
    assert summary["tables"][0]["status"] == "committed" and summary["tables"][0]["events_read"] == 4
    assert {k: r["name"] for k, r in table_rows(spark, raw).items()} == {i: f"n{i}" for i in range(4)}
    ledger = ledger_rows(spark, raw)
    assert [r.status for r in ledger] == ["committed"]
    for text in (res.stdout, res.stderr, result.read_text(), json.dumps([r.asDict() for r in ledger], default=str)):
        assert secured.sasl_password not in text


def test_a_wrong_password_is_a_terminal_error_naming_the_broker_and_mechanism_not_the_secret(
        spark, secured, warehouse, tmp_path, monkeypatch, capfd):
    raw = sasl_pipeline(secured, warehouse, read_timeout_seconds=4)
    produce(secured.bootstrap, topic(raw), [pg("c", 1, row(1, "a"), 10)])  # through the plaintext listener
    wrong = "not-the-password-" + secured.sasl_password[:6]
    monkeypatch.setenv(ENV, wrong)
    result = tmp_path / "result.json"
    monkeypatch.setenv("CDC_RESULT_FILE", str(result))
    res = cli(raw, tmp_path)
    out, err = capfd.readouterr()  # librdkafka's own log lines included (file descriptor 2)
    assert res.code == 2, res.stderr
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("ERROR")]
    assert len(errors) == 1, res.stderr
    line = errors[0]
    assert line.startswith("ERROR [ConfigError]") and "refused to authenticate user cdc" in line
    assert secured.client_conf()["bootstrap.servers"] in line and "SCRAM-SHA-512" in line and "SASL_SSL" in line
    assert "kafka.sasl.password" in line
    for text in (res.stdout, res.stderr, out, err, result.read_text()):
        assert wrong not in text and secured.sasl_password not in text
    assert ledger_rows(spark, raw) == []  # nothing claimed


def test_a_ca_that_did_not_sign_the_brokers_certificate_is_a_terminal_error_naming_ssl_ca_location(secured, tmp_path):
    from cdc.common.errors import ConfigError
    from cdc.kafka.offsets import high_watermarks
    from devtools.broker_security import make_tls

    other_ca = make_tls(tmp_path).ca_pem  # a CA of its own: the broker's certificate is not its
    conf = {**secured.client_conf(), "ssl.ca.location": str(other_ca)}
    with pytest.raises(ConfigError) as refused:
        high_watermarks(conf, "any", timeout=4)
    message = str(refused.value)
    assert "the TLS handshake with Kafka at" in message and "kafka.ssl.ca.location" in message
    assert secured.sasl_password not in message
