"""Anthropic Messages (``POST /v1/messages``) to and from the chat view.

Lowering, message by message (``messages[i]``):
- the top-level ``system`` and a ``role: "system"`` message: a system message;
- a user message: each ``tool_result`` block a tool message, the other blocks (in runs between
  them) a user message (a string when it is one text block);
- an assistant message: one assistant message, its text blocks joined, its ``tool_use`` blocks as
  ``tool_calls``; thinking, redacted thinking and server-tool blocks are the adapter's to keep.

Lifting walks the rules' output: an untouched message is the client's own object; a changed one
is patched block by block (``patching``); tool results the rules added or moved go first in the
user message after their call, as Anthropic requires. Before lowering, two breaks of Anthropic's
own are mended (``anthropic_mend``): empty text blocks, and a thinking block split from the turn
it belongs to."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from functools import partial
from typing import Any

import orjson

from proxy.protocols.anthropic_lift import (
    lift_assistant,
    lift_system,
    lift_system_message,
    lift_user_run,
    one_untouched_message,
)
from proxy.protocols.anthropic_mend import mend, needs_mending, shape
from proxy.protocols.anthropic_parts import (
    Part,
    State,
    as_list,
    is_text,
    text_block,
    texts,
    user_side,
)
from proxy.protocols.base import TAG, Lowered, opaque_note
from proxy.protocols.checks import Facts, kept_facts
from proxy.protocols.kept import KeptLowerings, copied, kept_message
from proxy.protocols.kept_lifts import KeptLifts
from rules.base import Message
from rules.messages import text_of

_HIDDEN = frozenset({"thinking", "redacted_thinking"})


class AnthropicAdapter:
    name = "anthropic"

    def __init__(self) -> None:
        self.kept = KeptLowerings()
        self.lifts = KeptLifts()

    def lower(self, body: dict[str, Any]) -> Lowered:
        source: list[Any] = body["messages"]
        repairs: list[dict[str, Any]] = []
        found = self._look_up(source)
        shapes = [e[2] if e else shape(m) for m, (_, e) in zip(source, found, strict=True)]
        if needs_mending(shapes):  # the shapes of known messages come with their lowerings
            source, repairs = mend(source)
            found = self._look_up(source)
        first_user = next((i for i, m in enumerate(source) if m.get("role") == "user"), None)
        st = State(source, {}, {}, bool(repairs), first_user, [d for d, _ in found])
        out: list[Message] = []
        serialised: list[bytes | None] = []
        system = body.get("system")
        if system:
            text = system if isinstance(system, str) else texts(system)
            part = Part(-1, (), {"role": "system", "content": text, TAG: "s"})
            st.parts["s"] = part
            out.append(part.lowered)
            serialised.append(None)
        kept, parts, user_tags = self.kept, st.parts, st.user_tags
        for i, (m, (data, entry)) in enumerate(zip(source, found, strict=True)):
            if entry is None:
                entry = _lowering(i, m)
                if data is not None:
                    kept.put(data, i, entry, sum(len(s[4] or b"") for s in entry[0]))
            specs, tags, _, facts = entry
            st.facts.append(facts)
            for tag, blocks, template, calls, sorted_bytes, nested in specs:
                # the rules get their own objects (strings are shared), the entry stays as kept
                lowered = copied(template, nested)
                parts[tag] = Part(i, blocks, lowered, calls)
                out.append(lowered)
                serialised.append(sorted_bytes)
            if tags is not None:
                user_tags[i] = tags
        return Lowered(out, _tools(body.get("tools")), repairs, st, serialised)

    def _look_up(self, source: list[Any]) -> list[tuple[bytes | None, _Lowering | None]]:
        """Each message's bytes (None: not to be kept) and its kept lowering (None: unknown)."""
        kept, dumps, limit = self.kept, orjson.dumps, self.kept.max_key_bytes
        found: list[tuple[bytes | None, _Lowering | None]] = []
        for i, m in enumerate(source):
            try:
                data = dumps(m)
            except TypeError:  # lone surrogates (a body not parsed by orjson): lowered each time
                found.append((None, None))
                continue
            if len(data) > limit:
                found.append((None, None))
            else:
                found.append((data, kept.get((data, i))))
        return found

    def lift(
        self,
        body: dict[str, Any],
        lowered: Lowered,
        messages: list[Message],
        hashes: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        st: State = lowered.state
        if messages is lowered.messages and not st.mended:
            return body
        out: list[Any] = []
        system = body.get("system")
        parts, source = st.parts, st.source
        n = len(messages)
        if hashes is not None and len(hashes) != n:
            hashes = None
        facts = st.facts
        known: list[Facts | None] = []  # the final check's facts of each message of ``out``
        k = 0
        while k < n:  # once per message of every request: role and tag read directly
            m = messages[k]
            tag = m.get(TAG)
            r = m.get("role")
            if tag == "s":
                system = lift_system(body.get("system"), parts["s"], m)
                k += 1
            elif r == "assistant":
                part = parts.get(tag)  # type: ignore[arg-type]
                if part is not None and m is part.lowered:
                    out.append(source[part.index])
                    known.append(facts[part.index])
                else:
                    lift = partial(_lifted_assistant, st, m)
                    self._lift_kept(st, messages, hashes, k, k + 1, lift, out, known)
                k += 1
            elif r in ("system", "developer"):
                out.append(lift_system_message(st, m))
                k += 1
            else:
                end = k + 1
                while end < n and user_side(messages[end]):
                    end += 1
                run = messages[k:end]
                whole = one_untouched_message(st, run)
                if whole is not None:
                    out.append(whole)
                    known.append(facts[st.parts[m.get(TAG)].index])  # type: ignore[index]
                else:
                    lift = partial(lift_user_run, st, run)
                    self._lift_kept(st, messages, hashes, k, end, lift, out, known)
                k = end
            if len(known) < len(out):  # lifted: read by the check itself
                known.extend([None] * (len(out) - len(known)))
        forwarded = dict(body)
        forwarded["messages"] = out
        lowered.known_facts = known
        if system is not body.get("system"):
            forwarded["system"] = system
        return forwarded

    def _lift_kept(
        self,
        st: State,
        messages: list[Message],
        hashes: Sequence[str] | None,
        start: int,
        end: int,
        lift: Callable[[], list[Any]],
        out: list[Any],
        known: list[Facts | None],
    ) -> None:
        """``messages[start:end]`` lifted onto ``out`` (from a kept lifting when there is one),
        their facts for the final check onto ``known`` where kept with it."""
        key, size = _lift_key(st, messages, hashes, start, end)
        values, derived = self.lifts.lifted(key, size, lift, _facts)
        out.extend(values)
        if derived is not None:
            known.extend(derived)

    def hidden_text(self, body: dict[str, Any]) -> dict[str, str]:
        texts: list[str] = []
        for m in body.get("messages") or []:
            content = m.get("content") if isinstance(m, dict) else None
            for b in content if isinstance(content, list) else []:
                if isinstance(b, dict) and b.get("type") in _HIDDEN:
                    value = b.get("thinking") or b.get("data")
                    if isinstance(value, str):
                        texts.append(value)
        return {"thinking": "\n".join(texts)} if texts else {}


# One lowered message, as kept: (tag, content block indices, the message (tag included), its
# calls by block, its bytes with sorted keys for the runner's records, its keys whose values
# are lists for ``fresh_list`` (None: copied with ``fresh``))
_Spec = tuple[
    str,
    tuple[int, ...],
    Message,
    list[tuple[int, dict[str, Any]]],
    bytes | None,
    tuple[str, ...] | None,
]
# A client message's lowering: its messages, a user message's tags in order, its shape for
# ``anthropic_mend``, its facts for the final check
_Lowering = tuple[tuple[_Spec, ...], list[str] | None, int, Facts | None]


def _lifted_assistant(st: State, m: Message) -> list[Any]:
    return [lift_assistant(st, m)]


def _facts(message: Any) -> Facts | None:
    return kept_facts(message) if isinstance(message, dict) else None


def _lift_key(
    st: State, messages: list[Message], hashes: Sequence[str] | None, start: int, end: int
) -> tuple[Hashable | None, int]:
    """The key of the lifting of ``messages[start:end]`` (with the bytes it holds): their
    content hashes (tags included), the bytes of the client messages their parts come from, and
    the first user message's index (kept as sent). None when some input's bytes are unknown."""
    if hashes is None:
        return None, 0
    data: list[bytes | None] = []
    size = 0
    for m in messages[start:end]:
        part = st.parts.get(m.get(TAG))  # type: ignore[arg-type]
        if part is None:  # one the rules wrote: its hash is all of it
            data.append(None)
            continue
        known = st.data[part.index] if 0 <= part.index < len(st.data) else None
        if known is None:
            return None, 0
        data.append(known)
        size += len(known)
    return (tuple(hashes[start:end]), tuple(data), st.first_user), size


def _spec(tag: str, part: Part) -> _Spec:
    part.lowered[TAG] = tag
    message, data, nested = kept_message(part.lowered)
    return (tag, part.blocks, message, part.calls, data, nested)


def _lowering(i: int, m: Message) -> _Lowering:
    """The chat view of the client's ``messages[i]`` (a pure function of it and ``i``), with what
    the final check reads of it."""
    specs, tags = _lowered(i, m)
    return specs, tags, shape(m), kept_facts(m)


def _lowered(i: int, m: Message) -> tuple[tuple[_Spec, ...], list[str] | None]:
    r = m.get("role")
    content = m.get("content")
    if r == "assistant":
        return (_spec(f"{i}", _assistant_part(i, content)),), None
    if r == "system":
        text = content if isinstance(content, str) else texts(as_list(content))
        return (_spec(f"{i}", Part(i, (), {"role": "system", "content": text})),), None
    if isinstance(content, str):
        part = Part(i, (), {"role": "user", "content": content})
        return (_spec(f"{i}", part),), [f"{i}"]
    specs = _lower_user(i, as_list(content))
    return specs, [s[0] for s in specs]


def _lower_user(i: int, blocks: list[Any]) -> tuple[_Spec, ...]:
    specs: list[_Spec] = []
    run: list[int] = []

    def flush() -> None:
        if run:
            content = _user_content([blocks[j] for j in run])
            specs.append(_spec(f"{i}.{run[0]}", Part(i, tuple(run), {"role": "user",
                               "content": content})))  # fmt: skip
            run.clear()

    for j, b in enumerate(blocks):
        if isinstance(b, dict) and b.get("type") == "tool_result":
            flush()
            msg: Message = {"role": "tool", "tool_call_id": b.get("tool_use_id"),
                            "content": text_of(b.get("content"))}  # fmt: skip
            if b.get("is_error") is True:
                msg["is_error"] = True
            specs.append(_spec(f"{i}.{j}", Part(i, (j,), msg)))
        else:
            run.append(j)
    flush()
    return tuple(specs)


def _user_content(blocks: list[Any]) -> Any:
    """A user part's lowered content: a string for one text block, else parts (text kept,
    other blocks by type only: the rules read text)."""
    if len(blocks) == 1 and is_text(blocks[0]) and isinstance(blocks[0].get("text"), str):
        return blocks[0]["text"]
    return [
        text_block(b["text"]) if is_text(b) and isinstance(b.get("text"), str)
        else {"type": b.get("type") if isinstance(b, dict) else "unknown"}
        for b in blocks
    ]  # fmt: skip


def _assistant_part(i: int, content: Any) -> Part:
    if isinstance(content, str):
        return Part(i, (), {"role": "assistant", "content": content})
    blocks = as_list(content)
    calls: list[tuple[int, dict[str, Any]]] = []
    for j, b in enumerate(blocks):
        if isinstance(b, dict) and b.get("type") == "tool_use":
            arguments = orjson.dumps(b.get("input", {})).decode()
            fn = {"name": b.get("name"), "arguments": arguments}
            calls.append((j, {"id": b.get("id"), "type": "function", "function": fn}))
    text = texts(blocks)
    if not text and not calls and blocks:
        text = opaque_note([b.get("type") for b in blocks if isinstance(b, dict)])
    msg: Message = {"role": "assistant", "content": text if text or not calls else None}
    if calls:
        msg["tool_calls"] = [c for _, c in calls]
    return Part(i, tuple(range(len(blocks))), msg, calls)


def _tools(tools: Any) -> list[Any] | None:
    """The tools as the rules read them (functions with parameters); others by name only."""
    if not isinstance(tools, list):
        return None
    out: list[Any] = []
    for t in tools:
        if not isinstance(t, dict):
            continue
        fn: dict[str, Any] = {"name": t.get("name")}
        if "description" in t:
            fn["description"] = t["description"]
        if "input_schema" in t:
            fn["parameters"] = t["input_schema"]
        out.append({"type": "function", "function": fn})
    return out


ANTHROPIC = AnthropicAdapter()
