"""The registry's REST API as pure code (no sockets): ids, versions, deletes and Confluent error codes."""

from __future__ import annotations

import json

import pytest

from devtools.registry_api import RegistryError, RegistryState, route

V1 = json.dumps({"type": "record", "name": "User", "fields": [{"name": "id", "type": "int"}]})
V1_SPACED = json.dumps(json.loads(V1), indent=4)  # same schema, different whitespace
V2 = json.dumps({"type": "record", "name": "User", "fields": [{"name": "id", "type": "long"}]})


def call(state: RegistryState, method: str, path: str, body: object = None, **query: str) -> object:
    status, payload = route(state, method, [p for p in path.split("/") if p], query, body)
    assert status == 200
    return payload


def error_code(state: RegistryState, method: str, path: str, body: object = None, **query: str) -> int:
    with pytest.raises(RegistryError) as err:
        route(state, method, [p for p in path.split("/") if p], query, body)
    return err.value.code


def test_ids_are_global_and_versions_per_subject() -> None:
    s = RegistryState()
    a = call(s, "POST", "subjects/a-value/versions", {"schema": V1})
    b = call(s, "POST", "subjects/b-value/versions", {"schema": V1_SPACED})
    again = call(s, "POST", "subjects/a-value/versions", {"schema": V1})
    v2 = call(s, "POST", "subjects/a-value/versions", {"schema": V2})
    assert a == b == again == {"id": 1} and v2 == {"id": 2}
    assert call(s, "GET", "subjects/a-value/versions") == [1, 2]
    assert call(s, "GET", "subjects/a-value/versions/latest")["id"] == 2  # type: ignore[index]
    assert call(s, "GET", "schemas/ids/1/subjects") == ["a-value", "b-value"]
    assert call(s, "POST", "subjects/b-value", {"schema": V1})["version"] == 1  # type: ignore[index]


def test_soft_then_permanent_delete() -> None:
    s = RegistryState()
    call(s, "POST", "subjects/a/versions", {"schema": V1})
    assert call(s, "DELETE", "subjects/a") == [1]
    assert call(s, "GET", "subjects") == [] and call(s, "GET", "subjects", deleted="true") == ["a"]
    assert error_code(s, "GET", "subjects/a/versions") == 40401
    call(s, "DELETE", "subjects/a", permanent="true")
    assert call(s, "GET", "subjects", deleted="true") == []
    assert call(s, "GET", "schemas/ids/1") == {"schema": V1}  # schema ids outlive subjects, as in Confluent


def test_confluent_error_codes() -> None:
    s = RegistryState()
    assert error_code(s, "GET", "schemas/ids/7") == 40403
    call(s, "POST", "subjects/a/versions", {"schema": V1})
    assert error_code(s, "GET", "subjects/a/versions/9") == 40402
    assert error_code(s, "POST", "subjects/a/versions", {"schema": "{not json"}) == 42201
    assert error_code(s, "PUT", "config", {"compatibility": "SOMETIMES"}) == 42203
    assert error_code(s, "GET", "config/a") == 40408
    assert call(s, "GET", "config/a", defaultToGlobal="true") == {"compatibilityLevel": "BACKWARD"}
