"""Prefix reuse for the Gemini adapter: each session's last lowering, reused over the contents
the next request shares with it.

The server reads a session's bodies through ``body_memory``, which hands the next body the very
objects it parsed for the contents both share (proven on the bytes). A content that is the same
object as the previous request's at the same index lowers to the same messages (lowering is a
pure function of the content, its index and the calls of the model turn before it, which is
shared too), so those messages are reused as they are: the rules' per-object memos of the
session find them. Only identity is trusted, never a name: a slot names where to look, the
objects themselves prove the reuse. Bounded by slots and by the bytes the snapshots are charged
(``prefix_memory.PrefixMemory``: the principal holding most slots, or bytes, loses its least
recently kept first): a snapshot is charged its messages' texts and arguments thrice
(``OBJECT_COST``), ``PER_MESSAGE_BYTES`` a message, and each content's JSON, kept so a forwarded
body is written from its contents' bytes (each content serialised once, when first seen). A
snapshot also holds the bytes of the contents its request's lifting wrote (one request's worth,
uncharged; bounded by the slots)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from proxy.generations import compact
from proxy.protocols.gemini_lower import Calls, held_history, lower_content, lower_system
from proxy.protocols.gemini_parts import State
from proxy.protocols.prefix import OBJECT_COST, PER_MESSAGE_BYTES, same_objects
from proxy.protocols.prefix_memory import PrefixMemory
from rules.base import Message
from rules.messages import call_arguments_text, text_of, tool_calls

MAX_SLOTS = 64  # each holds a body's contents: a few sessions' worth, not a crowd's
MAX_BYTES = 64_000_000  # what the slots are charged together


@dataclass(frozen=True)
class Snapshot:
    """A request's lowering, per content: never changed once kept."""

    contents: list[Any]  # the body's contents (the objects)
    ends: list[int]  # where each content's messages end in ``messages``
    calls: list[Calls]  # the calls each content leaves for the next one
    messages: list[Message]  # the contents' messages (the system's not among them)
    state: State
    charged: list[int]  # the bytes charged for the contents up to each one (cumulative)
    datas: list[bytes | None]  # each content's JSON (None: not JSON)


def _charge(messages: list[Message]) -> int:
    """What keeping ``messages`` is charged: their texts and arguments as objects, and a fixed
    cost a message."""
    size = 0
    for m in messages:
        size += len(text_of(m.get("content")))
        size += sum(len(call_arguments_text(c)) for c in tool_calls(m))
    return OBJECT_COST * size + PER_MESSAGE_BYTES * len(messages)


def _json(content: Any) -> bytes | None:
    try:
        return compact(orjson.dumps(content))
    except TypeError:  # lone surrogates (a body not parsed by orjson): written when forwarded
        return None


def _reuse_parts(st: State, prev: State, shared: int, prev_contents: int) -> None:
    """``prev``'s bookkeeping of its first ``shared`` contents taken into ``st`` (which holds
    this request's system part only). Whole dicts are copied when every previous content is
    shared (an agent's next request: the common case), at C speed, not message by message;
    the tag lists are shared, as only the lowering of their own content appends to them."""
    system = st.parts.get("s")
    if shared == prev_contents:
        st.parts = dict(prev.parts)
        st.tags = dict(prev.tags)
    else:
        st.parts = {t: p for t, p in prev.parts.items() if 0 <= p.content < shared}
        st.tags = {c: tags for c, tags in prev.tags.items() if c < shared}
    st.parts.pop("s", None)
    if system is not None:
        st.parts["s"] = system


class LoweredMemory:
    def __init__(self, max_slots: int = MAX_SLOTS, max_bytes: int = MAX_BYTES) -> None:
        self._slots = PrefixMemory(max_slots, max_bytes)
        self.reused = 0  # contents reused (tests, benches)

    def lowered(
        self,
        body: dict[str, Any],
        session: str | None,
        whole: Callable[[dict[str, Any]], tuple[list[Message], State]],
    ) -> tuple[list[Message], State]:
        contents = body.get("contents")
        if session is None or not isinstance(contents, list) or not contents:
            return whole(body)
        slot = (session, id(contents[0]))
        prev: Snapshot | None = self._slots.get(slot)
        shared = 0
        if prev is not None and prev.state.held_history == held_history(body):
            shared = same_objects(prev.contents, contents)
        st = State(contents, held_history=held_history(body))
        out: list[Message] = []
        kept = prev.state.parts.get("s") if prev is not None else None
        lower_system(body, st, out, kept.lowered if kept is not None else None)
        head = len(out)
        calls: Calls = []
        ends: list[int] = []
        call_list: list[Calls] = []
        if prev is not None and shared:
            out.extend(prev.messages[: prev.ends[shared - 1]])
            _reuse_parts(st, prev.state, shared, len(prev.contents))
            st.synthetic.update(prev.state.synthetic)
            st.thoughts.update(i for i in prev.state.thoughts if i < shared)
            st.misnamed.update(i for i in prev.state.misnamed if i < shared)
            st.misplaced.update(i for i in prev.state.misplaced if i < shared)
            st.repairs.extend(r for r in prev.state.repairs if r["index"] < shared)
        if prev is not None:  # what the previous request lifted and checked (this one's own
            # replace them there: nothing older is held)
            st.lifted, st.checked = prev.state.lifting, prev.state.checked
            st.was_written = prev.state.written
            st.members, st.tools = prev.state.members, prev.state.tools
            prev.state.lifted, prev.state.checked, prev.state.was_written = None, None, None
            ends = prev.ends[:shared]  # in ``messages``: the system's not counted
            call_list = prev.calls[:shared]
            calls = call_list[-1]
            self.reused += shared
        charged = prev.charged[:shared] if prev is not None else []
        datas = prev.datas[:shared] if prev is not None else []
        for i in range(shared, len(contents)):
            start = len(out)
            calls = lower_content(st, out, i, contents[i], calls)
            ends.append(len(out) - head)
            call_list.append(calls)
            data = _json(contents[i])
            datas.append(data)
            size = _charge(out[start:]) + (len(data) if data is not None else 0)
            charged.append((charged[-1] if charged else 0) + size)
        st.datas = datas
        snap = Snapshot(contents, ends, call_list, out[head:], st, charged, datas)
        self._slots.put(slot, snap, charged[-1] if charged else 0)
        return out, st
