"""One live proxy for all of a fuzz test's examples: the server in a thread of its own (its own
event loop, as ``ctxproxy serve`` runs), each example one HTTP request to it. A fresh app per
example started its store and rules every time (~50 ms, most of what an example cost); one
server also meets each body with what earlier, stranger bodies left in its state."""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson

from proxy.app import create_app
from proxy.settings import Settings
from tests.support.edge_upstream import EdgeUpstream
from tests.support.live import serve_in_thread, stop


class FuzzProxy:
    def __init__(self, url: str, edge: EdgeUpstream) -> None:
        self.edge = edge
        self.client = httpx.Client(base_url=url, timeout=60)

    def post(
        self, path: str, body: object, headers: dict[str, str] | None = None
    ) -> tuple[httpx.Response, object]:
        """The proxy's answer to ``body`` (JSON-encoded as sent), and what it forwarded (None:
        nothing)."""
        self.edge.seen.clear()
        sent = {"content-type": "application/json"} if headers is None else headers
        answer = self.client.post(path, content=json.dumps(body), headers=sent)
        forwarded = orjson.loads(self.edge.seen[-1].body) if self.edge.seen else None
        return answer, forwarded


@contextlib.contextmanager
def fuzz_proxy(settings: Settings, edge: EdgeUpstream) -> Iterator[FuzzProxy]:
    with tempfile.TemporaryDirectory() as tmp:
        app = create_app(settings, db_path=str(Path(tmp) / "db"), strict=True)
        server, url = serve_in_thread(app)
        proxy = FuzzProxy(url, edge)
        try:
            yield proxy
        finally:
            proxy.client.close()
            stop(server)
