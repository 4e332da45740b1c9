"""FastAPI app of the "CDC status" view, mounted by the Airflow API server at ``/cdc-status``.

Every route requires an authenticated Airflow user (JWT from the UI's ``_token`` cookie or a Bearer header), via
Airflow's own ``requires_authenticated`` dependency."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from airflow.api_fastapi.core_api.security import requires_authenticated
from fastapi import Depends, FastAPI, HTTPException, Query
from fastapi.responses import HTMLResponse

from cdc_airflow.settings import load_settings
from cdc_airflow.status import (TTLCache, collect_dead_letters, collect_status, render_dead_letters_html,
                                render_status_html)

URL_PREFIX = "/cdc-status"


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

    def dead_letters(pipeline: str, table: str, limit: int) -> list[dict[str, Any]]:
        try:
            return collect_dead_letters(load_settings(), pipeline, table, limit)
        except KeyError as exc:
            raise HTTPException(status_code=404, detail=str(exc)) from None

    @app.get("/api/dead-letters/{pipeline}/{table}")
    def dead_letters_json(pipeline: str, table: str, limit: int = Query(100, ge=1, le=1000)) -> list[dict[str, Any]]:
        return dead_letters(pipeline, table, limit)

    @app.get("/dead-letters/{pipeline}/{table}", response_class=HTMLResponse)
    def dead_letters_page(pipeline: str, table: str, limit: int = Query(100, ge=1, le=1000)) -> str:
        return render_dead_letters_html(pipeline, table, dead_letters(pipeline, table, limit))

    return app
