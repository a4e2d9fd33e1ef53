"""A client that goes away mid-stream still gets its log row completed."""

from __future__ import annotations

import httpx
import orjson

from tests.support.factories import request, user


def test_client_disconnect_mid_stream_completes_the_row(live_proxy, fake_upstream) -> None:
    proxy = live_proxy()
    fake_upstream.script.content = "a b c d"
    fake_upstream.script.hold_after_first_chunk = True
    body = request(user("go"), stream=True)
    with httpx.Client(timeout=10) as client, client.stream(
        "POST", proxy.base_url + "/chat/completions", content=orjson.dumps(body)
    ) as r:
        request_id = r.headers["x-ctxproxy-request-id"]
        first = next(r.iter_raw())
        assert b'"a"' in first
        # leaving the block closes the connection while the upstream still holds back
    fake_upstream.release.set()
    row = proxy.row(request_id, timeout=10)
    assert row["client_disconnected"] == 1
    assert row["status"] == 200
    assert row["ttfb_ms"] is not None
