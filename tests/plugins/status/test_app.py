"""The authenticated FastAPI app of the CDC status view (``cdc_airflow.status.app``), alone and mounted by the Airflow
API server through ``plugins/cdc_status_plugin.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.plugins.status.test_view import cdc_home, fake_watermarks  # noqa: F401  (cdc_home: a fixture)


def test_app_requires_authentication(cdc_home: Path) -> None:
    from fastapi.testclient import TestClient

    from cdc_airflow.status.app import create_app

    client = TestClient(create_app())
    for url in ("/", "/api/status", "/api/dead-letters/demo/inventory.customers", "/dead-letters/demo/x"):
        assert client.get(url).status_code == 401


@pytest.mark.airflow
def test_mounted_in_airflow_api_server_with_real_auth(cdc_home: Path, airflow_db: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The API server app loads the plugin from plugins/, mounts it at /cdc-status and checks Airflow JWTs."""
    from airflow.api_fastapi.app import create_app, get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from fastapi.testclient import TestClient

    from cdc_airflow.status import view

    monkeypatch.setattr(view, "_watermarks_fast", fake_watermarks)
    client = TestClient(create_app())
    assert client.get("/cdc-status/").status_code == 401
    assert client.get("/cdc-status/", headers={"Authorization": "Bearer garbage"}).status_code in (401, 403)
    token = get_auth_manager().generate_jwt(SimpleAuthManagerUser(username="admin", role="admin"))
    page = client.get("/cdc-status/", headers={"Authorization": f"Bearer {token}"})
    assert page.status_code == 200 and "Pipeline demo" in page.text
    client.cookies.set("_token", token)  # what the UI's iframe sends
    assert client.get("/cdc-status/api/status").json()[0]["pipeline"] == "demo"
    views = client.get("/api/v2/plugins", headers={"Authorization": f"Bearer {token}"}).json()
    assert any(v["href"] == "/cdc-status/" for p in views["plugins"] for v in p["external_views"])


def test_app_routes_when_authenticated(cdc_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    from cdc_airflow.status import view
    from cdc_airflow.status.app import create_app

    monkeypatch.setattr(view, "_watermarks_fast", fake_watermarks)
    app = create_app()
    app.dependency_overrides[get_user] = lambda: object()
    client = TestClient(app)
    assert "Pipeline demo" in client.get("/").text
    assert client.get("/api/status").json()[0]["tables"][0]["lag_total"] == 5
    assert len(client.get("/api/dead-letters/demo/inventory.customers?limit=1").json()) == 1
    assert client.get("/dead-letters/nope/x").status_code == 404


def test_plugin_registers_app_and_view() -> None:
    from cdc_status_plugin import CdcStatusPlugin

    [app] = CdcStatusPlugin.fastapi_apps
    assert app["url_prefix"] == "/cdc-status"
    [view] = CdcStatusPlugin.external_views
    assert view["href"] == "/cdc-status/" and view["destination"] == "nav"
