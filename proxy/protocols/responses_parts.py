"""The Responses adapter's bookkeeping (what each lowered message stands for in the client's
input items) and small readers of Responses items."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from proxy.protocols.prefix import SharedParts
from rules.base import Message

TEXT_PARTS = ("input_text", "output_text", "text")  # a tuple: a list as a type is no error
# The calls the chat view shows. A local shell call (``codex-mini``'s ``local_shell`` tool) reads
# as a call of ``local_shell`` with its action as arguments; Codex answers it with a
# ``function_call_output``, other clients with a ``local_shell_call_output`` (named by ``call_id``
# or, as the API reference words it, by ``id``).
CALLS = frozenset({"function_call", "custom_tool_call", "local_shell_call"})
OUTPUTS = {
    "function_call_output": "function_call",
    "custom_tool_call_output": "custom_tool_call",
    "local_shell_call_output": "local_shell_call",
}
LOCAL_SHELL = "local_shell"
OWN_ROLES = frozenset({"user", "system", "developer"})


@dataclass(slots=True)  # one per lowered message of every request
class Part:
    items: tuple[int, ...]  # input indices this message stands for (empty: string input)
    lowered: Message
    # how many leading items must be shared with another request for this message to lower the
    # same there: its last item's, or for a run of items the one that ended it (``prefix``)
    need: int = 0


Parts = SharedParts[Part]


@dataclass
class State:
    items: list[Any]
    parts: Parts
    call_kinds: dict[str, str]  # call_id -> its call's kind (``CALLS``)
    mended: bool
    # how many input items are the session's previous request's, its snapshot, and this
    # request's (None: not kept; ``responses_prefix``)
    shared: int = 0
    prefix: Any = None
    snapshot: Any = None
    # the reasoning items' indices in ``items`` (None: not known)
    reasoning: list[int] | None = None
    # set by lifting: the previous lifting reused (its token) and how many forwarded items it
    # gave, and this request's lifting's token (None: none kept)
    reused: tuple[object, int] | None = None
    lifted: object | None = None


def opaque_side(item: dict[str, Any], k: str) -> tuple[str, str] | None:
    """("calls" or "outputs", its id) for a call or an output the chat view cannot show (not a
    function's or a custom tool's): a ``*_call`` (or a ``program``) and its output
    (``*_call_output``, ``tool_search_output``, ``program_output``) by ``call_id``, an MCP
    approval request (``id``) and its response (``approval_request_id``)."""
    if k.endswith("_output") and k not in OUTPUTS:  # a shell's, a tool search's, a program's
        cid = item.get("call_id")
        return ("outputs", cid) if isinstance(cid, str) else None
    if (k.endswith("_call") or k == "program") and k not in CALLS:
        cid = item.get("call_id")
        return ("calls", cid) if isinstance(cid, str) else None
    if k == "mcp_approval_request":
        rid = item.get("id")
        return ("calls", rid) if isinstance(rid, str) else None
    if k == "mcp_approval_response":
        rid = item.get("approval_request_id")
        return ("outputs", rid) if isinstance(rid, str) else None
    return None


def kind(item: Any) -> str:
    if not isinstance(item, dict):
        return ""
    k = item.get("type")
    if isinstance(k, str):
        return k
    return "message" if "role" in item else ""


def is_text(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") in TEXT_PARTS


def part_maker(role_name: str) -> Any:
    k = "output_text" if role_name == "assistant" else "input_text"
    return lambda text: {"type": k, "text": text}


def message_text(item: dict[str, Any]) -> Any:
    """A message item's lowered content: its text, or parts when it has non-text parts."""
    content = item.get("content")
    if isinstance(content, str) or content is None:
        return content or ""
    parts = content if isinstance(content, list) else []
    if all(is_text(p) for p in parts):
        return "\n\n".join(p["text"] if isinstance(p.get("text"), str) else "" for p in parts)
    return [
        {"type": "text", "text": p["text"] if isinstance(p.get("text"), str) else ""}
        if is_text(p)
        else {"type": p.get("type") if isinstance(p, dict) else "unknown"}
        for p in parts
    ]  # fmt: skip


def call_of(item: dict[str, Any]) -> dict[str, Any]:
    """A call item as a ``tool_calls`` entry (a custom call's raw input as ``{"input": …}``)."""
    cid = item.get("call_id")
    k = kind(item)
    arguments: Any
    if k == "custom_tool_call":
        raw = item.get("input")
        # an input that is no string lowers as no arguments, so the chain repair mends it (the
        # API takes only a string) and the lifting writes it back as a string
        arguments = orjson.dumps({"input": raw}).decode() if isinstance(raw, str) else None
    elif k == "local_shell_call":
        action = item.get("action")
        arguments = orjson.dumps(action if isinstance(action, dict) else {}).decode()
    else:
        # Lowered as it came (a string, else the object, null or missing): the API takes only a
        # string, so the chain repair must see what is not one, as it does in a chat call.
        arguments = item.get("arguments")
    name = LOCAL_SHELL if k == "local_shell_call" else item.get("name")
    fn = {"name": name, "arguments": arguments}
    return {"id": cid, "type": "function", "function": fn}


def output_call_id(item: dict[str, Any]) -> Any:
    """The call an output answers: its ``call_id`` (a local shell call's output may name it by
    ``id`` instead)."""
    cid = item.get("call_id")
    if cid is None and item.get("type") == "local_shell_call_output":
        return item.get("id")
    return cid


def provider_history(body: dict[str, Any]) -> bool:
    """The request continues history the provider keeps: a stored response or conversation."""
    return bool(body.get("previous_response_id") or body.get("conversation"))


class References:
    """Where ``items``' first ``item_reference`` (an item the provider stored) is: looked for
    once, when first asked (of an output whose call no earlier item makes), so a body of
    thousands of such outputs is walked once, not once each."""

    __slots__ = ("first", "items")

    def __init__(self, items: list[Any]) -> None:
        self.items = items
        self.first: int | None = None

    def before(self, end: int) -> bool:
        """Whether one comes before ``items[end]``."""
        if self.first is None:
            found = (i for i, item in enumerate(self.items) if kind(item) == "item_reference")
            self.first = next(found, len(self.items))
        return self.first < end
