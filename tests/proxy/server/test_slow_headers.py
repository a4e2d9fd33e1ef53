"""Slow headers time out: ``ctxproxy serve`` (run for real, as a subprocess) closes connections
whose request line and headers do not arrive within ``server.header_timeout_s``, however steadily
they trickle, while ``/healthz`` and normal clients keep being served. Also, against a server
configured the same way in a thread: headers over ``server.max_header_bytes`` get 431, an idle
kept-alive connection ends after ``server.keep_alive_s``, and ``server.max_connections`` bounds
the connections served."""

from __future__ import annotations

import logging
import os
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from openai import OpenAI

from tests.conftest import proxy_settings
from tests.support.fake_upstream import FakeUpstream
from tests.support.live import free_port, stop
from tests.support.served import serve_like_cli

TIMEOUT_S = 1.0
TRICKLERS = 150


@pytest.fixture
def served(fake_upstream: FakeUpstream, tmp_path: Path) -> Iterator[tuple[str, list[str]]]:
    """``ctxproxy serve`` with a 1 s header timeout; yields its URL and its stderr lines so far."""
    port = free_port()
    config = tmp_path / "config.yaml"
    config.write_text(
        f"server:\n  header_timeout_s: {TIMEOUT_S}\n"
        f"upstreams:\n  - name: fake\n    base_url: {fake_upstream.base_url}\n"
    )
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("CTXPROXY_ADMIN_KEY", None)
    args = ["serve", "--config", str(config), "--port", str(port), "--db", str(tmp_path / "db")]
    proc = subprocess.Popen(
        [sys.executable, "-m", "proxy.cli", *args],
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr or []), daemon=True)
    reader.start()
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while True:
            assert proc.poll() is None, f"ctxproxy serve exited: {lines}"
            try:
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.time() < deadline, "ctxproxy serve did not start"
            time.sleep(0.1)
        yield url, lines
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        reader.join(timeout=5)


def trickle(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: proxy\r\n")
    s.setblocking(False)
    return s


def test_trickling_headers_are_cut_off_while_others_are_served(
    served: tuple[str, list[str]],
) -> None:
    url, stderr = served
    port = int(url.rsplit(":", 1)[1])
    # The start-up line says who may open /ui (no admin key here: loopback only).
    assert any("/ui and /metrics: loopback clients only" in line for line in stderr), stderr
    socks = [trickle(port) for _ in range(TRICKLERS)]
    opened = time.monotonic()
    alive, closed_after, timed_out = set(socks), [], 0
    n = 0
    # /healthz polled from a thread of its own: how often this loop goes round depends on how
    # busy the machine is, and the polls must cover the whole trickle whatever that is
    health: list[int] = []
    polling = threading.Event()

    def poll() -> None:
        with httpx.Client(timeout=2) as client:
            while not polling.is_set():
                try:
                    health.append(client.get(url + "/healthz").status_code)
                except httpx.TransportError:
                    health.append(0)  # not answered in 2 s: counted, and the polls go on
                polling.wait(0.1)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    try:
        while alive and time.monotonic() - opened < TIMEOUT_S + 6:
            n += 1
            for s in list(alive):  # one more header line each, every 0.2 s
                try:
                    s.send(b"X-Trickle-%d: still coming\r\n" % n)
                except (BrokenPipeError, ConnectionResetError):
                    alive.discard(s)
                    closed_after.append(time.monotonic() - opened)
            readable, _, _ = select.select(list(alive), [], [], 0)
            for s in readable:
                try:
                    data = s.recv(65536)
                except ConnectionResetError:
                    data = b""
                timed_out += data.startswith(b"HTTP/1.1 408")
                if not data or b"connection: close" in data:
                    alive.discard(s)
                    closed_after.append(time.monotonic() - opened)
            time.sleep(0.2)
    finally:
        polling.set()
        poller.join(timeout=5)
        for s in socks:
            s.close()
    assert not alive, f"{len(alive)} trickling connections still open"
    # Not before the timeout (the trickle itself is fine meanwhile), and soon after it.
    assert min(closed_after) >= TIMEOUT_S * 0.8 and max(closed_after) <= TIMEOUT_S + 3
    assert timed_out > 0  # told why (408), where the answer was read before the close
    assert len(health) >= 4 and set(health) == {200}  # /healthz answered throughout

    # A normal client still works, and headers sent in pieces within the timeout are fine.
    client = OpenAI(base_url=url + "/v1", api_key="sk-client")
    answer = client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "hello"}]
    )
    assert answer.choices[0].message.content
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: proxy\r\n")
        time.sleep(TIMEOUT_S / 2)
        s.sendall(b"Connection: close\r\n\r\n")
        assert s.recv(65536).startswith(b"HTTP/1.1 200")


# ----- the same uvicorn configuration, served in a thread -----


def raw_request(url: str, data: bytes, wait: float = 5.0) -> bytes:
    """Send ``data`` on a fresh connection; everything read until the server closes it."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=wait) as s:
        s.sendall(data)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return out


def test_headers_over_the_limit_get_431(fake_upstream: FakeUpstream, tmp_path: Path) -> None:
    settings = proxy_settings(fake_upstream.base_url, server={"max_header_bytes": 4096})
    server, url = serve_like_cli(settings, str(tmp_path / "db"))
    try:
        big = b"GET /healthz HTTP/1.1\r\nHost: p\r\nX-Big: " + b"a" * 5000 + b"\r\n\r\n"
        assert raw_request(url, big).startswith(b"HTTP/1.1 431")
        many = b"GET /healthz HTTP/1.1\r\nHost: p\r\n" + b"X-A: b\r\n" * 600 + b"\r\n"
        assert raw_request(url, many).startswith(b"HTTP/1.1 431")
        long_url = b"GET /healthz?" + b"q" * 5000 + b" HTTP/1.1\r\nHost: p\r\n\r\n"
        assert raw_request(url, long_url).startswith(b"HTTP/1.1 431")
        fits = b"GET /healthz HTTP/1.1\r\nHost: p\r\nX-A: " + b"a" * 3000 + b"\r\n"
        assert raw_request(url, fits + b"Connection: close\r\n\r\n").startswith(b"HTTP/1.1 200")
    finally:
        stop(server)


def test_the_431_comes_in_the_clients_own_protocol(
    fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    """An SDK shows the error body's message: a text/plain 431 read as "Request headers too
    large." only by chance, and Gemini's clients look for its {"error": {code, status}}."""
    import anthropic
    import openai

    settings = proxy_settings(fake_upstream.base_url, server={"max_header_bytes": 4096})
    server, url = serve_like_cli(settings, str(tmp_path / "db"))
    big = {"X-Big": "a" * 5000}
    try:
        chat = OpenAI(base_url=f"{url}/v1", api_key="k", default_headers=big, max_retries=0)
        with pytest.raises(openai.APIStatusError) as got:
            chat.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "x"}]
            )
        assert got.value.status_code == 431
        assert got.value.body["code"] == "headers_too_large"  # type: ignore[index]
        claude = anthropic.Anthropic(base_url=url, api_key="k", default_headers=big, max_retries=0)
        with pytest.raises(anthropic.APIStatusError) as refused:
            claude.messages.create(
                model="claude-x", max_tokens=8, messages=[{"role": "user", "content": "x"}]
            )
        assert refused.value.status_code == 431
        assert refused.value.body["error"]["message"].startswith("Request headers too large")  # type: ignore[index]
        answer = httpx.post(
            f"{url}/v1beta/models/gemini-2.5-flash:generateContent", json={}, headers=big
        )
        assert answer.status_code == 431
        assert answer.json()["error"]["code"] == 431 and answer.json()["error"]["status"]
    finally:
        stop(server)


def test_idle_connections_end(fake_upstream: FakeUpstream, tmp_path: Path) -> None:
    settings = proxy_settings(
        fake_upstream.base_url, server={"header_timeout_s": 0.5, "keep_alive_s": 0.5}
    )
    server, url = serve_like_cli(settings, str(tmp_path / "db"))
    try:
        started = time.monotonic()
        assert raw_request(url, b"") == b""  # connected, never spoke: closed, no answer
        assert time.monotonic() - started < 3
        started = time.monotonic()
        kept = raw_request(url, b"GET /healthz HTTP/1.1\r\nHost: p\r\n\r\n")
        assert kept.startswith(b"HTTP/1.1 200") and kept.count(b"HTTP/1.1") == 1
        assert time.monotonic() - started < 3  # kept alive, then closed when idle
    finally:
        stop(server)


def test_max_connections_bounds_what_is_served(fake_upstream: FakeUpstream, tmp_path: Path) -> None:
    # the whole share to one address: the server's own bound is under test here
    server = {"max_connections": 4, "max_connections_per_address": 5}
    settings = proxy_settings(fake_upstream.base_url, server=server)
    server, url = serve_like_cli(settings, str(tmp_path / "db"))
    host, port = url.removeprefix("http://").split(":")
    held = [socket.create_connection((host, int(port))) for _ in range(4)]
    try:
        time.sleep(0.2)
        over = raw_request(url, b"GET /healthz HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n")
        assert over.startswith(b"HTTP/1.1 503")
    finally:
        for s in held:
            s.close()
    try:
        time.sleep(0.2)
        assert httpx.get(url + "/healthz").status_code == 200
    finally:
        stop(server)


@pytest.mark.parametrize(
    ("server", "problem"),
    [
        ({"header_timeout_s": 0}, "server.header_timeout_s"),
        ({"keep_alive_s": -1}, "server.keep_alive_s"),
        ({"max_connections": 0}, "server.max_connections"),
        ({"max_connections_per_address": 0}, "server.max_connections_per_address"),
        ({"max_header_bytes": 100}, "server.max_header_bytes"),
        ({"header_timeout": 5}, "server.header_timeout"),
    ],
)
def test_server_limits_are_validated(server: dict, problem: str) -> None:
    from proxy.settings import SettingsError, settings_from_mapping

    with pytest.raises(SettingsError, match=problem.replace(".", r"\.")):
        settings_from_mapping({"server": server})


def test_the_served_process_hands_the_interpreter_to_its_loop_within_half_a_millisecond() -> None:
    """A body worked on in a worker thread kept the event loop waiting 5 ms (CPython's default)
    at each of its turns: another tenant's small request waited 19-26 ms at the p50."""
    from proxy.server.protocol import server_config
    from proxy.serving_settings import ServerSettings

    before = sys.getswitchinterval()
    try:
        sys.setswitchinterval(0.005)
        server_config(object(), ServerSettings(), "127.0.0.1", 0)
        assert sys.getswitchinterval() == pytest.approx(0.0005)
    finally:
        sys.setswitchinterval(before)


@pytest.mark.parametrize(
    "head",
    [
        b"GET /v1/models HTTP/1.1\r\n",  # answered at once, its body never read
        b"POST /nothing-here HTTP/1.1\r\n",  # a 404
        b"POST /healthz HTTP/1.1\r\n",  # a 405
    ],
    ids=["model-list", "unknown-path", "wrong-method"],
)
def test_an_answer_before_the_body_ends_closes_the_connection(
    fake_upstream: FakeUpstream, tmp_path: Path, head: bytes
) -> None:
    """Answered before its body had arrived, a connection stayed open while the client trickled
    the rest (uvicorn reads it through to reach a next request): 300 s and more, past the body
    read timeout, a thousand such connections from two addresses. It closes once answered."""
    server, url = serve_like_cli(proxy_settings(fake_upstream.base_url), str(tmp_path / "db"))
    try:
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=5) as s:
            s.sendall(head + b"Host: p\r\nContent-Length: 100000\r\n\r\n{")
            deadline, out, closed = time.monotonic() + 5, b"", False
            while time.monotonic() < deadline and not closed:
                ready, _, _ = select.select([s], [], [], 0.2)
                try:
                    if ready:
                        chunk = s.recv(65536)
                        closed = not chunk
                        out += chunk
                    else:
                        s.sendall(b"x")  # the client trickles on
                except (ConnectionResetError, BrokenPipeError):
                    closed = True
        assert out.startswith(b"HTTP/1.1 "), out[:100]
        assert closed, "the connection was held open while the body trickled"
    finally:
        stop(server)


def test_the_431_log_line_holds_no_key_given_in_the_path(
    fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    """A base URL holding its key as a path segment (``http://proxy/sk-…/v1``): the request
    refused for its headers is logged with its path, redacted."""
    key = "sk-proj-Hv7Tq2LmR9xKp4WzN8cBf3YdJ6sG1aE0uIoPlMnB"
    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("ctxproxy.server")
    logger.addHandler(handler)
    settings = proxy_settings(fake_upstream.base_url, server={"max_header_bytes": 4096})
    server, url = serve_like_cli(settings, str(tmp_path / "db"))
    try:
        big = f"POST /{key}/v1/chat/completions HTTP/1.1\r\nHost: p\r\nX-Big: ".encode()
        assert raw_request(url, big + b"a" * 5000 + b"\r\n\r\n").startswith(b"HTTP/1.1 431")
    finally:
        stop(server)
        logger.removeHandler(handler)
    assert any(line.startswith("431") for line in seen), seen
    assert [line for line in seen if key[:12] in line] == []
