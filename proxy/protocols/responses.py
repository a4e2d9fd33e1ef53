"""The Responses API (``POST /v1/responses``) to and from the chat view.

Lowering, item by item (``input[i]``; a string ``input`` is one user message):
- ``instructions``: a system message; message items (user, system, developer): a message each;
- ``function_call_output`` / ``custom_tool_call_output``: a tool message each; one whose call
  no earlier item makes, in a request continuing the provider's own history
  (``previous_response_id``, ``conversation``) or after an ``item_reference``, answers a call
  the provider holds: marked so (``rules.messages.HELD``), it is neither repaired nor pruned;
- every other run of items (reasoning, assistant messages, ``function_call``,
  ``custom_tool_call``, server-side calls …) up to the next of those: ONE assistant message, its
  text the assistant messages' text, its ``tool_calls`` the calls (a custom call's raw input as
  ``{"input": …}``). Reasoning and server-side items are the adapter's to keep.

Lifting writes each output message back as its items: untouched ones as sent; a changed one
patched (arguments, output, text); a call the rules dropped takes the reasoning that came just
before it along, so a reasoning item is never left without the item that followed it
(``responses_lift``). What a session's previous request shares with this one is reused, not
derived again (``responses_prefix``)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from proxy.protocols.base import TAG, Lowered, opaque_note
from proxy.protocols.checks import responses_checked
from proxy.protocols.media_blocks import mark_media
from proxy.protocols.prefix import (
    MemberBytes,
    Whole,
    message_bytes,
    read_bytes,
    read_tools,
    system_message,
    with_items,
)
from proxy.protocols.prefix_memory import PrefixMemory
from proxy.protocols.responses_lift import mend, new_items, patched_items, typed
from proxy.protocols.responses_opaque import pair_opaque_calls
from proxy.protocols.responses_parts import (
    CALLS,
    OUTPUTS,
    OWN_ROLES,
    Part,
    Parts,
    References,
    State,
    call_of,
    is_text,
    kind,
    message_text,
    opaque_side,
    output_call_id,
    provider_history,
)
from proxy.protocols.responses_prefix import Lowering, Recorder, Snapshot, reuse_lifted
from proxy.protocols.responses_repeats import drop_repeated
from rules.base import Message
from rules.messages import HELD, OPAQUE_PAIRS, text_of

# an item over this many bytes is lowered on every request, not kept
MAX_ITEM_BYTES = 262_144
# The final check's state is kept this many items before the end (those an agent's next request
# changes), charged per item
CHECK_BACK = 4
PER_ITEM_BYTES = 64


class ResponsesAdapter:
    name = "responses"

    def __init__(self) -> None:
        self.prefixes = PrefixMemory()  # each session's last request (``responses_prefix``)
        self.checked = PrefixMemory(max_bytes=8_000_000)  # each one's final check (``violations``)

    def lower(self, body: dict[str, Any], session: str | None = None) -> Lowered:
        """``session``: a key naming the request's session (None: nothing reused or kept)."""
        inp = body.get("input")
        items: list[Any] = inp if isinstance(inp, list) else []
        slot: Hashable | None = None
        prev: Snapshot | None = None
        datas: list[bytes | None] = []
        whole: Whole | None = None
        shared = 0
        held = provider_history(body)
        first = message_bytes(items[:1], MAX_ITEM_BYTES) if session is not None else []
        if first and first[0] is not None:  # names the session's previous request
            slot = (session, first[0], held)  # its lowerings hold for the same history only
            prev = self.prefixes.get(slot)
            if prev is not None:
                slot = prev.slot  # its bytes compact
            old, old_datas = (prev.whole, prev.datas) if prev is not None else (None, [])
            datas, shared, whole = read_bytes(old, old_datas, items, MAX_ITEM_BYTES)
        start = max(shared - 1, 0)
        items, repeats = drop_repeated(items, start)
        items, paired = pair_opaque_calls(items, 0 if repeats else start, held)
        items, repairs = mend(items, 0 if paired or repeats else start)
        repairs = repeats + paired + repairs
        references = References(items)  # of the items as lowered: a mend may drop some
        if repairs:  # mended: neither reused nor kept
            slot, prev, shared = None, None, 0
        st = State(items, Parts(), {}, bool(repairs), shared, prev)
        out: list[Message] = []
        serialised: list[bytes | None] = []
        instructions = body.get("instructions")
        if isinstance(instructions, str) and instructions:
            _add(
                st, out, "s", Part((), system_message(prev.system if prev else None, instructions))
            )
            serialised.append(None)
        if isinstance(inp, str):
            _add(st, out, "u", Part((), {"role": "user", "content": inp}))
            serialised.append(None)
        lowering = Lowering(st, out, serialised)
        kept = slot is not None
        run: list[int] = []
        for i in range(lowering.start, len(items)):
            item = items[i]
            k = kind(item)
            if k == "reasoning":
                lowering.reasoning.append(i)
            elif k in CALLS:
                cid = item.get("call_id")
                if isinstance(cid, str):
                    lowering.call(i, cid, k)
            if k == "message" and item.get("role") in OWN_ROLES:
                _flush(st, lowering, run, i + 1, kept)
                msg = {"role": item["role"], "content": message_text(item)}
                lowering.add(f"{i}", Part((i,), msg, i + 1), kept)
            elif k in OUTPUTS:
                _flush(st, lowering, run, i + 1, kept)
                cid = output_call_id(item)
                output = item.get("output")
                # null stays null (the API requires an output): the chain repair's
                # null_tool_content fills it, as on a chat tool message
                msg = {"role": "tool", "tool_call_id": cid,
                       "content": None if output is None else text_of(output)}  # fmt: skip
                mark_media(msg, output, is_text)  # its images, for the chain repair
                if (
                    isinstance(cid, str)
                    and cid not in st.call_kinds
                    and (held or references.before(i))
                ):
                    msg[HELD] = True
                lowering.add(f"{i}", Part((i,), msg, i + 1), kept)
            else:
                run.append(i)
        _flush(st, lowering, run, len(items) + 1, kept)
        st.reasoning = lowering.reasoning
        tools = read_tools(body.get("tools"), prev, _tools)
        if slot is not None:
            system = st.parts["s"].lowered if "s" in st.parts else None
            st.snapshot = snap = lowering.snapshot(slot, datas, whole, system, tools)
            self.prefixes.put(slot, snap, snap.cost)
        return Lowered(out, tools[1], repairs, st, serialised)

    def lift(
        self,
        body: dict[str, Any],
        lowered: Lowered,
        messages: list[Message],
        hashes: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        st: State = lowered.state
        lowered.data = None
        if messages is lowered.messages and not st.mended:
            return body
        forwarded = dict(body)
        out: list[Any] = []
        n = len(messages)
        k = 0
        if n and messages[0].get(TAG) == "s" and "s" in st.parts:
            _lift_instructions(st, messages[0], forwarded)
            k = 1
        recorder = None
        if hashes is not None and len(hashes) == n and st.snapshot is not None:
            base = k
            k = reuse_lifted(st, hashes, base, out)
            if k > base:
                st.reused = (st.prefix.lift.token, len(out))
            recorder = Recorder(st, base, k)
        parts, items = st.parts, st.items
        for j in range(k, n):
            m = messages[j]
            tag = m.get(TAG)
            part = parts.get(tag)
            before = len(out)
            if tag == "s" and part is not None:
                _lift_instructions(st, m, forwarded)
            elif tag == "u" and part is not None:
                out.append({"role": "user", "content": text_of(m.get("content"))})
            elif part is None:
                out.extend(new_items(st, m, out))
            elif m is part.lowered or m == part.lowered:
                out.extend([typed(items[i], out) for i in part.items])
            else:
                out.extend(patched_items(st, part, m, out))
            if recorder is not None:
                recorder.message(j, m, out, before)
        if isinstance(body.get("input"), str) and len(out) == 1 and "type" not in out[0]:
            forwarded["input"] = out[0]["content"]
        else:
            forwarded["input"] = out
        if recorder is not None and hashes is not None:
            array = recorder.array(out) if forwarded["input"] is out else None
            members: MemberBytes | None = None
            if array is not None:  # the items' bytes: not written again; the tools neither,
                members = {}  # when the same objects
                seen = st.prefix.members if st.prefix is not None else None
                lowered.data = with_items(forwarded, "input", array, seen, members)
            snap = recorder.done(hashes, members)
            if snap is not None:
                self.prefixes.put(snap.slot, snap, snap.cost)
                st.lifted = snap.lift.token  # type: ignore[union-attr]
        return forwarded

    def violations(self, forwarded: dict[str, Any], lowered: Lowered) -> list[str]:
        """The final check, resumed from the session's previous request's where this one's
        forwarded items start with what that request's lifting gave (reused: the same JSON)."""
        st: State = lowered.state
        snap: Snapshot | None = st.snapshot
        held = self.checked.get(snap.slot) if snap is not None else None
        resume = None
        if held is not None and st.reused is not None and held[0] is st.reused[0]:
            resume = held[1] if held[1].count < st.reused[1] else None
        inp = forwarded.get("input")
        keep = len(inp) - CHECK_BACK if isinstance(inp, list) else -1
        found, checked = responses_checked(forwarded, resume, keep)
        if snap is not None and checked is not None and st.lifted is not None:
            self.checked.put(snap.slot, (st.lifted, checked), PER_ITEM_BYTES * checked.count)
        return found

    def hidden_text(self, body: dict[str, Any], lowered: Lowered | None = None) -> dict[str, str]:
        """``lowered``: the request ``body`` is (or was lifted from): only its reasoning items
        are read when ``body`` is it (known from the lowering, kept for the shared items)."""
        texts: list[str] = []
        inp = body.get("input")
        st: State | None = lowered.state if lowered is not None else None
        if st is not None and st.reasoning is not None and inp is st.items:
            inp = [inp[i] for i in st.reasoning]
        for item in inp if isinstance(inp, list) else []:
            if isinstance(item, dict) and item.get("type") == "reasoning":  # kind(), inline
                for key in ("summary", "content"):
                    value = item.get(key)
                    if isinstance(value, list):
                        texts.extend(text_of(value).splitlines())
        return {"reasoning": "\n".join(texts)} if texts else {}


def _add(st: State, out: list[Message], tag: str, part: Part) -> None:
    part.lowered[TAG] = tag
    st.parts[tag] = part
    out.append(part.lowered)


def _flush(st: State, lowering: Lowering, run: list[int], need: int, kept: bool) -> None:
    """The run of items ``run`` as one assistant message, ended by item ``need - 1`` (or by the
    end of the input: ``need`` is then one past it)."""
    if not run:
        return
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    opaque: dict[str, list[str]] = {}
    items = st.items
    for i in run:
        item = items[i]
        k = kind(item)
        if k == "message":
            text = message_text(item)
            texts.append(text if isinstance(text, str) else text_of(text))
        elif k in CALLS:
            calls.append(call_of(item))
        else:
            side = opaque_side(item, k)
            if side is not None:
                opaque.setdefault(side[0], []).append(side[1])
    text = "\n\n".join(t for t in texts if t)
    if not text and not calls:
        text = opaque_note([kind(items[i]) for i in run])
    msg: Message = {"role": "assistant", "content": text or None}
    if calls:
        msg["tool_calls"] = calls
    if opaque:
        msg[OPAQUE_PAIRS] = opaque
    lowering.add(f"{run[0]}", Part(tuple(run), msg, need), kept)
    run.clear()


def _lift_instructions(st: State, m: Message, forwarded: dict[str, Any]) -> None:
    if m != st.parts["s"].lowered:
        forwarded["instructions"] = text_of(m.get("content"))


def _tools(tools: Any) -> list[Any] | None:
    """Functions and custom tools as the rules read them; a namespace's functions flattened."""
    if not isinstance(tools, list):
        return None
    out: list[Any] = []
    for t in tools:
        if not isinstance(t, dict):
            continue
        if t.get("type") == "namespace" and isinstance(t.get("tools"), list):
            out.extend(_tools(t["tools"]) or [])
        elif t.get("type") in ("function", "custom") and isinstance(t.get("name"), str):
            fn = {"name": t["name"], "description": t.get("description", "")}
            if isinstance(t.get("parameters"), dict):
                fn["parameters"] = t["parameters"]
            out.append({"type": "function", "function": fn})
    return out


RESPONSES = ResponsesAdapter()
