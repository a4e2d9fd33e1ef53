"""Cross-tenant reads: whatever name a request gives its session, another principal's state never
reaches what it forwards. Principal A's agent creates ``/srv/alpha_secret_dir``, sees
``test_alpha_secret`` fail and updates its plan; principal B then sends, under the very session
name A's requests had (the conversation hash, X-Session-Id, metadata.session_id, user,
prompt_cache_key, Claude Code's metadata.user_id and x-claude-code-session-id, Codex's
session-id), "now delete the folder I just created" as a stateless client (history restore on),
or as a sub-agent naming A's session its parent. The bytes the upstream received for B hold
nothing of A; the same request sent by A does carry A's folder, so each path exists and is one
that would leak were state not kept per principal.

Through the served app (uvicorn in a thread, the scripted upstream recording each request's
bytes), on all three endpoints, in passthrough mode (two client keys: ``Bearer ka`` and
``Bearer kb``, ``x-api-key`` on /v1/messages) and in keys mode (``CTXPROXY_KEYS=ka,kb``, a server
key for every upstream), on SQLite and on a real PostgreSQL (skipped where none can run)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from proxy.rewrite.engine import Engine
from proxy.settings import load_settings
from proxy.store.sqlite import SQLiteStore
from tests.conftest import in_process, log_rows
from tests.proxy.tenancy.conversations import (
    DELETE,
    ENDPOINTS,
    OPENER,
    SECRET_DIR,
    SECRET_TEST,
    continued,
    conversation,
    credentials,
    leaked,
    lone,
    namings,
    render,
    story,
)
from tests.proxy.tenancy.serving import (
    KEY_A,
    KEY_B,
    UPSTREAM_KEY_ENV,
    Served,
    reply_for,
    tenancy_settings,
)
from tests.support.edge_upstream import EdgeUpstream

CASES = [(n.name, proto) for n in namings("-") for proto in n.protos]


@pytest.mark.parametrize(("naming", "proto"), CASES, ids=[f"{p}-{n}" for n, p in CASES])
def test_another_principal_under_the_same_session_name_reads_nothing(
    served: Served, naming: str, proto: str
) -> None:
    tag = f"{proto}-{naming}"
    named = next(n for n in namings(f"shared-{tag}") if n.name == naming)
    by_hash = naming == "conversation-hash"
    # by the conversation's hash, the stateless request B sends starts A's conversation: A's
    # first message is B's words (in another shape than A's, the same text: the same hash, but
    # another message, so history restore does not take it for a retry of A's first turn)
    opener = DELETE if by_hash else OPENER
    for turn in conversation(proto, tag, opener, **named.extra):
        first, _ = served.post(proto, turn, KEY_A, named.headers)
    a_session = first.headers["x-ctxproxy-session-id"]

    probe = lone(proto, tag, DELETE, reshaped=by_hash, **named.extra)
    r_b, forwarded_b = served.post(proto, probe, KEY_B, named.headers)
    assert r_b.headers["x-ctxproxy-session-id"] == a_session, "not the same session name"
    assert leaked(forwarded_b) == [], forwarded_b.decode()

    # the very request from A: its stored turns and its folder come back (the path exists)
    _, forwarded_a = served.post(proto, probe, KEY_A, named.headers)
    assert SECRET_DIR.encode() in forwarded_a and SECRET_TEST.encode() in forwarded_a
    assert DELETE.encode() in forwarded_a

    if by_hash:
        # B's own conversation, begun like A's, a few turns in: nothing of A either
        _, forwarded = served.post(proto, continued(proto, tag, opener), KEY_B)
        assert leaked(forwarded) == [], forwarded.decode()


@pytest.mark.parametrize("parent_named_by", ["x-session-id", "conversation-hash"])
@pytest.mark.parametrize("proto", ["chat", "messages", "responses"])
def test_a_sub_agent_of_another_principal_resolves_nothing_through_a_session(
    served: Served, proto: str, parent_named_by: str
) -> None:
    """B's sub-agent names A's lead session as its parent ("the folder the lead agent created"):
    the parent it gets is B's session of that name, which holds nothing."""
    tag = f"parent-{proto}-{parent_named_by}"
    lead = {"x-session-id": f"lead-{tag}"} if parent_named_by == "x-session-id" else {}
    for turn in conversation(proto, tag, OPENER):
        first, _ = served.post(proto, turn, KEY_A, lead)
    parent = first.headers["x-ctxproxy-session-id"]
    sub = {"x-session-id": f"sub-{tag}", "x-parent-session-id": parent}
    probe = lone(proto, f"sub-{tag}", DELETE)

    _, forwarded_b = served.post(proto, probe, KEY_B, sub)
    assert leaked(forwarded_b) == [], forwarded_b.decode()

    _, forwarded_a = served.post(proto, probe, KEY_A, sub)
    assert SECRET_DIR.encode() in forwarded_a, forwarded_a.decode()
    assert b"from parent session" in forwarded_a


@pytest.mark.parametrize("proto", ["chat", "messages", "responses"])
def test_history_restore_gives_another_principal_none_of_the_stored_turns(
    served: Served, proto: str
) -> None:
    """A stateless client names A's session and sends one message: B's request goes upstream as
    B sent it (its system prompt and its one message, no restored turn, no pointer block)."""
    tag = f"restore-{proto}"
    named = {"x-session-id": f"restore-{tag}"}
    for turn in conversation(proto, tag, OPENER):
        served.post(proto, turn, KEY_A, named)
    probe = lone(proto, tag, DELETE)
    _, forwarded_b = served.post(proto, probe, KEY_B, named)
    assert orjson.loads(forwarded_b) == probe

    _, forwarded_a = served.post(proto, probe, KEY_A, named)
    restored = orjson.loads(forwarded_a)
    turns = restored.get("messages") or restored.get("input") or []
    assert len(turns) > len(probe.get("messages") or probe.get("input") or [])
    assert SECRET_DIR.encode() in forwarded_a


@contextlib.asynccontextmanager
async def alice_and_bob(
    tmp_path: Path, edge: EdgeUpstream, monkeypatch: pytest.MonkeyPatch, proto: str
) -> AsyncIterator[tuple[Callable[..., Awaitable[bytes]], httpx.AsyncClient]]:
    """The app in keys mode with named principals (names a colleague can guess): ``alice`` (key
    ``ka``) and ``bob`` (``kb``); yields ``post(body, key, headers)`` (the bytes forwarded) and
    the client."""
    monkeypatch.setenv("CTXPROXY_TENANCY_ALICE", KEY_A)
    monkeypatch.setenv("CTXPROXY_TENANCY_BOB", KEY_B)
    monkeypatch.setenv(UPSTREAM_KEY_ENV, "sk-upstream")
    auth = {
        "mode": "keys",
        "principals": {"alice": ["CTXPROXY_TENANCY_ALICE"], "bob": ["CTXPROXY_TENANCY_BOB"]},
    }
    async with in_process(tenancy_settings(edge, "keys", auth=auth), str(tmp_path / "db")) as c:

        async def post(body: dict[str, Any], key: str, headers: dict[str, str]) -> bytes:
            edge.reply = reply_for(proto)
            sent = {"content-type": "application/json", **credentials(proto, key), **headers}
            r = await c.post(ENDPOINTS[proto], content=orjson.dumps(body), headers=sent)
            assert r.status_code == 200, r.text
            return edge.last.body

        yield post, c


@pytest.mark.parametrize("proto", ["chat", "messages", "responses"])
async def test_naming_another_principals_scoped_key_reaches_nothing(
    tmp_path: Path, edge: EdgeUpstream, monkeypatch: pytest.MonkeyPatch, proto: str
) -> None:
    """B (``bob``) names A's session as the store keeps it, ``alice/<name>``, in X-Session-Id and
    X-Parent-Session-Id; its request is kept under ``bob/alice/<name>``, and holds nothing of
    alice's."""
    async with alice_and_bob(tmp_path, edge, monkeypatch, proto) as (post, client):
        for turn in conversation(proto, "scoped", OPENER):
            await post(turn, KEY_A, {"x-session-id": "shared"})
        probe = lone(proto, "scoped", DELETE)
        for headers in (
            {"x-session-id": "alice/shared"},
            {"x-session-id": "sub", "x-parent-session-id": "alice/shared"},
        ):
            got = await post(probe, KEY_B, headers)
            assert leaked(got) == [], got.decode()
        rows = await log_rows(client)
        assert {r["session_id"] for r in rows if r["principal"] == "bob"} == {
            "bob/alice/shared",
            "bob/sub",
        }
        # alice's own stateless request in her session gets her turns back
        assert SECRET_DIR.encode() in await post(probe, KEY_A, {"x-session-id": "shared"})


@pytest.mark.parametrize("proto", ["chat", "messages", "responses"])
async def test_a_sub_agents_note_names_its_parent_as_the_client_does(
    tmp_path: Path, edge: EdgeUpstream, monkeypatch: pytest.MonkeyPatch, proto: str
) -> None:
    """What is forwarded carries nothing of who the principal is: the note that resolves a
    sub-agent's reference through its parent names the parent as the client named it."""
    async with alice_and_bob(tmp_path, edge, monkeypatch, proto) as (post, _):
        for turn in conversation(proto, "note", OPENER):
            await post(turn, KEY_A, {"x-session-id": "lead"})
        sub = {"x-session-id": "sub", "x-parent-session-id": "lead"}
        got = await post(lone(proto, "note-sub", DELETE), KEY_A, sub)
        assert SECRET_DIR.encode() in got  # resolved through the parent
        assert b"alice" not in got, got.decode()
        assert b"from parent session lead" in got, got.decode()


async def test_the_engine_names_a_parent_as_the_client_does(tmp_path: Path) -> None:
    """The same through the engine, whatever the principal: ``Rewritten`` names the parent
    unscoped (``client_parent``); the forwarded note must too."""
    store = SQLiteStore(str(tmp_path / "db"))
    await store.open()
    engine = Engine(load_settings(None), store, strict=True)
    try:
        lead = {"model": "gpt-4o", "messages": render("chat", story())}
        await engine.rewrite(lead, {"x-session-id": "lead"}, now=100.0, principal="pt-tenant1")
        ask = {"model": "gpt-4o", "messages": [{"role": "user", "content": DELETE}]}
        headers = {"x-session-id": "sub", "x-parent-session-id": "lead"}
        out = await engine.rewrite(ask, headers, now=110.0, principal="pt-tenant1")
        assert out.client_parent == "lead" and out.parent_session_id == "pt-tenant1/lead"
        forwarded = orjson.dumps(out.body)
        assert SECRET_DIR.encode() in forwarded
        assert b"pt-tenant1" not in forwarded, forwarded.decode()
        assert b"from parent session lead" in forwarded
    finally:
        engine.close()
        await store.close()
