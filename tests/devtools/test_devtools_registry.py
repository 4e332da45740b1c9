"""LocalSchemaRegistry driven by confluent-kafka's real SchemaRegistryClient over HTTP."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from devtools.broker import free_port
from devtools.registry import CONTENT_TYPE, LocalSchemaRegistry

V1 = {"type": "record", "name": "User", "namespace": "t", "fields": [{"name": "id", "type": "int"}]}
V2 = {**V1, "fields": V1["fields"] + [{"name": "email", "type": ["null", "string"], "default": None}]}


def _avro(schema: dict) -> Schema:
    return Schema(json.dumps(schema), "AVRO")


@pytest.fixture
def client(registry: LocalSchemaRegistry) -> SchemaRegistryClient:
    return SchemaRegistryClient(registry.client_config)


def test_register_versions_latest_and_get_by_id(client: SchemaRegistryClient, request: pytest.FixtureRequest) -> None:
    subject = f"{request.node.name}-value"
    id1 = client.register_schema(subject, _avro(V1))
    id2 = client.register_schema(subject, _avro(V2))
    assert id1 != id2
    # Same schema again (fresh client: no cache, whitespace differs) -> same id, no new version.
    fresh = SchemaRegistryClient({"url": client._rest_client.base_urls[0]})
    assert fresh.register_schema(subject, Schema(json.dumps(V1, indent=2), "AVRO")) == id1
    assert fresh.get_versions(subject) == [1, 2]
    latest = fresh.get_latest_version(subject)
    assert (latest.version, latest.schema_id, json.loads(latest.schema.schema_str)) == (2, id2, V2)
    assert json.loads(fresh.get_schema(id1).schema_str) == V1
    assert fresh.get_schema(id2, subject_name=subject).schema_type == "AVRO"
    assert fresh.get_version(subject, 1).schema_id == id1
    found = fresh.lookup_schema(subject, _avro(V1))
    assert (found.version, found.schema_id, found.subject) == (1, id1, subject)
    assert [(v.subject, v.version) for v in fresh.get_schema_versions(id2)] == [(subject, 2)]
    assert subject in fresh.get_subjects()
    # Same schema under another subject keeps the global id.
    assert fresh.register_schema(f"{subject}-other", _avro(V1)) == id1


def test_not_found_errors_use_confluent_codes(client: SchemaRegistryClient) -> None:
    with pytest.raises(SchemaRegistryError) as err:
        client.get_latest_version("nope-value")
    assert (err.value.http_status_code, err.value.error_code) == (404, 40401)
    with pytest.raises(SchemaRegistryError) as err:
        client.get_schema(987654)
    assert (err.value.http_status_code, err.value.error_code) == (404, 40403)
    client.register_schema("lookup-miss", _avro(V1))
    with pytest.raises(SchemaRegistryError) as err:
        client.lookup_schema("lookup-miss", _avro(V2))
    assert err.value.error_code == 40403
    with pytest.raises(SchemaRegistryError) as err:
        client.get_version("lookup-miss", 9)
    assert err.value.error_code == 40402


def test_delete_subject_soft_and_permanent(client: SchemaRegistryClient) -> None:
    sid = client.register_schema("to-delete", _avro(V1))
    assert client.delete_subject("to-delete") == [1]
    assert "to-delete" not in client.get_subjects()
    with pytest.raises(SchemaRegistryError):
        client.get_versions("to-delete")
    assert json.loads(client.get_schema(sid).schema_str) == V1  # ids survive subject deletion
    assert client.delete_subject("to-delete", permanent=True) == [1]


def test_compatibility_config_stored(client: SchemaRegistryClient) -> None:
    assert client.get_compatibility() == "BACKWARD"
    client.set_compatibility(subject_name="cfg-subject", level="NONE")
    assert client.get_compatibility("cfg-subject") == "NONE"
    with pytest.raises(SchemaRegistryError) as err:
        client.get_compatibility("cfg-unset")
    assert err.value.error_code == 40408


def test_raw_http_content_type_and_error_body(registry: LocalSchemaRegistry) -> None:
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(f"{registry.url}/subjects/missing/versions")
    assert err.value.code == 404
    assert err.value.headers["Content-Type"] == CONTENT_TYPE
    assert json.loads(err.value.read()) == {"error_code": 40401, "message": "Subject 'missing' not found."}


def test_avro_serializer_roundtrip(client: SchemaRegistryClient) -> None:
    ser = AvroSerializer(client, json.dumps(V2))
    de = AvroDeserializer(client)
    ctx = SerializationContext("users", MessageField.VALUE)
    data = ser({"id": 7, "email": "a@b"}, ctx)
    assert data[0] == 0 and int.from_bytes(data[1:5], "big") == client.get_latest_version("users-value").schema_id
    assert de(data, ctx) == {"id": 7, "email": "a@b"}
    assert AvroDeserializer(SchemaRegistryClient({"url": client._rest_client.base_urls[0]}))(data, ctx)["id"] == 7


def test_basic_auth() -> None:
    with LocalSchemaRegistry(username="alice", password="s3cret") as reg:
        ok = SchemaRegistryClient(reg.client_config)
        assert ok.register_schema("auth-value", _avro(V1)) == 1
        for conf in ({"url": reg.url}, {"url": reg.url, "basic.auth.user.info": "alice:wrong"}):
            with pytest.raises(SchemaRegistryError) as err:
                SchemaRegistryClient(conf).get_subjects()
            assert err.value.http_status_code == 401


def test_cli_serve(tmp_path: Path) -> None:
    port = free_port()
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [sys.executable, "-m", "devtools.registry", "serve", "--port", str(port)],
        cwd=repo, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == f"http://127.0.0.1:{port}"
        client = SchemaRegistryClient({"url": f"http://127.0.0.1:{port}"})
        assert client.register_schema("cli-value", _avro(V1)) == 1
    finally:
        proc.terminate()
        assert proc.wait(10) == 0
