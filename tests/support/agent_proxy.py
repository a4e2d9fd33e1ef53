"""A live ctxproxy (served as ``ctxproxy serve`` serves it, ``tests/support/served.py``) in front
of the scripted protocol upstreams (``tests/support/protocol_upstreams.py``): ``claude-*`` goes to
an ``anthropic``-kind upstream, ``gpt-*`` to an ``openai``-kind one. Fixtures for the e2e tests of
the Anthropic Messages and Responses endpoints and of the agent CLIs (``tests/e2e/conftest.py``
exposes them), plus helpers to read what the upstream got and what the log says."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from rules.messages import INJECT_CLOSE, INJECT_OPEN
from tests.support.live import stop
from tests.support.protocol_upstreams import (
    AnthropicUpstream,
    ResponsesUpstream,
    Seen,
    start_anthropic_upstream,
    start_responses_upstream,
)

if TYPE_CHECKING:  # the proxy is imported when one starts, so the fakes work without it
    from proxy.settings import Settings
    from tests.conftest import LiveProxy


def agent_settings(anthropic_url: str, responses_base_url: str, **overrides: Any) -> Settings:
    from proxy.settings import settings_from_mapping

    data: dict[str, Any] = {
        "upstreams": [
            {
                "name": "anthropic-fake",
                "kind": "anthropic",
                "match": ["claude-*"],
                "base_url": anthropic_url,
            },
            {
                "name": "responses-fake",
                "kind": "openai",
                "match": ["gpt-*"],
                "base_url": responses_base_url,
            },
        ],
        "pipeline": {
            "on_rule_error": "fail",
            "context_windows": {"claude-*": 1_000_000, "gpt-*": 400_000},
        },
    }
    data.update(overrides)
    return settings_from_mapping(data)


@pytest.fixture(scope="session")
def _anthropic_server() -> Iterator[AnthropicUpstream]:
    up = start_anthropic_upstream()
    yield up
    up.stop()


@pytest.fixture(scope="session")
def _responses_server() -> Iterator[ResponsesUpstream]:
    up = start_responses_upstream()
    yield up
    up.stop()


@pytest.fixture
def anthropic_upstream(_anthropic_server: AnthropicUpstream) -> AnthropicUpstream:
    _anthropic_server.reset()
    return _anthropic_server


@pytest.fixture
def responses_upstream(_responses_server: ResponsesUpstream) -> ResponsesUpstream:
    _responses_server.reset()
    _responses_server.ws_status = 426
    return _responses_server


@pytest.fixture
def agent_proxy(
    anthropic_upstream: AnthropicUpstream, responses_upstream: ResponsesUpstream, tmp_path: Path
) -> Iterator[Callable[..., LiveProxy]]:
    """``agent_proxy(**overrides)``: a live proxy (a uvicorn server configured like
    ``ctxproxy serve``) in front of both scripted upstreams."""
    servers = []

    def start(settings: Settings | None = None, **overrides: Any) -> LiveProxy:
        from tests.conftest import LiveProxy
        from tests.support.served import serve_like_cli

        settings = settings or agent_settings(
            anthropic_upstream.url, responses_upstream.base_url, **overrides
        )
        db = str(tmp_path / f"agent-proxy{len(servers)}.db")
        server, url = serve_like_cli(settings, db)
        servers.append(server)
        return LiveProxy(url, db)

    yield start
    for server in servers:
        stop(server)


# ---------------------------------------------------------------------------------------------
# Reading the log


def completed_rows(proxy: LiveProxy, count: int, timeout: float = 5.0) -> list[dict[str, Any]]:
    """The log's rows once at least ``count`` are complete (status set), oldest first."""
    deadline = time.time() + timeout
    rows: list[dict[str, Any]] = []
    while time.time() < deadline:
        rows = [r for r in proxy.rows() if r["status"] is not None]
        if len(rows) >= count:
            return rows
        time.sleep(0.02)
    raise AssertionError(f"expected {count} completed log rows, got {len(rows)}: {rows}")


def row_of(proxy: LiveProxy, headers: Any) -> dict[str, Any]:
    """The log row of the request whose response carried ``headers``."""
    request_id = headers.get("x-ctxproxy-request-id")
    assert request_id, f"no x-ctxproxy-request-id in {dict(headers)}"
    return proxy.row(request_id)


def section(row: dict[str, Any], name: str, side: str = "before") -> int:
    sections = row.get("sections") or {}
    value = sections.get(name) or {}
    return int(value.get(side) or 0)


# ---------------------------------------------------------------------------------------------
# Reading what the upstream got


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    out: list[str] = []
    for part in content or []:
        if isinstance(part, dict):
            if isinstance(part.get("text"), str):
                out.append(part["text"])
            elif part.get("type") == "tool_result":
                out.extend(_texts(part.get("content")))
    return out


def last_user_side_text(seen: Seen) -> str:
    """All text of the request's last user-side turn: the last ``messages`` entry that is not
    a ``role: "system"`` notice (Anthropic), or the ``input`` items after the last assistant
    output (Responses)."""
    body = seen.json
    assert isinstance(body, dict), seen.raw[:200]
    if "messages" in body:
        turns = [m for m in body["messages"] if m.get("role") != "system"]
        return "\n".join(_texts(turns[-1].get("content")))
    items = body.get("input")
    if isinstance(items, str):
        return items
    tail: list[str] = []
    for item in reversed(items or []):
        if item.get("role") == "assistant" or item.get("type") in (
            "function_call",
            "custom_tool_call",
            "reasoning",
        ):
            break
        if item.get("type") in ("function_call_output", "custom_tool_call_output"):
            tail.insert(0, str(item.get("output")))
        else:
            tail[:0] = _texts(item.get("content"))
    return "\n".join(tail)


def injected_block(text: str) -> str:
    """The ``<ctxproxy-context>`` block in ``text`` (asserting there is one)."""
    start = text.find(INJECT_OPEN)
    assert start >= 0, f"no {INJECT_OPEN} block in the last user-side text:\n{text[-2000:]}"
    end = text.find(INJECT_CLOSE, start)
    assert end > start, f"{INJECT_OPEN} is not closed:\n{text[start:][:2000]}"
    return text[start : end + len(INJECT_CLOSE)]
