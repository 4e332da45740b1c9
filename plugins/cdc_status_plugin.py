"""Airflow plugin "CDC status": a FastAPI app at /cdc-status (see cdc_airflow/status/app.py) shown in the
Airflow 3 UI navigation as an external view (an iframe of /cdc-status/)."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from cdc_airflow.status.app import URL_PREFIX, create_app


class CdcStatusPlugin(AirflowPlugin):
    name = "cdc_status"
    fastapi_apps = [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "CDC status"}]
    external_views = [{
        "name": "CDC status",
        "href": f"{URL_PREFIX}/",
        "destination": "nav",
        "category": "browse",
        "url_route": "cdc-status",
    }]
