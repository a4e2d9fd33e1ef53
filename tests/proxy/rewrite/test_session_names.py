"""A session name is stored, logged and shown, so one that looks like a secret is hashed: whole,
never cut first (a 200-character cut kept 29 of a 36-character key the whole would have been
redacted for), and with the server secret (a plain hash of a short password put in ``user`` was
guessed from a five-word list)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from urllib.parse import unquote

import orjson
import pytest

from proxy.rewrite.session_key import (
    MAX_NAME_CHARS,
    conversation_hash,
    named_session,
    parent_session_key,
)
from tests.conftest import in_process, log_rows
from tests.proxy.server.test_handler_hardening import JSON, proxy_settings
from tests.support.factories import request, user

KEY = "ghp_" + "W3xK9mPz2LwR4tYv8NbC3dHf6JsGa1Bc2De3"
LONG = "x" * 166 + "-" + KEY


@pytest.mark.parametrize(
    "where",
    [
        ({"x-session-id": LONG}, {}),
        ({}, {"metadata": {"session_id": LONG}}),
        ({}, {"prompt_cache_key": LONG}),
        ({}, {"user": LONG}),
    ],
)
def test_a_long_name_is_hashed_whole(where: tuple[dict[str, str], dict[str, object]]) -> None:
    headers, body = where
    named = named_session(headers, body, b"s")
    assert named is not None and named.startswith("hashed:") and KEY[4:12] not in named
    assert named_session(headers, body, b"s") == named  # still one session


def test_a_long_parent_is_hashed_whole_and_a_short_plain_name_kept() -> None:
    parent = parent_session_key({"x-parent-session-id": LONG}, b"s")
    assert parent is not None and parent.startswith("hashed:")
    plain = "p" * MAX_NAME_CHARS
    assert named_session({"x-session-id": plain}, {}) == plain


def test_the_hash_is_keyed() -> None:
    body = {"user": "password=Summer2024"}
    named = named_session({}, body, b"server secret")
    assert named is not None and named.startswith("hashed:")
    plain = hashlib.blake2b(b"user:password=Summer2024", digest_size=12).hexdigest()
    assert named != "hashed:" + plain
    assert named_session({}, body, b"another secret") != named


async def test_the_served_name_shows_no_part_of_the_key(tmp_path: Path, edge) -> None:  # type: ignore[no-untyped-def]
    async with in_process(proxy_settings(edge.base_url), str(tmp_path / "db")) as client:
        body = request(user("hi"))
        r = await client.post(
            "/v1/chat/completions",
            content=orjson.dumps(body),
            headers={**JSON, "x-session-id": LONG},
        )
        assert r.status_code == 200
        shown = unquote(r.headers["x-ctxproxy-session-id"])
        (row,) = await log_rows(client)
    assert shown.startswith("hashed:") and "W3xK9mPz" not in shown
    assert "W3xK9mPz" not in row["session_id"]


class _Unread(dict):  # type: ignore[type-arg]
    """A block that fails the test if it is read."""

    def get(self, *args: object) -> object:
        raise AssertionError("a block past the hashed ones was read")


def test_a_conversation_is_told_by_its_opening_blocks_only() -> None:
    """The conversation's hash (no session named) runs on the event loop: a first message of
    190,000 blocks took ~0.1 s there to gather; only its first blocks are read, and they still
    tell two conversations apart."""
    opening = [{"type": "text", "text": f"b{i}"} for i in range(256)]
    rest = [_Unread(type="text", text="x")] * 190_000
    long = conversation_hash([{"role": "user", "content": opening + rest}])
    assert long == conversation_hash([{"role": "user", "content": opening}])
    other = [{"type": "text", "text": "another task"}, *opening[1:]]
    assert long != conversation_hash([{"role": "user", "content": other + rest}])


def test_a_system_notice_after_the_first_user_message_is_not_the_system_prompt() -> None:
    """With no session named, a conversation is its system prompt and its first user message:
    a notice a client sends later as a system message (Claude Code's environment notice, an
    agent's reminder) does not make a new conversation of the same one when it appears or
    changes."""
    opening = [{"role": "system", "content": ""}, {"role": "user", "content": "fix the bug"}]
    key = conversation_hash(opening[1:])
    later = [opening[1], {"role": "assistant", "content": "ok"}]
    assert conversation_hash([*later, {"role": "system", "content": "# Environment"}]) == key
    assert conversation_hash([*later, {"role": "system", "content": ""}]) == key
    prompted = [{"role": "system", "content": "You are terse."}, *opening[1:]]
    assert conversation_hash(prompted) != key
