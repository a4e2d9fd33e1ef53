"""Out of the box: ``bin/serve`` itself (config.example.yaml, unedited), with only its upstreams'
base URLs moved the documented way (``CTXPROXY_UPSTREAM_<NAME>_BASE_URL``) to the scripted
Anthropic and Responses upstreams on loopback. The real Claude Code 2.1.330 and Codex 0.169.0
each complete a tool round trip (the folder really exists afterwards) with their own keys, which
reach the provider untouched; so do the OpenAI and Anthropic SDKs. No provider key is in the
server's environment.

The CLIs are installed by ``bin/test`` (npm); without them their tests skip with the reason."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from tests.conftest import LiveProxy
from tests.support.agent_clis import CLAUDE_KEY, CODEX_KEY, Claude, Codex
from tests.support.agent_proxy import completed_rows
from tests.support.live import free_port
from tests.support.protocol_upstreams import (
    AnthropicUpstream,
    ResponsesUpstream,
    Turn,
    text,
    thinking,
    tool,
    tool_then_text,
)

ROOT = Path(__file__).resolve().parents[2]
MAKE = "make a folder for the build output"


class Served:
    """``bin/serve`` running in its own process group; its stderr collected as it comes."""

    def __init__(self, proc: subprocess.Popen[str], url: str, db: Path) -> None:
        self.proc, self.url, self.db = proc, url, db
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    def output(self) -> str:
        return "".join(self.lines)[-4000:]

    def wait_ready(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while True:
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"bin/serve did not start:\n{self.output()}")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def _server_env(anthropic_url: str, openai_base_url: str) -> dict[str, str]:
    """The test's environment without any provider key or proxy setting of our own, plus the
    documented overrides; ``bin/_env`` runs ``sys.prefix``'s venv (the one under test)."""
    dropped = ("ANTHROPIC_", "OPENAI_", "GEMINI_", "CTXPROXY_", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
    env.update(
        CTXPROXY_VENV=sys.prefix,
        CTXPROXY_UPSTREAM_CLAUDE_BASE_URL=anthropic_url,
        CTXPROXY_UPSTREAM_OPENAI_BASE_URL=openai_base_url,
    )
    return env


@pytest.fixture(scope="module")
def served(
    _anthropic_server: AnthropicUpstream,
    _responses_server: ResponsesUpstream,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Served]:
    if sys.prefix == sys.base_prefix:
        pytest.skip("bin/serve installs into a virtual environment; the tests run outside one")
    where = tmp_path_factory.mktemp("bin-serve")
    port = free_port()
    proc = subprocess.Popen(
        # the config's own database would be beside it, in the checkout: this run's is its own
        [str(ROOT / "bin" / "serve"), "--port", str(port), "--db", str(where / "ctxproxy.db")],
        cwd=where,
        env=_server_env(_anthropic_server.url, _responses_server.base_url),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    served = Served(proc, f"http://127.0.0.1:{port}", where / "ctxproxy.db")
    # bin/_env installs nothing when bin/test has just installed; a stale venv takes longer
    served.wait_ready(300)
    yield served
    served.stop()


@pytest.fixture
def proxy(served: Served) -> LiveProxy:
    return LiveProxy(served.url, str(served.db))


def _rows_since(proxy: LiveProxy, before: int, count: int) -> list[dict]:  # type: ignore[type-arg]
    return completed_rows(proxy, before + count)[before:]


def _count(proxy: LiveProxy) -> int:
    return len(completed_rows(proxy, 0))


def test_bin_serve_runs_the_example_config_with_the_overrides(served: Served) -> None:
    serve = (ROOT / "bin" / "serve").read_text()
    assert 'CTXPROXY_CONFIG="${CTXPROXY_CONFIG:-$ROOT/config.example.yaml}"' in serve
    assert 'exec "$VENV/bin/ctxproxy" serve "$@"' in serve
    (line,) = [x for x in served.lines if "listening on" in x]
    assert "claude (anthropic, base_url from CTXPROXY_UPSTREAM_CLAUDE_BASE_URL): claude-*" in line
    assert "openai (openai, base_url from CTXPROXY_UPSTREAM_OPENAI_BASE_URL): *" in line


@pytest.mark.parametrize("config", ["config.example.yaml", "deploy/ctxproxy.yaml"])
def test_every_shipped_config_routes_the_agents_natively(config: str) -> None:
    """config.example.yaml (bin/serve, and the image: see the Dockerfile's COPY) and the
    gateway example: Claude Code's models to a native Anthropic upstream, Gemini CLI's to a
    native Gemini one (the gateway's sent them to OpenAI with its OpenAI key), the rest to a
    native OpenAI one; litellm only where a config says so on purpose (none of these)."""
    from proxy.settings import load_settings

    assert "COPY config.example.yaml /config/config.yaml" in (ROOT / "Dockerfile").read_text()
    settings = load_settings(ROOT / config, environ={})
    for model, kind in [("claude-opus-5-5", "anthropic"), ("claude-haiku-5-5", "anthropic")]:
        assert getattr(settings.upstream_for(model), "kind", None) == kind, model
    for model in ("gpt-5", "gpt-5.5", "o4-mini"):
        assert getattr(settings.upstream_for(model), "kind", None) == "openai", model
    for model in ("gemini-3.1-pro-preview", "gemini-3.5-flash-lite"):  # Gemini CLI's, natively
        assert getattr(settings.upstream_for(model), "kind", None) == "gemini", model
    assert [u.name for u in settings.upstreams if u.kind == "litellm"] == []


def test_claude_code_completes_a_tool_round_trip(
    proxy: LiveProxy, anthropic_upstream: AnthropicUpstream, tmp_path: Path
) -> None:
    target = tmp_path / "work" / "build_output"
    anthropic_upstream.responder = tool_then_text(
        tool("Bash", command=f"mkdir -p {target} && echo made", description="Create the folder"),
        "Created the folder.",
        preface="I'll create the folder.",
        lead=[thinking("The user wants a folder; use Bash.")],
    )
    before = _count(proxy)
    claude = Claude(proxy.url, tmp_path / "home", tmp_path / "work")
    run = claude.run(MAKE, timeout=60)
    assert run.returncode == 0, run.explain()
    out = orjson.loads(run.stdout)
    assert (out["result"], out["is_error"]) == ("Created the folder.", False), run.explain()
    assert target.is_dir(), "the Bash tool did not run"
    first, second = anthropic_upstream.messages
    for seen in (first, second):  # natively relayed: the client's key, query and beta list
        assert (seen.path, seen.query) == ("/v1/messages", "beta=true")
        assert seen.header("x-api-key") == CLAUDE_KEY
        assert "claude-code-20250219" in (seen.header("anthropic-beta") or "")
    assert second.json["messages"][-1]["content"][0]["type"] == "tool_result"
    rows = _rows_since(proxy, before, 2)
    assert [(r["protocol"], r["upstream"], r["status"]) for r in rows] == [
        ("anthropic", "claude", 200)
    ] * 2


def test_codex_completes_a_tool_round_trip(
    proxy: LiveProxy, responses_upstream: ResponsesUpstream, tmp_path: Path
) -> None:
    target = tmp_path / "work" / "build_output"
    responses_upstream.responder = tool_then_text(
        tool("exec_command", cmd=f"mkdir -p {target}"), "Created."
    )
    before = _count(proxy)
    codex = Codex(proxy.base_url, tmp_path / "home", tmp_path / "work")
    run = codex.run(MAKE, timeout=60)
    assert run.returncode == 0 and run.stdout.strip().endswith("Created."), run.explain()
    assert target.is_dir(), "exec_command did not run"
    first, second = responses_upstream.responses
    for seen in (first, second):
        assert seen.path == "/v1/responses"
        assert seen.header("authorization") == f"Bearer {CODEX_KEY}"
    assert any(i.get("type") == "function_call_output" for i in second.json["input"])
    rows = _rows_since(proxy, before, 2)
    assert [(r["protocol"], r["upstream"], r["status"]) for r in rows] == [
        ("responses", "openai", 200)
    ] * 2


def test_the_openai_and_anthropic_sdks_use_their_own_keys(
    proxy: LiveProxy,
    anthropic_upstream: AnthropicUpstream,
    responses_upstream: ResponsesUpstream,
) -> None:
    from anthropic import Anthropic
    from openai import OpenAI

    responses_upstream.queue(Turn([text("Hello from OpenAI")]))
    openai = OpenAI(base_url=proxy.base_url, api_key="sk-openai-sdk-own-key", max_retries=0)
    answer = openai.responses.create(model="gpt-5", input="hi")
    assert answer.output_text == "Hello from OpenAI"
    assert responses_upstream.last.header("authorization") == "Bearer sk-openai-sdk-own-key"

    anthropic_upstream.queue(Turn([text("Hello from Claude")]))
    claude = Anthropic(base_url=proxy.url, api_key="sk-ant-sdk-own-key", max_retries=0)
    message = claude.messages.create(
        model="claude-opus-5-5", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    )
    assert [b.text for b in message.content if b.type == "text"] == ["Hello from Claude"]
    seen = anthropic_upstream.last  # this SDK sends its key as a bearer, passed through as sent
    assert "sk-ant-sdk-own-key" in (seen.header("x-api-key") or seen.header("authorization") or "")
