"""A client that goes away mid-stream still gets its log row completed."""

from __future__ import annotations

import time

import httpx
import orjson

from tests.support.factories import request, user

JSON = {"content-type": "application/json"}


def test_client_disconnect_mid_stream_completes_the_row(live_proxy, fake_upstream) -> None:
    proxy = live_proxy()
    fake_upstream.script.content = "a b c d"
    fake_upstream.script.hold_after_first_chunk = True
    body = request(user("go"), stream=True)
    with (
        httpx.Client(timeout=10) as client,
        client.stream(
            "POST", proxy.base_url + "/chat/completions", content=orjson.dumps(body), headers=JSON
        ) as r,
    ):
        request_id = r.headers["x-ctxproxy-request-id"]
        first = next(r.iter_raw())
        assert b'"a"' in first
        # leaving the block closes the connection while the upstream still holds back
    fake_upstream.release.set()
    row = proxy.row(request_id, timeout=10)
    assert row["client_disconnected"] == 1
    assert row["status"] == 200
    assert row["ttfb_ms"] is not None


def test_disconnect_while_upstream_holds_the_stream_ends_the_relay_at_once(
    live_proxy, fake_upstream
) -> None:
    """The row completes while the upstream is still holding back: the proxy noticed the client
    leave and dropped the upstream stream, rather than waiting for its next chunk."""
    proxy = live_proxy()
    fake_upstream.script.content = "a b c d"
    fake_upstream.script.hold_after_first_chunk = True
    body = request(user("go"), stream=True)
    try:
        with (
            httpx.Client(timeout=10) as client,
            client.stream(
                "POST",
                proxy.base_url + "/chat/completions",
                content=orjson.dumps(body),
                headers=JSON,
            ) as r,
        ):
            request_id = r.headers["x-ctxproxy-request-id"]
            next(r.iter_raw())
        row = proxy.row(request_id, timeout=5)
        assert row["client_disconnected"] == 1
        assert not fake_upstream.release.is_set()
    finally:
        fake_upstream.release.set()


def test_disconnect_while_waiting_on_a_slow_upstream_is_logged_as_499_at_once(
    live_proxy, fake_upstream
) -> None:
    proxy = live_proxy()
    fake_upstream.script.delay_s = 4.0
    body = orjson.dumps(request(user("go")))
    started = time.monotonic()
    with httpx.Client(timeout=0.5) as client:
        try:
            client.post(proxy.base_url + "/chat/completions", content=body, headers=JSON)
        except httpx.ReadTimeout:
            pass  # the client gives up and closes its connection
        else:
            raise AssertionError("the slow upstream answered before the client gave up")
    rows: list[dict] = []
    while time.monotonic() - started < 3.5 and not rows:
        rows = [r for r in proxy.rows() if r["status"] is not None]
        time.sleep(0.05)
    assert rows, "the row was not completed before the upstream would have answered"
    (row,) = rows
    assert row["status"] == 499 and row["error_type"] == "client_disconnected"
    assert row["client_disconnected"] == 1
