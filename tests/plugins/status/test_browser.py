"""The "CDC status" view in a real browser: a live ``airflow api-server`` (127.0.0.1, temporary AIRFLOW_HOME, the
plugin loaded from plugins/), a real broker for high watermarks, a hadoop-layout ledger; headless Chromium logs in
with the JWT from the simple auth manager's ``/auth/token`` (set as the UI's ``_token`` cookie through the DevTools
protocol), opens /cdc-status/, checks the lag numbers on the rendered page and saves screenshots to test-output/.

Skipped only when no Chromium binary exists (CI installs the Debian package ``chromium``).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.conftest import unique
from tests.plugins.iceberg_ledger import DEAD_LETTERS, LEDGER, T0, HadoopLayoutWriter, ledger_row

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
OUT = REPO / "test-output"
CHROMIUM = next((p for p in (os.environ.get("CHROMIUM"), shutil.which("chromium"), shutil.which("chromium-browser"),
                             shutil.which("google-chrome")) if p), None)
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--hide-scrollbars"]
PASSWORD = "status-view-test"
VIEWER_PASSWORD = "status-view-viewer"
DOCS_SCREENSHOT = REPO / "docs" / "status-view.png"  # rewritten when CDC_UPDATE_SCREENSHOT=1


def _free_port() -> int:
    from devtools.broker import free_port

    return free_port()


def _http(method: str, url: str, body: Any = None, token: str | None = None) -> tuple[int, Any]:
    req = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode(), method=method)
    req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            raw, status = r.read(), r.status
    except urllib.error.HTTPError as e:
        raw, status = e.read(), e.code
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode(errors="replace")


@pytest.fixture(scope="module")
def status_data(broker: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two topics on the real broker and a ledger that committed part of them: lag 12 (customers) and 7 (orders);
    customers' newest committed change is 2 h old (freshness 60 min: stale) and it has 2 dead letters."""
    import pyarrow as pa
    from confluent_kafka import Producer

    tmp = tmp_path_factory.mktemp("status-browser")
    topics = {"customers": unique("dbserver1.public.customers_"), "orders": unique("dbserver1.public.orders_")}
    produced = {"customers": {0: 42, 1: 25}, "orders": {0: 17}}
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for name, parts in produced.items():
        broker.create_topic(topics[name], partitions=len(parts))
        for part, n in parts.items():
            for i in range(n):
                p.produce(topics[name], key=b"%d" % i, value=b"{}", partition=part)
    assert p.flush(10) == 0
    pipelines = tmp / "pipelines"
    pipelines.mkdir()
    (pipelines / "demo.yaml").write_text(f"""
pipeline: demo
format: json
kafka: {{bootstrap.servers: "{broker.bootstrap}"}}
catalog: {{name: lake, type: hadoop, warehouse: ./wh}}
tables:
  - {{topic: {topics['customers']}, target: inventory.customers, primary_key: [id]}}
  - {{topic: {topics['orders']}, target: inventory.orders, primary_key: [id]}}
airflow: {{freshness_minutes: {{inventory.customers: 60}}}}
""")
    w = HadoopLayoutWriter(pipelines / "wh")
    c, o = "inventory.customers", "inventory.orders"
    w.append("cdc_meta.ledger", LEDGER, [
        ledger_row(c, 1, 0, 0, 20, topic=topics["customers"]), ledger_row(c, 1, 1, 0, 25, topic=topics["customers"]),
        ledger_row(o, 1, 0, 0, 10, topic=topics["orders"], inserted=10, updated=0),
    ])
    w.append("cdc_meta.ledger", LEDGER, [
        ledger_row(c, 2, 0, 20, 30, topic=topics["customers"], inserted=4, updated=5, deleted=1),
        ledger_row(c, 2, 1, 25, 25, topic=topics["customers"], inserted=4, updated=5, deleted=1),
    ])
    w.append("cdc_meta.dead_letters", DEAD_LETTERS, [
        {"pipeline": "demo", "table_name": c, "batch_id": 2, "topic": topics["customers"], "partition": 0,
         "offset": off, "key": b'{"id": 7}', "value": b"RAW-SECRET-BYTES", "error_class": "DecodeError",
         "error_message": "not Avro", "created_at": T0} for off in (21, 22)])
    newest = int(time.time() * 1000) - 2 * 3600 * 1000 - 5 * 60 * 1000
    target = pa.schema([("id", pa.int64()), ("__source_ts_ms", pa.int64()), ("__batch_id", pa.int64())])
    w.append(c, target, [{"id": 1, "__source_ts_ms": newest - 60_000, "__batch_id": 1},
                         {"id": 2, "__source_ts_ms": newest, "__batch_id": 2}])
    return {"pipelines": pipelines, "lag": {c: 12, o: 7}}


@pytest.fixture(scope="module")
def api_server(status_data: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """``airflow db migrate`` + ``airflow api-server`` on a free loopback port, with user admin / PASSWORD."""
    home = Path(tempfile.mkdtemp(prefix="cdc-status-airflow-"))
    (home / "passwords.json").write_text(json.dumps({"admin": PASSWORD, "viewer": VIEWER_PASSWORD}))
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "no-dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__AUTH_MANAGER": "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin,viewer:viewer",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
        "AIRFLOW__API__HOST": "127.0.0.1", "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
        "AIRFLOW__API_AUTH__JWT_SECRET": "cdc-status-browser-test-secret-0123456789abcdef0123456789abcdef",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
        "CDC_PIPELINES_DIR": str(status_data["pipelines"]),
    })
    (home / "no-dags").mkdir()
    airflow = str(Path(sys.executable).parent / "airflow")
    subprocess.run([airflow, "db", "migrate"], env=env, check=True, capture_output=True, timeout=300)
    log = open(home / "api-server.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen([airflow, "api-server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
                            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                status, _ = _http("GET", f"{base}/api/v2/monitor/health")
                if status == 200:
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"api-server did not come up:\n{(home / 'api-server.log').read_text()[-3000:]}")
            time.sleep(0.5)
        yield {"base": base, "home": home}
    finally:
        os.killpg(proc.pid, 15)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
        log.close()
        shutil.rmtree(home, ignore_errors=True)


class Browser:
    """Headless Chromium driven over the DevTools protocol (websocket on 127.0.0.1, random port)."""

    def __init__(self, width: int = 1280, height: int = 900) -> None:
        self.profile = Path(tempfile.mkdtemp(prefix="cdc-chromium-"))
        self.proc = subprocess.Popen([CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={self.profile}",
                                      "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
                                      f"--window-size={width},{height}", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("chromium did not open its DevTools port")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        _, targets = _http("GET", f"http://127.0.0.1:{port}/json/list")
        page = next(t for t in targets if t["type"] == "page")
        from websockets.sync.client import connect

        self._stack = contextlib.ExitStack()
        self.ws = self._stack.enter_context(connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=10))
        self._id = 0
        self.events: list[dict[str, Any]] = []
        self.call("Page.enable")
        self.call("Network.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv(timeout=60))
            if msg.get("id") == self._id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def wait_event(self, name: str, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            for i, e in enumerate(self.events):
                if e.get("method") == name:
                    return self.events.pop(i)
            msg = json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            self.events.append(msg)

    def goto(self, url: str) -> None:
        self.events.clear()
        self.call("Page.navigate", url=url)
        self.wait_event("Page.loadEventFired")

    def text(self, document: str = "document") -> str:
        expr = f"(() => {{ const d = {document}; return d && d.body ? d.body.innerText : ''; }})()"
        return self.call("Runtime.evaluate", expression=expr, returnByValue=True)["result"].get("value", "")

    def wait_text(self, needle: str, timeout: float = 60, document: str = "document") -> str:
        deadline = time.monotonic() + timeout
        while True:
            text = self.text(document)
            if needle in text or time.monotonic() > deadline:
                return text
            time.sleep(0.5)

    def screenshot(self, path: Path, full_page: bool = True) -> None:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            m = self.call("Page.getLayoutMetrics")["cssContentSize"]
            params.update(captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": m["width"], "height": m["height"], "scale": 1})
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", **params)["data"]))

    def close(self) -> None:
        try:
            self._stack.close()
        finally:
            os.killpg(self.proc.pid, 15)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
            shutil.rmtree(self.profile, ignore_errors=True)


@pytest.fixture()
def browser() -> Iterator[Browser]:
    if CHROMIUM is None:
        pytest.skip("no chromium binary (apt-get install -y chromium)")
    b = Browser()
    yield b
    b.close()


def test_status_page_requires_login(api_server: dict[str, Any]) -> None:
    status, _ = _http("GET", f"{api_server['base']}/cdc-status/api/status")
    assert status == 401
    status, _ = _http("POST", f"{api_server['base']}/auth/token", {"username": "admin", "password": "wrong"})
    assert status == 401


def test_status_page_in_headless_chromium(api_server: dict[str, Any], status_data: dict[str, Any],
                                          browser: Browser) -> None:
    base = api_server["base"]
    status, body = _http("POST", f"{base}/auth/token", {"username": "admin", "password": PASSWORD})
    assert status == 201, body
    token = body["access_token"]
    status, data = _http("GET", f"{base}/cdc-status/api/status", token=token)
    assert status == 200
    lags = {t["table"]: t["lag_total"] for p in data for t in p["tables"]}
    assert lags == status_data["lag"]

    # What a logged-in user's browser holds: the JWT in the UI's `_token` cookie.
    browser.call("Network.setCookie", name="_token", value=token, url=base + "/", path="/", httpOnly=True)
    browser.goto(f"{base}/cdc-status/")
    text = browser.text()
    assert "CDC status" in text and "Pipeline demo" in text
    assert "inventory.customers" in text and "Lag: 12" in text
    assert "inventory.orders" in text and "Lag: 7" in text
    # per-partition rows: partition, high watermark, committed, lag
    assert "0\t42\t30\t12" in text and "1\t25\t25\t0" in text and "0\t17\t10\t7" in text
    # lag in time (now − newest committed __source_ts_ms) and the freshness badge
    assert "Behind: 2 h 5 min" in text and "STALE" in text and "DecodeError: 2" in text
    browser.screenshot(OUT / "cdc-status.png")
    assert (OUT / "cdc-status.png").stat().st_size > 10_000
    if os.environ.get("CDC_UPDATE_SCREENSHOT"):
        shutil.copy(OUT / "cdc-status.png", DOCS_SCREENSHOT)

    # The same view inside the Airflow UI (Browse → CDC status: an iframe of /cdc-status/).
    browser.goto(f"{base}/plugin/cdc-status")
    frame = "document.querySelector('iframe')?.contentDocument"
    frame_text = browser.wait_text("Lag: 12", timeout=60, document=frame)
    time.sleep(1)  # let the frame paint
    browser.screenshot(OUT / "cdc-status-airflow-ui.png", full_page=False)
    assert "Lag: 12" in frame_text and "Lag: 7" in frame_text
    assert "Browse" in browser.text()  # the Airflow UI's navigation around the frame


def test_dead_letter_bytes_only_for_users_who_may_edit_the_dag(api_server: dict[str, Any],
                                                              browser: Browser) -> None:
    """viewer (role viewer: may view DAGs) sees counts, offsets and error classes; admin also the raw bytes."""
    base, url = api_server["base"], "/cdc-status/dead-letters/demo/inventory.customers"
    seen = {}
    for user, password in (("viewer", VIEWER_PASSWORD), ("admin", PASSWORD)):
        status, body = _http("POST", f"{base}/auth/token", {"username": user, "password": password})
        assert status == 201, body
        token = body["access_token"]
        status, rows = _http("GET", f"{base}/cdc-status/api/dead-letters/demo/inventory.customers", token=token)
        assert status == 200 and [r["offset"] for r in rows] == [22, 21]
        assert {r["error_class"] for r in rows} == {"DecodeError"}
        browser.call("Network.setCookie", name="_token", value=token, url=base + "/", path="/", httpOnly=True)
        browser.goto(base + url)
        seen[user] = (rows, browser.text())
    (viewer_rows, viewer_page), (admin_rows, admin_page) = seen["viewer"], seen["admin"]
    assert all(r["value"] is None and r["key"] is None and r["error_message"] is None for r in viewer_rows)
    assert "RAW-SECRET-BYTES" not in viewer_page and "DecodeError" in viewer_page and "hidden" in viewer_page
    assert {r["value"] for r in admin_rows} == {"RAW-SECRET-BYTES"}
    assert "RAW-SECRET-BYTES" in admin_page and "not Avro" in admin_page and "hidden" not in admin_page
