"""Shared fixtures: a fake upstream on loopback, a live proxy in front of it, and the app
in-process. Tests run the pipeline strictly (a rule that raises fails the test)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import hypothesis
import orjson
import pytest

from proxy.app import create_app
from proxy.settings import Settings, settings_from_mapping
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.factories import chat_completion
from tests.support.fake_upstream import FakeUpstream, start_fake_upstream
from tests.support.live import serve_in_thread, stop
from tests.support.postgres import PgServer, start_server, unavailable
from tests.support.traces import CORPUS, SHARED_MISSING

# The property tests draw the same examples on every run (a run that passes passes again: a
# draw new to one run failed once where the code had not changed); HYPOTHESIS_PROFILE=explore
# draws afresh, to look for more.
hypothesis.settings.register_profile("fixed", derandomize=True)
hypothesis.settings.register_profile("explore", derandomize=False)
hypothesis.settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "fixed"))

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# the commands run here keep nothing in the user's cache folder (proxy.lexicon_shelf)
os.environ["CTXPROXY_CACHE_DIR"] = ""
TRACES = CORPUS


# Files (or single tests) that time the event loop, a live server or a replay against
# wall-clock bounds: the list bin/test runs alone, after the rest.
SERIAL_FILES = frozenset(
    line
    for line in (Path(__file__).parent / "serial.txt").read_text().splitlines()
    if line and not line.startswith("#")
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid in SERIAL_FILES or item.nodeid.partition("::")[0] in SERIAL_FILES:
            item.add_marker(pytest.mark.serial)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """``@pytest.mark.needs_shared``: skipped, with the reason, when ../shared is not beside
    the checkout (before any fixture reads it)."""
    if item.get_closest_marker("needs_shared") is not None and not CORPUS.exists():
        pytest.skip(SHARED_MISSING)


@pytest.fixture(scope="session")
def _fake_upstream_server() -> Iterator[FakeUpstream]:
    fake, server = start_fake_upstream()
    yield fake
    stop(server)


@pytest.fixture
def fake_upstream(_fake_upstream_server: FakeUpstream) -> FakeUpstream:
    _fake_upstream_server.reset()
    return _fake_upstream_server


def proxy_settings(upstream_url: str, **overrides: Any) -> Settings:
    data: dict[str, Any] = {
        "upstreams": [{"name": "fake", "match": ["*"], "base_url": upstream_url}],
        "pipeline": {"on_rule_error": "fail"},
    }
    for key, value in overrides.items():
        data[key] = value
    return settings_from_mapping(data)


class LiveProxy:
    def __init__(self, url: str, db_path: str) -> None:
        self.url = url
        self.base_url = url + "/v1"
        self.db_path = db_path

    def rows(self) -> list[dict[str, Any]]:
        with contextlib.closing(sqlite3.connect(self.db_path)) as db:
            db.row_factory = sqlite3.Row
            rows = db.execute("SELECT * FROM requests ORDER BY created_at").fetchall()
        out = []
        for r in rows:
            d = dict(r)
            for col in ("sections", "report", "usage", "cache"):
                if isinstance(d.get(col), str):
                    d[col] = orjson.loads(d[col])
            out.append(d)
        return out

    def row(self, request_id: str, timeout: float = 5.0) -> dict[str, Any]:
        """The log row of a request once it is complete (status set)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            for r in self.rows():
                if r["id"] == request_id and r["status"] is not None:
                    return r
            time.sleep(0.02)
        raise AssertionError(f"no completed log row for {request_id}")


@pytest.fixture
def live_proxy(fake_upstream: FakeUpstream, tmp_path: Path) -> Iterator[Callable[..., LiveProxy]]:
    servers = []

    def start(settings: Settings | None = None, **overrides: Any) -> LiveProxy:
        settings = settings or proxy_settings(fake_upstream.base_url, **overrides)
        db = str(tmp_path / f"proxy{len(servers)}.db")
        server, url = serve_in_thread(create_app(settings, db_path=db, strict=True))
        servers.append(server)
        return LiveProxy(url, db)

    yield start
    for server in servers:
        stop(server)


async def log_rows(client: httpx.AsyncClient) -> list[dict[str, Any]]:
    """The request log of an ``in_process`` app, once everything queued is written."""
    store = client.app.state.services.store  # type: ignore[attr-defined]
    await store.flush()
    return await store.list_requests(limit=100)


@contextlib.asynccontextmanager
async def in_process(settings: Settings, db_path: str) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings, db_path=db_path, strict=True)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            client.app = app  # type: ignore[attr-defined]
            yield client


@pytest.fixture
def traces_path() -> Path:
    if not TRACES.exists():
        pytest.skip(SHARED_MISSING)
    return TRACES


@pytest.fixture
def edge() -> Iterator[EdgeUpstream]:
    """A scripted HTTP/1.1 upstream at the socket level (tests/support/edge_upstream.py),
    answering a chat completion until a test scripts another reply."""
    server = EdgeUpstream().start()
    server.reply = Reply.json(chat_completion())
    yield server
    server.stop()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """One real PostgreSQL server for the whole test session (``tests.support.postgres``), a
    fresh database per user; skipped with the reason where none can run."""
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    try:
        server = start_server()
    except Exception as exc:  # no way to run it here (permissions, ports): say why
        pytest.skip(f"PostgreSQL could not be started: {exc}")
    yield server
    server.destroy()


@pytest.fixture(scope="module")
def own_server() -> Iterator[PgServer]:
    """A PostgreSQL server of the module's own, for tests that stop, freeze or lock it (the
    session's ``pg_server`` is shared)."""
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    server = start_server()
    yield server
    server.destroy()
