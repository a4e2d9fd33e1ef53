"""Secrets a client sends never rest in the database nor show on /ui or /metrics: the session state
and the rule report (copies the rules make of user text, commands, tool output, plans) are
redacted like captured payloads, with ``capture_payloads`` off and on."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from urllib.parse import unquote

import orjson
import pytest

from tests.conftest import in_process, log_rows, proxy_settings
from tests.support.factories import assistant, call, request, result, shell, user

OPENAI_KEY = "sk-proj-GOALabcdefgh12345678"
INSTRUCTION_KEY = "xoxb-1234567890-abcdefghijk"
GITHUB_TOKEN = "ghp_" + "A1b2C3d4E5" * 4
DB_PASSWORD = "Sup3rSecretPassw0rd"
PLAN_KEY = "sk-ant-PLANabcdefgh12345678"
PATH_KEY = "sk-proj-PATHabcdefgh12345678"
SESSION_KEY = "sk-proj-SESSIONabcdefgh12345678"
MODEL_KEY = "sk-proj-MODELabcdefgh12345678"
SECRETS = (
    OPENAI_KEY,
    INSTRUCTION_KEY,
    GITHUB_TOKEN,
    DB_PASSWORD,
    PLAN_KEY,
    PATH_KEY,
    SESSION_KEY,
    MODEL_KEY,
)


def conversation() -> list[dict[str, object]]:
    """Every place a rule copies client text from: the goal and the latest instruction, shell
    commands (entities and the working set), file paths, failing test output (diagnostics), a
    plan, a tool result."""
    todo = {"todos": [{"content": f"rotate key {PLAN_KEY}", "status": "in_progress"}]}
    return [
        user(f"Deploy the app with OPENAI_API_KEY={OPENAI_KEY} and fix the login test"),
        assistant(None, call("c1", "TodoWrite", **todo)),
        result("c1", "Todos updated"),
        assistant(
            None, shell("c2", f"export GITHUB_TOKEN={GITHUB_TOKEN} && mkdir -p /tmp/{PATH_KEY}")
        ),
        result("c2", ""),
        assistant(None, shell("c3", f"PGPASSWORD={DB_PASSWORD} pytest tests/test_login.py")),
        result(
            "c3",
            "tests/test_login.py:12: AssertionError\n"
            f"FAILED tests/test_login.py::test_login - AssertionError: password={DB_PASSWORD}\n"
            "=========== 1 failed in 0.12s ===========\n",
        ),
        user(f"now use the token {INSTRUCTION_KEY} and delete the folder you just created"),
    ]


def _dump(db_path: str) -> str:
    with contextlib.closing(sqlite3.connect(db_path)) as db:
        return "\n".join(db.iterdump())


@pytest.mark.parametrize("capture", [False, True])
async def test_no_secret_rests_in_the_database_or_shows_on_ui(
    tmp_path: Path, edge, capture: bool
) -> None:
    db = str(tmp_path / "db")
    settings = proxy_settings(edge.base_url, store={"capture_payloads": capture})
    body = request(*conversation(), model=MODEL_KEY)
    async with in_process(settings, db) as client:
        first = await client.post(
            "/v1/chat/completions",
            content=orjson.dumps(body),
            headers={"content-type": "application/json", "x-session-id": SESSION_KEY},
        )
        assert first.status_code == 200
        # the next request of the session reads the stored state back and adds to it
        second_body = request(*conversation(), assistant("done"), user("thanks"), model=MODEL_KEY)
        second = await client.post(
            "/v1/chat/completions",
            content=orjson.dumps(second_body),
            headers={"content-type": "application/json", "x-session-id": SESSION_KEY},
        )
        assert second.status_code == 200
        # the secrets did go upstream (the user's own provider): only what rests is redacted
        assert OPENAI_KEY in edge.last.body.decode()
        rows = await log_rows(client)
        session = first.headers["x-ctxproxy-session-id"]
        assert SESSION_KEY not in session and session == second.headers["x-ctxproxy-session-id"]
        session = rows[0]["session_id"]  # scoped by its principal, as the pages name it
        assert session.endswith("/" + unquote(first.headers["x-ctxproxy-session-id"]))
        pages = [
            await client.get("/ui"),
            await client.get(f"/ui/sessions/{session}"),
            *[await client.get(f"/ui/requests/{row['id']}") for row in rows],
            await client.get("/metrics"),
        ]
        assert all(p.status_code == 200 for p in pages), [p.status_code for p in pages]
        store = client.app.state.services.store  # type: ignore[attr-defined]
        state, _ = await store.load_state(session)
    dump = _dump(db)
    # the rules did copy those fields (so the test would see a leak): the ledger and entities
    ledger = state.get("working_set") or {}
    assert "[REDACTED]" in ledger.get("goal", "")
    assert "[REDACTED]" in ledger["plan"][0]["text"]
    # a folder whose path holds a key is not tracked at all (a redacted pointer would be wrong);
    # the exported variable is, by its name (its value redacted: the dump below)
    assert [e["path"] for e in state.get("entities") or []] == ["env_var:GITHUB_TOKEN"]
    assert "[REDACTED]" in dump
    for secret in SECRETS:
        assert secret not in dump, f"{secret} rests in the database"
        for page in pages:
            assert secret not in page.text, f"{secret} shows on {page.url}"


async def test_state_redaction_keeps_a_session_stable_across_requests(tmp_path: Path, edge) -> None:
    """The redacted state is what the next request sees, from memory or from the database alike:
    a restart does not change what the rules do."""
    settings = proxy_settings(edge.base_url)
    body = request(*conversation())
    headers = {"content-type": "application/json", "x-session-id": "s1"}
    forwarded = []
    for _ in range(2):  # two app lifetimes on one database: the second reads the state back
        async with in_process(settings, str(tmp_path / "db")) as client:
            for _ in range(2):
                r = await client.post(
                    "/v1/chat/completions", content=orjson.dumps(body), headers=headers
                )
                assert r.status_code == 200
                forwarded.append(edge.last.body)
    assert len(set(forwarded)) == 1


def test_the_proxys_own_namespaces_are_not_walked_but_the_rules_are() -> None:
    """``redact_state``'s ``own`` namespaces hold what the proxy computed (message hashes): stored
    as computed, not walked, while a rule's new text in the same state is still redacted. (A
    key-shaped value stands in for a computed one here, to tell walked from not walked.)"""
    from proxy.store.redact_state import redact_state
    from rules.base import SessionState

    key = "sk-ant-" + "Z9y8X7w6" * 6
    old = SessionState({"_prefix": {"hashes": ["a" * 20]}, "working_set": {"goal": "x"}})
    hashes = {"hashes": ["b" * 20, key]}
    new = SessionState({"_prefix": hashes, "working_set": {"goal": f"use {key}"}})
    out = redact_state(new, old, frozenset({"_prefix"}))
    assert out.data["_prefix"] is hashes
    assert key not in out.data["working_set"]["goal"]
    walked = redact_state(new, old)  # without ``own``, that namespace is walked like the others
    assert key not in walked.data["_prefix"]["hashes"]


def test_numbers_beside_new_text_are_kept_as_they_are() -> None:
    """A rule's numbers (prune's memory of the session: counts, its ledger's floats) carry no text:
    kept as the very objects, while a new string beside them is redacted, and a number under a
    secret-sounding name is not mistaken for a secret."""
    from proxy.store.redact_state import redact_state
    from rules.base import SessionState

    key = "sk-ant-" + "Q1w2E3r4" * 6
    billed, won = 12_345.6, -7.5
    new = SessionState(
        {"prune_session": {"billed": billed, "won": won, "requests": 9, "expect_hit": True,
                           "token_count": 3, "note": f"use {key}", "due": None}}
    )  # fmt: skip
    out = redact_state(new, SessionState()).data["prune_session"]
    assert out["billed"] is billed and out["won"] is won
    assert (out["requests"], out["expect_hit"], out["token_count"], out["due"]) == (
        9,
        True,
        3,
        None,
    )
    assert key not in out["note"]
