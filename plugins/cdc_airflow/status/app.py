"""FastAPI app of the "CDC status" view, mounted by the Airflow API server at ``/cdc-status``.

Every route requires an authenticated Airflow user (JWT from the UI's ``_token`` cookie or a Bearer header), via
Airflow's own ``requires_authenticated`` dependency. Raw dead-letter bytes (key, value) and error messages are shown
only to users who may edit the pipeline's DAG (``is_authorized_dag(method="PUT")`` of the configured auth manager:
role User, Op or Admin in the simple and FAB auth managers); viewers see counts, offsets and error classes."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from airflow.api_fastapi.core_api.security import GetUserDep, requires_authenticated
from fastapi import Depends, FastAPI, HTTPException, Query
from fastapi.responses import HTMLResponse

from cdc_airflow.config.settings import load_settings
from cdc_airflow.status.view import (
    TTLCache,
    collect_dead_letters,
    collect_status,
    render_dead_letters_html,
    render_status_html,
)

URL_PREFIX = "/cdc-status"


def may_see_raw(user: Any, pipeline: str) -> bool:
    """Raw record bytes need more than viewing: permission to edit the pipeline's DAG ``cdc_<pipeline>``."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagDetails

    try:
        return bool(get_auth_manager().is_authorized_dag(method="PUT", user=user,
                                                         details=DagDetails(id=f"cdc_{pipeline}")))
    except Exception:  # noqa: BLE001 - no auth manager / unknown user: the safe answer
        return False


def create_app(cache_seconds: float = 15) -> FastAPI:
    app = FastAPI(title="CDC status", description="Consumer lag, batches and dead letters of CDC pipelines",
                  dependencies=[Depends(requires_authenticated())])
    cache = TTLCache(cache_seconds)

    def status() -> list[dict[str, Any]]:
        return cache.get(lambda: collect_status(load_settings()))

    @app.get("/", response_class=HTMLResponse)
    def status_page() -> str:
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        return render_status_html(status(), generated=now)

    @app.get("/api/status")
    def status_json() -> list[dict[str, Any]]:
        return status()

    def dead_letters(pipeline: str, table: str, limit: int, raw: bool) -> list[dict[str, Any]]:
        try:
            return collect_dead_letters(load_settings(), pipeline, table, limit, raw=raw)
        except KeyError as exc:
            raise HTTPException(status_code=404, detail=str(exc)) from None

    @app.get("/api/dead-letters/{pipeline}/{table}")
    def dead_letters_json(pipeline: str, table: str, user: GetUserDep,
                          limit: int = Query(100, ge=1, le=1000)) -> list[dict[str, Any]]:
        return dead_letters(pipeline, table, limit, may_see_raw(user, pipeline))

    @app.get("/dead-letters/{pipeline}/{table}", response_class=HTMLResponse)
    def dead_letters_page(pipeline: str, table: str, user: GetUserDep,
                          limit: int = Query(100, ge=1, le=1000)) -> str:
        raw = may_see_raw(user, pipeline)
        return render_dead_letters_html(pipeline, table, dead_letters(pipeline, table, limit, raw), raw=raw)

    return app
