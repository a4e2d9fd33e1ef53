"""Tier 3, a scaffolding run: a fresh ``serve`` with ``workspace.root`` on a temporary project,
Claude Code (``claude -p``) in that project, a scripted Anthropic upstream. The model lists the
folder through ``Bash`` and answers. The second request brings the upstream the bootstrap
picture (the project's type and manifest, its tree, the README's first paragraph, the agent
instruction files) in a ``<ctxproxy-context>`` block, which a later request carries again byte
for byte where it was placed; the request's report says where the picture came from. The same
with Codex (``codex exec``) on the Responses API.

Installed by ``bin/test`` (npm); without it these tests skip with the reason."""

from __future__ import annotations

import json
from pathlib import Path

import orjson

from tests.support.agent_clis import Claude, Codex
from tests.support.agent_proxy import completed_rows, injected_block, last_user_side_text
from tests.support.protocol_upstreams import (
    AnthropicUpstream,
    ResponsesUpstream,
    tool,
    tool_then_text,
)

README = "# scaffold\n\nA tiny web service that greets visitors by name.\n\n## Run\n\nnpm start\n"


def _project(root: Path) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "src" / "index.js").write_text("console.log('hi')\n")
    (root / "package.json").write_text(
        json.dumps({"name": "greeter", "main": "src/index.js", "scripts": {"start": "node ."}})
    )
    (root / "README.md").write_text(README)
    (root / "CLAUDE.md").write_text("Use two-space indentation.\n")
    (root / ".env").write_text("GREETER_SECRET=do-not-show-me\n")
    return root


def test_a_fresh_serve_shows_the_workspace_by_the_second_request(
    agent_proxy,
    anthropic_upstream: AnthropicUpstream,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    work = _project(tmp_path / "work")
    proxy = agent_proxy(workspace={"root": str(work)})
    anthropic_upstream.responder = tool_then_text(
        tool("Bash", command="ls", description="List the project"), "The project is a greeter."
    )
    claude = Claude(proxy.url, tmp_path / "home", work)
    run = claude.run("scaffold a /health route")
    assert run.returncode == 0, run.explain()
    assert orjson.loads(run.stdout)["result"] == "The project is a greeter."

    posts = anthropic_upstream.messages
    assert len(posts) >= 2
    # the first request's user message is never altered; the second carries the picture
    assert "<ctxproxy-context>" not in orjson.dumps(posts[0].json["messages"]).decode()
    block = injected_block(last_user_side_text(posts[1]))
    assert f"Workspace: root {work}: node project" in block
    assert "manifests: package.json (greeter, main src/index.js, scripts start)" in block
    assert "README.md: A tiny web service that greets visitors by name." in block
    assert "agent instructions: CLAUDE.md" in block
    assert "src/ (index.js)" in block
    assert ".env" not in block and "do-not-show-me" not in block
    # said once: the next turn (``--continue``) carries that very block where it was placed
    anthropic_upstream.responder = tool_then_text(
        tool("Bash", command="ls src", description="List the sources"), "Added the route."
    )
    again = claude.run("now add the route", "--continue")
    assert again.returncode == 0, again.explain()
    posts = anthropic_upstream.messages
    assert len(posts) >= 3
    last = orjson.dumps(posts[2].json["messages"]).decode()  # the continued turn's first
    assert last.count("Workspace: root") == 1
    assert orjson.dumps(block).decode()[1:-1] in last

    rows = completed_rows(proxy, len(posts))
    sources = [(r.get("report") or {}).get("workspace", {}).get("source") for r in rows]
    assert sources[:3] == ["bootstrap", "observed+bootstrap", "observed+bootstrap"], sources
    taken = [
        r["report"]["workspace"]["bootstrap"]
        for r in rows
        if "bootstrap" in r["report"].get("workspace", {})
    ]
    assert len(taken) == 1 and taken[0]["root"] == str(work) and taken[0]["ms"] >= 0


def test_codex_gets_the_workspace_by_the_second_request(
    agent_proxy,
    responses_upstream: ResponsesUpstream,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    """The same scaffolding run with Codex (``codex exec``, Responses API)."""
    work = _project(tmp_path / "work")
    proxy = agent_proxy(workspace={"root": str(work)})
    responses_upstream.responder = tool_then_text(tool("exec_command", cmd="ls"), "A greeter.")
    run = Codex(proxy.base_url, tmp_path / "home", work).run("scaffold a /health route")
    assert run.returncode == 0, run.explain()
    first, second = responses_upstream.responses[:2]
    assert "<ctxproxy-context>" not in orjson.dumps(first.json["input"]).decode()
    block = injected_block(last_user_side_text(second))
    assert f"Workspace: root {work}: node project" in block
    assert "agent instructions: CLAUDE.md" in block and "do-not-show-me" not in block
