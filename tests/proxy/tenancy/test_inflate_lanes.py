"""Compressed bodies are decoded in their own threads, each lane's in its own line: in one thread
taking them all in turn, a tenant sending forty bodies of 31 MiB (gzip of a few KB each) had
another tenant's small one wait 9 s behind them."""

from __future__ import annotations

import gzip
import threading
import time
from pathlib import Path

import httpx
import orjson

from proxy.app import create_app
from tests.proxy.tenancy.conftest import tenancy_settings
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.factories import chat_completion
from tests.support.live import serve_in_thread, stop

BOMB = gzip.compress(b"x" * (31 << 20), 1)  # decodes to 31 MiB of no JSON: 400 once decoded
SMALL = orjson.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})


def post(base: str, key: str, body: bytes, gzipped: bool = True) -> int:
    headers = {"content-type": "application/json", "authorization": f"Bearer {key}"}
    if gzipped:
        headers["content-encoding"] = "gzip"
        body = gzip.compress(body) if body is SMALL else body
    url = base + "/v1/chat/completions"
    return httpx.post(url, content=body, headers=headers, timeout=120).status_code


def test_a_tenants_compressed_bodies_do_not_hold_up_anothers(
    tmp_path: Path, upstream: EdgeUpstream
) -> None:
    upstream.reply = Reply.json(chat_completion("ok"))
    app = create_app(tenancy_settings(upstream, "passthrough"), db_path=str(tmp_path / "db"))
    server, base = serve_in_thread(app)
    try:
        for key in ("sk-flood", "sk-other"):  # answered by the upstream: a lane of its own
            assert post(base, key, SMALL, gzipped=False) == 200
        flood = [threading.Thread(target=post, args=(base, "sk-flood", BOMB)) for _ in range(40)]
        for thread in flood:
            thread.start()
        time.sleep(0.3)
        started = time.monotonic()
        assert post(base, "sk-other", SMALL) == 200
        waited = time.monotonic() - started
        busy = sum(t.is_alive() for t in flood)
        for thread in flood:
            thread.join()
        assert waited < 1.0, (waited, busy)
        assert busy > 10, busy  # the flood was still being decoded
    finally:
        stop(server)
