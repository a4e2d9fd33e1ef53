"""The provider's cache diagnostics, asked for by the proxy (``upstreams[].cache_diagnostics``):
the real Anthropic and OpenAI SDKs through a live proxy to fakes that answer the documented
shapes (``tests/support/diagnosing_upstreams.py``). Each request names the session's previous
answer; the verdict lands in the request's cache line beside the proxy's own attribution; the
client still reads its answer; with the option off nothing is asked."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from tests.conftest import LiveProxy
from tests.support.agent_proxy import agent_settings, row_of
from tests.support.diagnosing_upstreams import BETA, DiagnosingAnthropic, DiagnosingResponses
from tests.support.live import stop
from tests.support.served import serve_like_cli

SYSTEM = "You are a careful coding agent."
TOOL = {"type": "function", "name": "shell", "parameters": {"type": "object"}}


@pytest.fixture(scope="module")
def upstreams() -> Iterator[tuple[DiagnosingAnthropic, DiagnosingResponses]]:
    a, r = DiagnosingAnthropic(), DiagnosingResponses()
    a.start()
    r.start()
    yield a, r
    a.stop()
    r.stop()


@pytest.fixture
def proxy_for(upstreams, tmp_path: Path) -> Iterator[Any]:  # type: ignore[no-untyped-def]
    servers = []

    def start(diagnose: bool) -> LiveProxy:
        a, r = upstreams
        for fake in (a, r):
            fake.reset()
            fake.prints.clear()
        settings = agent_settings(a.url, r.base_url)
        data = settings.model_dump()
        for upstream in data["upstreams"]:
            upstream["cache_diagnostics"] = diagnose
        from proxy.settings import settings_from_mapping

        settings = settings_from_mapping(data)
        server, url = serve_like_cli(settings, str(tmp_path / f"d{len(servers)}.db"))
        servers.append(server)
        return LiveProxy(url, str(tmp_path / f"d{len(servers) - 1}.db"))

    yield start
    for server in servers:
        stop(server)


def claude(proxy: LiveProxy, system: str, turns: list[str], stream: bool) -> Any:
    client = anthropic.Anthropic(base_url=proxy.url, api_key="sk-ant-test-1234", max_retries=0)
    messages: list[Any] = []
    for i, text in enumerate(turns):
        if i:
            messages.append({"role": "assistant", "content": f"done {i}"})
        messages.append({"role": "user", "content": text})
    kw: dict[str, Any] = {
        "model": "claude-opus-5-5",
        "max_tokens": 64,
        "system": system,
        "messages": messages,
        "extra_headers": {"x-session-id": "diag-a"},
    }
    if not stream:
        raw = client.messages.with_raw_response.create(**kw)
        assert raw.parse().content[0].type == "text"  # the client reads its answer
        return raw.headers
    with client.messages.stream(**kw) as s:
        assert s.get_final_message().content[0].type == "text"
        return s.response.headers


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_anthropic_diagnostics_name_the_previous_message(proxy_for, upstreams, stream) -> None:  # type: ignore[no-untyped-def]
    proxy = proxy_for(True)
    fake = upstreams[0]
    first = row_of(proxy, claude(proxy, SYSTEM, ["fix calc.py"], stream))
    second = row_of(proxy, claude(proxy, SYSTEM, ["fix calc.py", "and tests"], stream))
    turns = ["fix calc.py", "and tests", "and docs"]
    third = row_of(proxy, claude(proxy, "Be terse. " + SYSTEM, turns, stream))

    sent = fake.messages
    assert [s.json["diagnostics"] for s in sent[:1]] == [{"previous_message_id": None}]
    ids = list(fake.prints)
    assert sent[1].json["diagnostics"] == {"previous_message_id": ids[0]}
    assert sent[2].json["diagnostics"] == {"previous_message_id": ids[1]}
    assert all(BETA in (s.header("anthropic-beta") or "") for s in sent)
    assert "provider" not in first["cache"]  # nothing to compare with: no verdict
    assert second["cache"]["provider"] == {"reason": "no_divergence", "compared_with": ids[0]}
    verdict = third["cache"]["provider"]
    assert verdict["reason"] == "system_changed" and verdict["missed_tokens"] > 0
    assert verdict["compared_with"] == ids[1]
    # the proxy's own attribution of the same request, beside it
    assert third["cache"]["changed_by"] == "client" and third["cache"]["where"] == "system"


def test_responses_diagnostics_compare_with_the_previous_response(proxy_for, upstreams) -> None:  # type: ignore[no-untyped-def]
    proxy = proxy_for(True)
    fake = upstreams[1]
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test-1234", max_retries=0)
    rows = []
    for tools in ([TOOL], [TOOL], [TOOL, {**TOOL, "name": "grep"}]):
        raw = client.responses.with_raw_response.create(
            model="gpt-5.6",
            instructions=SYSTEM,
            input=[{"role": "user", "content": f"step {len(rows)}"}],
            tools=tools,  # type: ignore[arg-type]
            extra_headers={"x-session-id": "diag-r"},
        )
        assert raw.parse().output_text  # the client reads its answer
        rows.append(row_of(proxy, raw.headers))
    sent, ids = fake.responses, list(fake.prints)
    assert "prompt_cache_options" not in sent[0].json  # nothing to compare with yet
    assert sent[1].json["prompt_cache_options"] == {"comparison_response_id": ids[0]}
    assert sent[2].json["prompt_cache_options"] == {"comparison_response_id": ids[1]}
    assert rows[1]["cache"]["provider"]["reason"] == "input_changed"  # a new user item
    assert rows[2]["cache"]["provider"]["reason"] == "tools_changed"
    assert rows[2]["cache"]["where"] == "tools"


def test_off_by_default_nothing_is_asked(proxy_for, upstreams) -> None:  # type: ignore[no-untyped-def]
    proxy = proxy_for(False)
    fake = upstreams[0]
    row_of(proxy, claude(proxy, SYSTEM, ["fix calc.py"], False))
    row = row_of(proxy, claude(proxy, SYSTEM, ["fix calc.py", "and tests"], False))
    assert all("diagnostics" not in s.json for s in fake.messages)
    assert all(BETA not in (s.header("anthropic-beta") or "") for s in fake.messages)
    assert "provider" not in row["cache"]
