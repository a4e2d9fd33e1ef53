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

from bisect import bisect_left
from collections.abc import Callable, Hashable, Sequence
from functools import partial
from typing import Any, cast

from proxy.generations import compact
from proxy.protocols.anthropic_dropped import dropped_mark, marked_line, too_many_marks
from proxy.protocols.anthropic_lift import (
    lift_assistant,
    lift_system,
    lift_system_message,
    lift_user_run,
    one_untouched_message,
)
from proxy.protocols.anthropic_lower import Lowering, lowered_tools, lowering
from proxy.protocols.anthropic_mend import F_HIDDEN, mend, needs_mending, shape
from proxy.protocols.anthropic_parts import Part, Parts, State, texts, user_side
from proxy.protocols.anthropic_prefix import Recorder, Snapshot, reuse_lifted
from proxy.protocols.base import TAG, Lowered
from proxy.protocols.checks import Facts, anthropic_checked, kept_facts
from proxy.protocols.kept import KeptLowerings
from proxy.protocols.kept_lifts import KeptLifts
from proxy.protocols.prefix import (
    PER_MESSAGE_BYTES,
    MemberBytes,
    Whole,
    message_bytes,
    read_bytes,
    read_tools,
    system_message,
    tag_index,
    with_items,
)
from proxy.protocols.prefix_memory import PrefixMemory
from rules.base import Message

_HIDDEN = ("thinking", "redacted_thinking")  # a tuple: a type that is a list is no error
# The final check's state is kept this many messages before the end (those an agent's next
# request changes: the last user message, a moved cache breakpoint), charged per message
CHECK_BACK = 4
PER_FACT_BYTES = 64


class AnthropicAdapter:
    name = "anthropic"

    def __init__(self) -> None:
        self.kept = KeptLowerings()
        self.lifts = KeptLifts()
        self.prefixes = PrefixMemory()  # each session's last request (``anthropic_prefix``)
        self.checked = PrefixMemory(max_bytes=8_000_000)  # each one's final check (``violations``)

    def lower(self, body: dict[str, Any], session: str | None = None) -> Lowered:
        """``session``: a key naming the request's session (None: nothing reused or kept)."""
        source: list[Any] = body["messages"]
        repairs: list[dict[str, Any]] = []
        slot: Hashable | None = None
        prev: Snapshot | None = None
        whole: Whole | None = None
        shared = 0
        if session is None:
            datas = self._bytes(source)
        else:
            first = self._bytes(source[:1])  # names the session's previous request
            if first and first[0] is not None:
                slot = (session, first[0])
                prev = self.prefixes.get(slot)
                if prev is not None:
                    slot = prev.slot  # its bytes compact
            old, old_datas = (prev.whole, prev.datas) if prev is not None else (None, [])
            datas, shared, whole = read_bytes(old, old_datas, source, self.kept.max_key_bytes)
            if slot is None:
                whole = None
        found = self._look_up(source, datas, prev.entries[:shared] if prev else [])
        shapes = (prev.shapes[:shared] if prev else []) + [
            e[2] if e else shape(m) for m, e in zip(source[shared:], found[shared:], strict=True)
        ]
        # the shapes of known messages come with their lowerings; the previous request's were
        # checked (a request that needed mending is not kept), up to its last message
        if needs_mending(shapes, max(shared - 1, 0)):
            source, repairs = mend(source)
            datas = self._bytes(source)
            found = self._look_up(source, datas, [])
            slot, prev, shared = None, None, 0  # mended: neither reused nor kept
        first_user = next((i for i, m in enumerate(source) if m.get("role") == "user"), None)
        st = State(source, Parts(), {}, bool(repairs), first_user, datas, [], shared, prev)
        if not repairs:
            st.shapes = shapes
            # those of the shared prefix kept with it: only the new messages' shapes are read
            known = prev.hidden if prev is not None else None
            start = shared if known is not None else 0
            st.hidden = known[: bisect_left(known, shared)] if known is not None else []
            st.hidden += [i for i in range(start, len(shapes)) if shapes[i] & F_HIDDEN]
        out: list[Message] = []
        serialised: list[bytes | None] = []
        system = body.get("system")
        if system:
            text = system if isinstance(system, str) else texts(system)
            part = Part(-1, (), system_message(prev.system if prev else None, text))
            st.parts["s"] = part
            out.append(part.lowered)
            serialised.append(None)
        kept, parts, user_tags = self.kept, st.parts, st.user_tags
        # this request's specs in order (parallel lists), for its snapshot
        c = prev.spec_end[shared] if prev is not None else 0
        u = prev.user_end[shared] if prev is not None else 0
        tags = prev.tags[:c] if prev else []
        idxs = prev.idxs[:c] if prev else []
        blocks = prev.blocks[:c] if prev else []
        templates = prev.templates[:c] if prev else []
        calls = prev.calls[:c] if prev else []
        serial = prev.serial[:c] if prev else []
        user_items = prev.user_items[:u] if prev else []
        spec_end = prev.spec_end[: shared + 1] if prev else [0]
        user_end = prev.user_end[: shared + 1] if prev else [0]
        if c:  # the shared prefix: its kept lowerings, shared (nothing changes one in place)
            lowereds = templates
            # their parts made when asked for (most never are: their liftings are reused)
            parts.share(
                prev.index,  # type: ignore[union-attr]
                c,
                lambda pos: Part(idxs[pos], blocks[pos], lowereds[pos], calls[pos]),
            )
            out += lowereds
            serialised += serial
            user_tags.update(user_items)
            st.facts = prev.facts[:shared]  # type: ignore[union-attr]
        for i in range(shared, len(source)):
            entry = found[i]
            if entry is None:
                entry = lowering(i, source[i])
                data = datas[i]
                if data is not None:
                    kept.put(data, i, entry, sum(len(s[4] or b"") for s in entry[0]))
                found[i] = entry
            specs, utags, _, facts = entry
            st.facts.append(facts)
            for tag, bl, template, cl, sorted_bytes in specs:
                # the kept object itself: the same message in every request, so the runner's
                # per-object memos of the session find it (nothing changes one in place)
                lowered = template
                parts[tag] = Part(i, bl, lowered, cl)
                out.append(lowered)
                serialised.append(sorted_bytes)
                tags.append(tag)
                idxs.append(i)
                blocks.append(bl)
                templates.append(template)
                calls.append(cl)
                serial.append(sorted_bytes)
            spec_end.append(len(tags))
            if utags is not None:
                user_tags[i] = utags
                user_items.append((i, utags))
            user_end.append(len(user_items))
        tools = read_tools(body.get("tools"), prev, lowered_tools)
        if slot is not None:
            kept_datas = datas[:shared] if prev is None else prev.datas[:shared]
            kept_datas += [d if d is None else compact(d) for d in datas[shared:]]
            cost = sum(map(len, filter(None, kept_datas))) + PER_MESSAGE_BYTES * len(source)
            cost += whole.cost if whole is not None else 0
            st.data = kept_datas
            index = tag_index(prev.index if prev else None, prev.tags if prev else (), c, tags)
            st.snapshot = snap = Snapshot(
                slot, kept_datas, cast("list[Lowering]", found), shapes, list(st.facts), spec_end,
                tags, idxs, blocks, templates, calls, serial, user_items, user_end,
                first_user, index, cost, whole=whole,
                system=st.parts["s"].lowered if system else None, tools=tools, hidden=st.hidden,
            )  # fmt: skip
            self.prefixes.put(slot, snap, cost)
        return Lowered(out, tools[1], repairs, st, serialised)

    def _bytes(self, source: list[Any]) -> list[bytes | None]:
        """Each message's bytes (None: not to be kept: not JSON, or too large)."""
        return message_bytes(source, self.kept.max_key_bytes)

    def _look_up(
        self, source: list[Any], datas: list[bytes | None], shared: list[Lowering]
    ) -> list[Lowering | None]:
        """Each message's kept lowering (None: unknown), those of ``shared`` first."""
        get = self.kept.get
        found: list[Lowering | None] = list(shared)
        for i in range(len(shared), len(source)):
            data = datas[i]
            found.append(None if data is None else get((data, i)))
        return found

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
        out: list[Any] = []
        system = body.get("system")
        parts, source = st.parts, st.source
        n = len(messages)
        if hashes is not None and len(hashes) != n:
            hashes = None
        facts = st.facts
        known: list[Facts | None] = []  # the final check's facts of each message of ``out``
        k = 0
        if n and messages[0].get(TAG) == "s":
            system = lift_system(body.get("system"), parts["s"], messages[0])
            k = 1
        recorder = None
        carried: list[tuple[int, list[Any]]] = []  # where a dropped message's mark went
        if hashes is not None and st.snapshot is not None:
            base = k
            k, reused = reuse_lifted(st, messages, hashes, base, out, known)
            recorder = Recorder(st, base, reused)
        while k < n:  # once per message of every request: role and tag read directly
            m = messages[k]
            tag = m.get(TAG)
            r = m.get("role")
            start, before = k, len(out)
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
                mark = dropped_mark(st, messages, k, end) if whole is None else None
                if mark is not None:  # not kept: the mark is the dropped messages', not the run's
                    plain = lift_user_run(st, run)
                    carried.append((len(out), plain))
                    out.extend(marked_line(plain, run, mark))
                    if recorder is not None:
                        recorder.broken = True
                elif whole is not None:
                    out.append(whole)
                    known.append(facts[st.parts[m.get(TAG)].index])  # type: ignore[index]
                else:
                    lift = partial(lift_user_run, st, run)
                    self._lift_kept(st, messages, hashes, k, end, lift, out, known)
                k = end
            if len(known) < len(out):  # lifted: read by the check itself
                known.extend([None] * (len(out) - len(known)))
            if recorder is not None:
                recorder.group(messages, start, k, out, before)
        if carried and too_many_marks(body, out):  # one still held elsewhere: none carried
            for at, plain in reversed(carried):
                out[at : at + len(plain)] = plain
        forwarded = dict(body)
        forwarded["messages"] = out
        lowered.known_facts = known
        if system is not body.get("system"):
            forwarded["system"] = system
        if recorder is not None and hashes is not None:
            array = recorder.array(out)  # each message's bytes: the body not written again
            members: MemberBytes | None = None
            if array is not None:  # the system prompt and tools too, when the same objects
                members = {}
                seen = st.prefix.members if st.prefix is not None else None
                lowered.data = with_items(forwarded, "messages", array, seen, members)
            snap = recorder.done(hashes, known, members)
            if snap is not None:
                self.prefixes.put(snap.slot, snap, snap.cost)
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

    def violations(self, forwarded: dict[str, Any], lowered: Lowered) -> list[str]:
        """The final check, resumed from the session's previous request's where the facts of
        this one's messages start with the very objects it checked (reused with the liftings)."""
        snap: Snapshot | None = lowered.state.snapshot
        resume = self.checked.get(snap.slot) if snap is not None else None
        found, checked = anthropic_checked(forwarded, lowered.known_facts, resume, -CHECK_BACK)
        if snap is not None and checked is not None:
            self.checked.put(snap.slot, checked, PER_FACT_BYTES * len(checked.facts))
        return found

    def hidden_text(self, body: dict[str, Any], lowered: Lowered | None = None) -> dict[str, str]:
        """``lowered``: the request ``body`` is (or was lifted from): only the messages that
        can hold a thinking block are read (by their shapes, kept with their lowerings)."""
        messages = body.get("messages") or []
        st: State | None = lowered.state if lowered is not None else None
        if st is not None and st.shapes and len(st.shapes) == len(st.source):
            if messages is st.source:
                messages = [messages[i] for i in st.hidden]
            elif isinstance(messages, list):  # forwarded: the client's objects with none skipped
                shapes = zip(st.source, st.shapes, strict=True)
                plain = {id(m) for m, s in shapes if not s & F_HIDDEN}
                messages = [m for m in messages if id(m) not in plain]
        texts: list[str] = []
        for m in messages:
            content = m.get("content") if isinstance(m, dict) else None
            for b in content if isinstance(content, list) else []:
                if isinstance(b, dict) and b.get("type") in _HIDDEN:
                    value = b.get("thinking") or b.get("data")
                    if isinstance(value, str):
                        texts.append(value)
        return {"thinking": "\n".join(texts)} if texts else {}


def _lifted_assistant(st: State, m: Message) -> list[Any]:
    return [lift_assistant(st, m)]


def _facts(message: Any) -> Facts | None:
    return kept_facts(message) if isinstance(message, dict) else None


def _lift_key(
    st: State, messages: list[Message], hashes: Sequence[str] | None, start: int, end: int
) -> tuple[Hashable | None, int]:
    """The key of the lifting of ``messages[start:end]`` (with the bytes it holds): their
    content hashes (tags included), which client message each comes from (relative to the
    first), the bytes of those client messages, each once (a message of 4,000 tool results is
    4,000 parts of one message: its bytes once, not 4,000 times), and the first user message's
    index (kept as sent). None when some input's bytes are unknown."""
    if hashes is None:
        return None, 0
    sources: list[int | None] = []
    data: list[bytes] = []
    seen: set[int] = set()
    size = 0
    base: int | None = None
    for m in messages[start:end]:
        part = st.parts.get(m.get(TAG))  # type: ignore[arg-type]
        if part is None:  # one the rules wrote: its hash is all of it
            sources.append(None)
            continue
        if part.index not in seen:
            known = st.data[part.index] if 0 <= part.index < len(st.data) else None
            if known is None:
                return None, 0
            seen.add(part.index)
            data.append(known)
            size += len(known)
        base = part.index if base is None else base
        sources.append(part.index - base)
    return (tuple(hashes[start:end]), tuple(sources), tuple(data), st.first_user), size


ANTHROPIC = AnthropicAdapter()
