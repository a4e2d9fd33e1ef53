"""Forks within one principal: a session's state follows the conversation, not only its name
(``proxy.rewrite.lineage``). Two conversations that start alike under one name (no session
header: the same conversation hash; or the same X-Session-Id), interleaved, each resolve "the
folder you just created" to their own folder and cite only calls their own messages hold; a
rewind to before a ``mkdir`` and an edited earlier user message see the state of the fork point
only; and the branch left behind, when its conversation goes on, gets its own entities back.

Through the engine (all three protocols, a fixed clock, the report read for the references
and the call ids they cite) and through the served proxy (the upstream's bytes, on SQLite and
PostgreSQL, in passthrough and keys mode)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.protocols.anthropic import ANTHROPIC
from proxy.protocols.base import Adapter
from proxy.protocols.chat import CHAT
from proxy.protocols.responses import RESPONSES
from proxy.rewrite.engine import Engine, Rewritten
from proxy.settings import load_settings
from proxy.store.sqlite import SQLiteStore
from tests.proxy.tenancy.conversations import (
    OK,
    PROTOCOLS,
    Step,
    body,
    notes_hold,
    render,
    turns,
)
from tests.proxy.tenancy.serving import KEY_A, Served

ADAPTERS: dict[str, Adapter] = {"chat": CHAT, "messages": ANTHROPIC, "responses": RESPONSES}
ASK = "now delete the folder you just created"
START = "Make me a scratch folder."
ALPHA, BETA = "/tmp/alpha_dir", "/tmp/beta_dir"
FIRST, SECOND = "/tmp/first_dir", "/tmp/second_dir"
NAMINGS = {"conversation-hash": {}, "x-session-id": {"x-session-id": "same"}}


def made(step_id: str, path: str) -> list[Step]:
    return [("shell", step_id, f"mkdir -p {path}"), ("result", step_id, OK)]


def branch(step_id: str, path: str) -> list[Step]:
    """A conversation that starts like every other here, creates ``path`` and is asked to
    delete it."""
    return [("user", START), *made(step_id, path), ("said", "Created it."), ("user", ASK)]


def two_folders() -> list[Step]:
    """A conversation that creates ``FIRST`` at its 2nd turn and ``SECOND`` at its 4th."""
    return [
        ("user", "Make two folders, one at a time."),
        *made("first", FIRST),
        ("said", "Made the first one."),
        ("user", "Now the second one."),
        *made("second", SECOND),
    ]


class Agent:
    """Requests of one principal through the engine, at a clock of its own."""

    def __init__(self, engine: Engine, proto: str, principal: str) -> None:
        self.engine, self.proto, self.principal = engine, proto, principal
        self.now = 1000.0

    async def send(self, steps: list[Step], headers: dict[str, str]) -> Rewritten:
        self.now += 5
        sent = body(self.proto, "forks", render(self.proto, steps))
        out = await self.engine.rewrite(
            sent, headers, now=self.now, adapter=ADAPTERS[self.proto], principal=self.principal
        )
        cited = [r["call_id"] for r in out.report.get("references") or [] if r.get("call_id")]
        own = orjson.dumps(sent).decode()
        # no reference cites a call absent from the request's own messages
        assert all(f'"{c}"' in own for c in cited), (cited, own)
        assert notes_hold(forwarded(out)), forwarded(out).decode()
        return out


def forwarded(out: Rewritten) -> bytes:
    return orjson.dumps(out.body)


def conversation_of(forwarded_body: dict[str, Any]) -> list[Any]:
    return forwarded_body.get("messages") or forwarded_body.get("input") or []


def resolved(out: Rewritten) -> list[str]:
    """The paths the request's references resolved to."""
    entities = [r.get("entity") for r in out.report.get("references") or []]
    return [e["path"] for e in entities if e]


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[Engine]:
    store = SQLiteStore(str(tmp_path / "db"))
    await store.open()
    eng = Engine(load_settings(None), store, strict=True)
    yield eng
    eng.close()
    await store.close()


def agent(engine: Engine, proto: str, request: pytest.FixtureRequest) -> Agent:
    # the adapters are process-wide: a principal of its own per test keeps their memories apart
    return Agent(engine, proto, f"p-{request.node.name}")


@pytest.mark.parametrize("naming", list(NAMINGS))
@pytest.mark.parametrize("proto", PROTOCOLS)
async def test_parallel_conversations_each_resolve_their_own_folder(
    engine: Engine, proto: str, naming: str, request: pytest.FixtureRequest
) -> None:
    a = agent(engine, proto, request)
    headers = NAMINGS[naming]
    alpha, beta = branch("alpha", ALPHA), branch("beta", BETA)
    # interleaved: each request finds the other conversation's state stored as the head
    await a.send(alpha[:3], headers)
    await a.send(beta[:3], headers)
    previous: dict[str, list[Any]] = {"a": [], "b": []}
    for _ in range(2):
        out_a = await a.send(alpha, headers)
        out_b = await a.send(beta, headers)
        assert resolved(out_a) == [ALPHA] and BETA.encode() not in forwarded(out_a)
        assert resolved(out_b) == [BETA] and ALPHA.encode() not in forwarded(out_b)
        assert out_a.session_id == out_b.session_id  # one session, two branches
        # each branch's own notes stay where they were forwarded (its state, not the other's)
        for name, out in (("a", out_a), ("b", out_b)):
            now = conversation_of(out.body)
            assert now[: len(previous[name])] == previous[name]
            previous[name] = now
        alpha = [*alpha, ("said", "Deleted."), ("user", "Make it again, then " + ASK)]
        beta = [*beta, ("said", "Deleted."), ("user", "Make it again, then " + ASK)]


@pytest.mark.parametrize("naming", list(NAMINGS))
@pytest.mark.parametrize("proto", PROTOCOLS)
async def test_a_rewind_sees_the_fork_points_state_and_the_old_branch_keeps_its_own(
    engine: Engine, proto: str, naming: str, request: pytest.FixtureRequest
) -> None:
    a = agent(engine, proto, request)
    headers = NAMINGS[naming]
    steps = two_folders()
    for n in range(1, len(steps) + 1):
        if steps[n - 1][0] in ("user", "result"):
            await a.send(steps[:n], headers)
    original = await a.send([*steps, ("said", "Made the second one."), ("user", ASK)], headers)
    assert resolved(original) == [SECOND]

    # back to before the second mkdir: the first two turns, then a new message
    rewound = [*steps[:3], ("user", ASK)]
    out = await a.send(rewound, headers)
    assert resolved(out) == [FIRST], out.report.get("references")
    assert SECOND.encode() not in forwarded(out)
    assert out.report["lineage"]["from"] in ("none", "tip")

    # the original conversation goes on: its own folder, and its own state back from the branch
    # kept as a tip: the note forwarded with its last request stays where it was (the upstream's
    # cached prefix holds), rather than being lost with the state of the other branch
    later = [*steps, ("said", "Made the second one."), ("user", ASK), ("said", "Which?"),
             ("user", "The one you just created: " + ASK)]  # fmt: skip
    out = await a.send(later, headers)
    assert resolved(out) and set(resolved(out)) == {SECOND}
    before = conversation_of(original.body)
    assert conversation_of(out.body)[: len(before)] == before
    # and so does the rewound one
    out = await a.send(
        [*rewound, ("said", "Which?"), ("user", "The one you made: " + ASK)], headers
    )
    assert set(resolved(out)) == {FIRST} and SECOND.encode() not in forwarded(out)


@pytest.mark.parametrize("edited", ["first user message", "second user message"])
@pytest.mark.parametrize("proto", PROTOCOLS)
async def test_an_edited_earlier_message_sees_the_fork_points_state_only(
    engine: Engine, proto: str, edited: str, request: pytest.FixtureRequest
) -> None:
    """Under one X-Session-Id (by the conversation's hash, an edited first message is another
    session altogether)."""
    a = agent(engine, proto, request)
    headers = {"x-session-id": "edited"}
    steps = two_folders()
    for n in range(1, len(steps) + 1):
        if steps[n - 1][0] in ("user", "result"):
            await a.send(steps[:n], headers)
    if edited == "first user message":
        fork = [("user", "Make two folders, one at a time, please."), *steps[1:3], ("user", ASK)]
    else:  # the message that asked for the second folder, edited into the question
        fork = [*steps[:4], ("user", "Actually, " + ASK)]
    out = await a.send(fork, headers)
    assert resolved(out) == [FIRST], out.report.get("references")
    assert SECOND.encode() not in forwarded(out)

    back = await a.send([*steps, ("said", "Made the second one."), ("user", ASK)], headers)
    assert resolved(back) == [SECOND]


# ----- through the served proxy -----


@pytest.mark.parametrize("naming", list(NAMINGS))
@pytest.mark.parametrize("proto", PROTOCOLS)
def test_parallel_conversations_through_the_proxy(served: Served, proto: str, naming: str) -> None:
    tag = f"forks-{proto}-{naming}"
    headers = {k: f"{v}-{tag}" for k, v in NAMINGS[naming].items()}
    alpha, beta = branch("alpha", ALPHA), branch("beta", BETA)

    def send(steps: list[Step]) -> bytes:
        return served.post(proto, body(proto, tag, render(proto, steps)), KEY_A, headers)[1]

    send(alpha[:3])
    send(beta[:3])
    got_a, got_b = send(alpha), send(beta)
    assert _pointer(got_a, ALPHA) and BETA.encode() not in got_a, got_a.decode()
    assert _pointer(got_b, BETA) and ALPHA.encode() not in got_b, got_b.decode()
    # the rewind, sent as an agent would (each turn its own request)
    for request in turns(proto, tag, two_folders()):
        served.post(proto, request, KEY_A, headers)
    rewound = send([*two_folders()[:3], ("user", ASK)])
    assert _pointer(rewound, FIRST) and SECOND.encode() not in rewound, rewound.decode()


def _pointer(data: bytes, path: str) -> bool:
    """Whether the forwarded bytes resolve "the folder you just created" to ``path``."""
    text = data.decode()
    return "<ctxproxy-context>" in text and f"means the folder {path} (created)" in text
