"""Gemini ``generateContent`` (``POST /v1beta/models/{model}:generateContent``,
``:streamGenerateContent``, ``:countTokens``) to and from the chat view.

Lowering (``gemini_lower``): the system instruction a system message; a ``model`` content an
assistant message with its calls; a ``user`` content its function responses as tool messages and
its other parts as user messages. Gemini's pairing rule (N calls, then N responses in order) is
the chain rules' own once lowered, so ``repair_tool_chain`` mends it: a response restored twice
(Gemini CLI's resume), orphans, missing responses, drifted or reused ids.

Lifting (``gemini_lift``) writes the rules' edits back as patches on the client's contents:
untouched contents are the client's objects, and a changed one keeps every part the rules did
not touch as sent (``thoughtSignature``, ``inlineData``, unknown fields, ids, order)."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import count, repeat
from operator import is_
from typing import Any, cast

import orjson

from proxy.protocols.base import Lowered
from proxy.protocols.gemini_checks import pairing_violations
from proxy.protocols.gemini_lift import lift_contents
from proxy.protocols.gemini_lower import lower_contents
from proxy.protocols.gemini_parts import State, harness_tag, is_text, make_text, parts_of
from proxy.protocols.gemini_prefix import LoweredMemory
from proxy.protocols.patching import patch_joined
from proxy.protocols.prefix import same_objects, with_items
from rules.base import Message
from rules.messages import text_of, without_harness


class GeminiAdapter:
    name = "gemini"

    def __init__(self) -> None:
        self.memory = LoweredMemory()  # each session's last lowering (prefix reuse)

    def lower(self, body: dict[str, Any], session: str | None = None) -> Lowered:
        """``session``: a key naming the request's session (None: nothing reused or kept)."""
        messages, st = self.memory.lowered(body, session, lower_contents)
        tools = body.get("tools")
        if st.tools is None or st.tools[0] is not tools:  # else the same object as last time
            st.tools = (tools, _tools(tools))
        lowered = Lowered(messages, st.tools[1], list(st.repairs), st)
        lowered.session_view = session_view
        return lowered

    def lift(
        self,
        body: dict[str, Any],
        lowered: Lowered,
        messages: list[Message],
        hashes: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        st: State = lowered.state
        lowered.data = None
        if messages is lowered.messages and not st.misnamed and not st.misplaced:
            return body
        contents, system = lift_contents(st, messages)
        forwarded = dict(body)
        forwarded["contents"] = contents
        key = st.system_key
        if key is not None and "s" in st.parts:
            part = st.parts["s"]
            if system is None:  # the rules dropped it: its text goes, the rest stays
                system = {"content": ""}
            if system is not part.lowered and system.get("content") != part.lowered["content"]:
                forwarded[key] = _patched_system(body[key], part.lowered["content"], system)
        lowered.data = _forwarded_bytes(forwarded, contents, st)
        return forwarded

    def violations(self, forwarded: dict[str, Any], lowered: Lowered) -> list[str]:
        """The pairing rule on the forwarded contents, resumed past what the session's previous
        request forwarded as the same objects and found sound."""
        st: State = lowered.state
        contents = forwarded.get("contents")
        start = 0
        if st.checked is not None and isinstance(contents, list):
            old, sound = st.checked
            start = same_objects(old, contents, sound)
        found = pairing_violations(contents, start=start)
        if isinstance(contents, list):
            st.checked = (contents, 0 if found else len(contents))
        return found

    def hidden_text(self, body: dict[str, Any], lowered: Lowered | None = None) -> dict[str, str]:
        """The model's thought parts (Gemini CLI drops them from the history; others keep them)
        and the harness blocks kept out of the chat view (``environment``). ``lowered``: the
        request ``body`` is (or was lifted from): of the client's contents, only those its
        lowering found such a part in are read."""
        contents = body.get("contents")
        if not isinstance(contents, list):
            return {}
        st: State | None = lowered.state if lowered is not None else None
        if st is not None and contents is st.contents:
            contents = [contents[i] for i in sorted(st.thoughts)]
        elif st is not None:  # forwarded: the client's contents without a thought are skipped
            plain = {id(c) for i, c in enumerate(st.contents) if i not in st.thoughts}
            contents = [c for c in contents if id(c) not in plain]
        found: dict[str, list[str]] = {}
        for content in contents:
            for p in parts_of(content):
                if not isinstance(p, dict) or not isinstance(p.get("text"), str):
                    continue
                if p.get("thought"):
                    found.setdefault("thinking", []).append(p["text"])
                elif harness_tag(p) is not None:
                    found.setdefault("environment", []).append(p["text"])
        return {name: "\n".join(texts) for name, texts in found.items()}


def session_view(messages: list[Message]) -> list[Message]:
    """What names a Gemini conversation when no header does (``session_key``): the system
    instruction and the first user text that is the user's own, without the environment Gemini
    CLI puts before it (its ``<session_context>``, regenerated on every resume: the folder
    listing changes). A resumed CLI session keeps both, so it stays one proxy session."""
    out: list[Message] = []
    system = user = False
    for m in messages:
        r = m.get("role")
        if r == "system" and not system:
            out.append(m)
            system = True
        elif r == "user" and not user:
            text = without_harness(text_of(m.get("content"))).strip()
            if text:
                out.append({"role": "user", "content": text})
                user = True
        if user:
            break
    return out


def _forwarded_bytes(forwarded: dict[str, Any], contents: list[Any], st: State) -> bytes | None:
    """``orjson.dumps(forwarded)`` written from each content's bytes: the client's contents'
    kept JSON, a lifted one's kept from the previous request where the lifting reused it (the
    same object), else written now (None: the lowering kept no bytes); the other members from
    the previous request's where they are the same objects (``with_items``)."""
    datas = st.datas
    if datas is None:
        return None
    client = st.contents
    before = st.was_written or {}
    written: dict[int, tuple[Any, bytes]] = {}
    if len(contents) == len(client):
        # the common lifting: contents patched in place, none merged or dropped. Each one that
        # is the client's at its index, compared in C, is its kept JSON
        pieces: list[bytes | None] = list(datas)
        for at in _positions(list(map(is_, client, contents)), False):
            pieces[at] = None
    else:  # merged or dropped: each looked up among the client's by identity, in C too
        index = dict(zip(map(id, client), count()))
        found = map(index.get, map(id, contents), repeat(len(client)))
        pieces = list(map([*datas, None].__getitem__, found))
    # only the others are looked at: a lifted one, or a client's whose JSON was not kept
    for at in _positions(pieces, None):
        content = contents[at]
        kept = before.get(id(content))
        if kept is not None and kept[0] is content:
            piece = kept[1]
        else:
            try:
                piece = orjson.dumps(content)
            except TypeError:
                return None
        written[id(content)] = (content, piece)
        pieces[at] = piece
    st.written = written
    members: dict[str, tuple[Any, bytes]] = {}
    data = with_items(forwarded, "contents", cast("list[bytes]", pieces), st.members, members)
    st.members = members
    return data


def _positions(values: list[Any], value: Any) -> list[int]:
    """Where ``value`` is in ``values`` (each found by ``list.index``, in C)."""
    out: list[int] = []
    try:
        at = values.index(value)
        while True:
            out.append(at)
            at = values.index(value, at + 1)
    except ValueError:
        return out


def _patched_system(system: Any, old: str, new: Message) -> Any:
    text = text_of(new.get("content"))
    if isinstance(system, str):
        return text
    parts = patch_joined(parts_of(system), old, text, is_text, make_text)
    return {**system, "parts": parts}


def _tools(tools: Any) -> list[Any] | None:
    """The function declarations as the rules read them (``parametersJsonSchema`` or the
    OpenAPI-style ``parameters``); other tools (``googleSearch``, ``codeExecution``) are
    Gemini's own and have no calls in ``contents``."""
    if not isinstance(tools, list):
        return None
    out: list[Any] = []
    for tool in tools:
        declarations = tool.get("functionDeclarations") if isinstance(tool, dict) else None
        if not isinstance(declarations, list):
            declarations = tool.get("function_declarations") if isinstance(tool, dict) else None
        for d in declarations if isinstance(declarations, list) else []:
            if not isinstance(d, dict) or not isinstance(d.get("name"), str):
                continue
            fn: dict[str, Any] = {"name": d["name"], "description": d.get("description", "")}
            schema = d.get("parametersJsonSchema", d.get("parameters_json_schema"))
            schema = schema if schema is not None else d.get("parameters")
            if isinstance(schema, dict):
                fn["parameters"] = schema
            out.append({"type": "function", "function": fn})
    return out


GEMINI = GeminiAdapter()
