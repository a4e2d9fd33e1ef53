"""The tenancy tests' fixtures: one real PostgreSQL server for the whole session (skipped with the
reason where none can run), a scripted upstream, and the proxy served in front of it in
passthrough and in keys mode, over SQLite and over PostgreSQL (``tests.proxy.tenancy.serving``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from proxy.app import create_app
from tests.proxy.tenancy.serving import KEYS, UPSTREAM_KEY_ENV, Served, tenancy_settings
from tests.support.edge_upstream import EdgeUpstream
from tests.support.live import serve_in_thread, stop


@pytest.fixture(scope="module")
def upstream() -> Iterator[EdgeUpstream]:
    server = EdgeUpstream().start()
    yield server
    server.stop()


def serve(
    request: pytest.FixtureRequest,
    edge: EdgeUpstream,
    tmp: pytest.TempPathFactory,
    store: str,
    mode: str,
) -> Iterator[Served]:
    """The proxy on a fresh store (a new PostgreSQL database), for as long as the caller's scope;
    keys mode's variables set meanwhile."""
    url = request.getfixturevalue("pg_server").database() if store == "postgresql" else None
    db = str(Path(tmp.mktemp("tenancy")) / "proxy.db")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("CTXPROXY_KEYS", KEYS)
        env.setenv(UPSTREAM_KEY_ENV, "sk-upstream")
        server, base = serve_in_thread(
            # a db_path wins over store.url: the PostgreSQL runs name the database there
            create_app(tenancy_settings(edge, mode, url), db_path=url or db, strict=True)
        )
        proxy = Served(base, edge, f"{store}-{mode}")
        try:
            yield proxy
        finally:
            proxy.client.close()
            stop(server)


@pytest.fixture(
    scope="module",
    params=[
        ("sqlite", "passthrough"),
        ("sqlite", "keys"),
        ("postgresql", "passthrough"),
        ("postgresql", "keys"),
    ],
    ids=lambda p: f"{p[0]}-{p[1]}",
)
def served(
    request: pytest.FixtureRequest, upstream: EdgeUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """The proxy, once per module in each store and mode: tests keep apart by their own session
    names and system prompts."""
    yield from serve(request, upstream, tmp_path_factory, *request.param)
