"""The tenancy tests' agents: conversations written once as steps (a user's words, a shell call,
a plan update, a tool's result, the assistant's words) and rendered in each of the three
protocols the proxy serves (chat completions, Anthropic Messages, the Responses API), each with
the tools its agents use (``bash`` / ``update_plan``, Claude Code's ``Bash`` / ``TodoWrite``,
Codex's ``exec_command`` / ``update_plan``).

The story: principal A's agent creates ``/srv/alpha_secret_dir``, runs the tests
(``test_alpha_secret`` fails) and updates its plan; then someone says "now delete the folder I
just created". Plus the ways a request names its session, and the markers no other principal
may ever see in its forwarded bytes."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

DELETE = "now delete the folder I just created"
OPENER = "Set up the alpha workspace."
SECRET_DIR = "/srv/alpha_secret_dir"
SECRET_TEST = "test_alpha_secret"
# What of A's conversation another principal must never see: its folder, its failing test, its
# turns' words and its call ids (``call_alpha_*`` / ``toolu_alpha_*``).
MARKERS = (b"alpha_secret_dir", b"test_alpha_secret", b"alpha workspace", b"_alpha_")
FAILURE = f"FAILED tests/test_alpha.py::{SECRET_TEST} - AssertionError: boom\n1 failed in 0.12s"
OK = "[Command finished with exit code 0]"
CLOSING = "Thanks, that is all for the alpha workspace."

ENDPOINTS = {
    "chat": "/v1/chat/completions",
    "messages": "/v1/messages",
    "responses": "/v1/responses",
}
MODELS = {"chat": "gpt-4o", "messages": "claude-sonnet-4-5", "responses": "gpt-5"}
PROTOCOLS = tuple(ENDPOINTS)

Step = tuple[str, ...]  # ("user", text) ("said", text) ("shell", id, command) ("plan", id, item)
# ("result", id, text)


def story(opener: str = OPENER) -> list[Step]:
    """A's conversation."""
    return [
        ("user", opener),
        ("shell", "alpha_1", f"mkdir -p {SECRET_DIR}"),
        ("result", "alpha_1", OK),
        ("said", "Created the folder."),
        ("user", "Run the tests."),
        ("shell", "alpha_2", "pytest -q"),
        ("result", "alpha_2", FAILURE),
        ("plan", "alpha_3", f"Fix {SECRET_TEST}"),
        ("result", "alpha_3", "Plan updated"),
        ("said", "One test fails."),
        ("user", CLOSING),
    ]


def leaked(data: bytes, markers: tuple[bytes, ...] = MARKERS) -> list[bytes]:
    """The markers found in ``data``."""
    return [m for m in markers if m in data]


NOTE = b"Context noted by ctxproxy (not written by the user)"


def notes_hold(data: bytes) -> bool:
    """Whether the notes in a forwarded body make sense on their own: the first one is whole (a
    note that says only what "changed since its last note" needs that earlier note in the same
    request, or the upstream reads changes to a note it never saw: another branch's, or another
    principal's)."""
    first = data.find(NOTE)
    return first < 0 or data[first + len(NOTE) : first + len(NOTE) + 1] == b":"


def system_text(tag: str) -> str:
    """A system prompt of its own for each test, so no two tests share a conversation hash."""
    return f"You are a coding agent. [{tag}]"


def call_id(proto: str, step_id: str) -> str:
    return f"toolu_{step_id}" if proto == "messages" else f"call_{step_id}"


# ----- rendering steps -----


def _chat(step: Step) -> dict[str, Any]:
    kind = step[0]
    if kind == "user":
        return {"role": "user", "content": step[1]}
    if kind == "said":
        return {"role": "assistant", "content": step[1]}
    if kind == "result":
        return {"role": "tool", "tool_call_id": call_id("chat", step[1]), "content": step[2]}
    args: dict[str, Any]
    if kind == "shell":
        name, args = "bash", {"command": step[2]}
    else:
        name, args = "update_plan", {"plan": [{"step": step[2], "status": "in_progress"}]}
    fn = {"name": name, "arguments": orjson.dumps(args).decode()}
    tool_call = {"id": call_id("chat", step[1]), "type": "function", "function": fn}
    return {"role": "assistant", "content": None, "tool_calls": [tool_call]}


def _anthropic(step: Step) -> dict[str, Any]:
    kind = step[0]
    if kind == "user":
        return {"role": "user", "content": step[1]}
    if kind == "said":
        return {"role": "assistant", "content": [{"type": "text", "text": step[1]}]}
    uid = call_id("messages", step[1])
    if kind == "result":
        block = {"type": "tool_result", "tool_use_id": uid, "content": step[2]}
        return {"role": "user", "content": [block]}
    inp: dict[str, Any]
    if kind == "shell":
        name, inp = "Bash", {"command": step[2]}
    else:
        todo = {"content": step[2], "status": "in_progress", "activeForm": "Working on it"}
        name, inp = "TodoWrite", {"todos": [todo]}
    return {"role": "assistant", "content": [{"type": "tool_use", "id": uid, "name": name,
                                              "input": inp}]}  # fmt: skip


def _item(role: str, text: str) -> dict[str, Any]:
    kind = "output_text" if role == "assistant" else "input_text"
    return {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}


def _responses(step: Step) -> dict[str, Any]:
    kind = step[0]
    if kind == "user":
        return {"type": "message", "role": "user", "content": step[1]}
    if kind == "said":
        return _item("assistant", step[1])
    cid = call_id("responses", step[1])
    if kind == "result":
        return {"type": "function_call_output", "call_id": cid, "output": step[2]}
    args: dict[str, Any]
    if kind == "shell":
        name, args = "exec_command", {"cmd": step[2]}
    else:
        name, args = "update_plan", {"plan": [{"step": step[2], "status": "in_progress"}]}
    arguments = orjson.dumps(args).decode()
    return {"type": "function_call", "call_id": cid, "name": name, "arguments": arguments}


_RENDER = {"chat": _chat, "messages": _anthropic, "responses": _responses}


def render(proto: str, steps: Sequence[Step]) -> list[dict[str, Any]]:
    return [_RENDER[proto](s) for s in steps]


# ----- bodies -----


def body(proto: str, tag: str, history: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """A request of ``proto`` whose conversation is ``history`` (in that protocol's shape)."""
    s = system_text(tag)
    extra = copy.deepcopy(extra)
    history = copy.deepcopy(history)
    if proto == "chat":
        messages = [{"role": "system", "content": s}, *history]
        return {"model": MODELS[proto], "messages": messages, **extra}
    if proto == "messages":
        return {"model": MODELS[proto], "max_tokens": 256, "system": s, "messages": history,
                **extra}  # fmt: skip
    return {"model": MODELS[proto], "instructions": s, "input": history, **extra}


def turns(proto: str, tag: str, steps: list[Step], **extra: Any) -> list[dict[str, Any]]:
    """An agent's requests over ``steps``, one per turn: each a longer prefix, ending on the
    user's or a tool's message (what an agent sends)."""
    rendered = render(proto, steps)
    cuts = [i + 1 for i, s in enumerate(steps) if s[0] in ("user", "result")]
    return [body(proto, tag, rendered[:n], **extra) for n in cuts]


def conversation(proto: str, tag: str, opener: str = OPENER, **extra: Any) -> list[dict]:
    """A's requests over its story."""
    return turns(proto, tag, story(opener), **extra)


def user_turn(proto: str, text: str, reshaped: bool = False) -> dict[str, Any]:
    """One user message. ``reshaped``: the same text in another shape than the conversations'
    messages (one text part; for the Responses API and Anthropic Messages, whose adapters read a
    text part as the plain text it holds, with a screenshot attached): the same conversation
    hash, but another message."""
    if not reshaped:
        return _RENDER[proto](("user", text))
    if proto == "responses":
        image = {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="}
        item = _item("user", text)
        return {**item, "content": [*item["content"], image]}
    part = {"type": "text", "text": text}
    if proto == "messages":
        png = {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}
        return {"role": "user", "content": [part, {"type": "image", "source": png}]}
    return {"role": "user", "content": [part]}


def lone(proto: str, tag: str, text: str = DELETE, reshaped: bool = False, **extra: Any) -> dict:
    """A stateless client's request: the system prompt and one user message."""
    return body(proto, tag, [user_turn(proto, text, reshaped)], **extra)


def continued(proto: str, tag: str, opener: str, text: str = DELETE, **extra: Any) -> dict:
    """A conversation of its own that starts like A's (same system prompt and first user
    message) and goes on elsewhere."""
    steps = [("user", opener), ("said", "Hello. What next?"), ("user", text)]
    return body(proto, tag, render(proto, steps), **extra)


# ----- naming a session -----


@dataclass(frozen=True)
class Naming:
    """How a request names its session: headers and body fields added to each request."""

    name: str
    protos: tuple[str, ...]
    headers: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


def namings(session: str) -> list[Naming]:
    """Every way the proxy reads a session's name (``proxy.rewrite.session_key``), each with the
    protocols whose clients use it; ``session`` is the name given."""
    user_id = orjson.dumps({"device_id": "d", "account_uuid": "", "session_id": session}).decode()
    return [
        Naming("conversation-hash", PROTOCOLS),
        Naming("x-session-id", PROTOCOLS, headers={"x-session-id": session}),
        Naming("metadata.session_id", PROTOCOLS, extra={"metadata": {"session_id": session}}),
        Naming("user", ("chat", "responses"), extra={"user": session}),
        Naming("prompt_cache_key", ("chat", "responses"), extra={"prompt_cache_key": session}),
        Naming("metadata.user_id", ("messages",), extra={"metadata": {"user_id": user_id}}),
        Naming("x-claude-code-session-id", ("messages",), {"x-claude-code-session-id": session}),
        Naming("codex-session-id", ("responses",), headers={"session-id": session}),
    ]


def credentials(proto: str, key: str) -> dict[str, str]:
    """A client's key as its SDK sends it: Anthropic's ``x-api-key``, else a bearer."""
    if proto == "messages":
        return {"x-api-key": key, "anthropic-version": "2023-06-01"}
    return {"authorization": f"Bearer {key}"}
