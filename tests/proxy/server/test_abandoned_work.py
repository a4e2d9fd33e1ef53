"""A request whose client hangs up while its rules run in a worker stops there: its job ends at
the worker's next check (``rules.abandon``), the request is logged as the client's going
(499 ``client_disconnected``), and the principal's next heavy request does not wait behind work
nobody will read. Before, a client sending 400 commands and hanging up held a worker for all of
them (about 4 s here), and the principal's next heavy request waited that long first."""

from __future__ import annotations

import contextlib
import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx

from tests.support.edge_upstream import EdgeUpstream
from tests.support.factories import assistant, request, result, shell, user
from tests.support.live import free_port
from tests.support.serve_cli import serve, wait_listening


def _heavy() -> dict[str, Any]:
    messages = [user("go")]
    for i in range(400):
        command = f"git mv a{i} b{i}; " * 60
        messages += [assistant(None, shell(f"c{i}", command)), result(f"c{i}", "ok")]
    return request(*messages, user("next"))


def test_a_hung_up_request_stops_its_work(tmp_path: Path, edge: EdgeUpstream) -> None:
    port, db = free_port(), tmp_path / "log.db"
    config = f"upstreams:\n  - name: o\n    match: ['*']\n    base_url: {edge.base_url}\n"
    proc, lines = serve(tmp_path, port, db, config)
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    try:
        wait_listening(proc, lines)
        body = _heavy()
        started = time.perf_counter()
        r = httpx.post(url, json=body, timeout=60, headers={"x-session-id": "whole"})
        alone = time.perf_counter() - started
        assert r.status_code == 200
        with contextlib.suppress(httpx.TimeoutException):  # hangs up while the rules run
            httpx.post(url, json=body, timeout=alone / 8, headers={"x-session-id": "gone"})
        started = time.perf_counter()
        r = httpx.post(url, json=body, timeout=60, headers={"x-session-id": "next"})
        after = time.perf_counter() - started
        assert r.status_code == 200
        # its own work, not the hung-up request's too (that alone took ``alone``)
        assert after < 1.6 * alone, (alone, after)
    finally:
        proc.terminate()
        proc.wait(10)
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "select status, error, overhead_ms from requests order by created_at"
        ).fetchall()
    assert [status for status, _, _ in rows] == [200, 499, 200]
    _, error, spent_ms = rows[1]
    assert error == "Client disconnected."
    assert spent_ms < 1000 * alone / 2, (alone, spent_ms)  # it stopped soon after the hang-up
