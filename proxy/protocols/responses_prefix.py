"""The Responses adapter's reuse of a session's previous request
(``prefix_memory.PrefixMemory``), as the Anthropic adapter's (``anthropic_prefix``), over input
items.

Lowering: a lowered message is a pure function of its items, their indices and, for a run of
items lowered as one assistant message, the item that ended the run (a later item could have
joined it). So the previous request's messages whose items and ending item are all shared
(equal bytes at the same index) are taken as slices, handed to the rules as they are, with their
bytes for the runner's records and the calls' kinds; lowering goes on from the first item past
them.

Lifting writes each output message back on its own: its items are a pure function of its
content (tag included), the lowering of the part it stands for and the client items of that part,
and, for a tool result the rules wrote, the kind of the call it answers. The previous request's
liftings are reused up to the first output message whose content hash differs, whose part is not
lowered the same (not all shared), or (a tool result the rules wrote) whose call's kind differs.
A reused value is the current request's own client item where the lifting returned the client's
item, else the value forwarded then (kept with its JSON, which proves it JSON through and through;
a forwarded body is never changed, so it is forwarded again as it is)."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from proxy.generations import compact
from proxy.protocols.base import TAG
from proxy.protocols.kept import sorted_bytes
from proxy.protocols.prefix import (
    OBJECT_COST,
    PER_MESSAGE_BYTES,
    MemberBytes,
    Whole,
    common_prefix,
    plan_values,
    planned_bytes,
    tag_index,
)
from proxy.protocols.responses_parts import Part, State
from rules.base import Message


@dataclass(frozen=True, slots=True)
class LiftMemory:
    """What a request's lifting made, per output message from ``base`` on (parallel lists: the
    forwarded values and kept JSON values once it is lifted, the highest item count any part so
    far needs shared), per forwarded value where it comes from (>= 0: that client item itself;
    < 0: ``~j``, the ``j``-th JSON value), and the calls' kinds its written tool results read
    (output message index, call id, kind)."""

    base: int  # 1 when the output starts with the instructions (lifted apart), else 0
    hashes: list[str]
    outs: list[int]
    vals_end: list[int]
    top: list[int]
    plan: list[int]
    values: list[bytes]
    objects: list[Any]  # the values themselves, forwarded again as they are
    asked: list[tuple[int, str, str | None]]
    # names this lifting (never another's while held): the final check's state kept for the
    # body it forwarded holds it (``ResponsesAdapter.violations``)
    token: object = field(default_factory=object)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A request's items' bytes, its lowered messages in order (parallel lists: tag, items, the
    message as kept, its sorted-key bytes (``kept``), the items it needs shared,
    the item lowering goes on from after it), its call items in order (index, id, kind) and,
    once lifted, its ``LiftMemory``."""

    slot: Hashable
    datas: list[bytes | None]
    tags: list[str]
    items: list[tuple[int, ...]]
    templates: list[Message]
    serial: list[bytes | None]
    need: list[int]
    ends: list[int]
    call_at: list[int]
    call_ids: list[str]
    call_kinds: list[str]
    reasoning: list[int]  # the reasoning items' indices (``ResponsesAdapter.hidden_text``)
    index: dict[str, int]  # tag -> position
    cost: int
    lift: LiftMemory | None = None
    whole: Whole | None = None  # the items as one array (``prefix.read_bytes``)
    system: Message | None = None  # ``instructions`` lowered (``prefix.system_message``)
    # the body's other members as its lifting wrote them (``prefix.with_items``: by name, with
    # the value itself), which the session's next body, handed the same objects, takes over
    members: MemberBytes | None = None
    # the tools as the rules read them, with the ``tools`` value they were read from: taken
    # over while the body memory hands the session's next body the same object
    tools: tuple[Any, list[Any] | None] | None = None


class Lowering:
    """One request's lowered messages from its items (``ResponsesAdapter.lower``): those shared
    with the previous request taken from its snapshot, the others added one by one."""

    def __init__(self, st: State, out: list[Message], serialised: list[bytes | None]) -> None:
        self.st, self.out, self.serialised = st, out, serialised
        prev: Snapshot | None = st.prefix
        c = bisect_right(prev.need, st.shared) if prev is not None else 0
        self.start = prev.ends[c - 1] if prev is not None and c else 0
        if prev is None or not c:
            self.tags: list[str] = []
            self.items: list[tuple[int, ...]] = []
            self.templates: list[Message] = []
            self.serial: list[bytes | None] = []
            self.need: list[int] = []
            self.ends: list[int] = []
            self.call_at: list[int] = []
            self.call_ids: list[str] = []
            self.call_kinds: list[str] = []
            self.reasoning: list[int] = []
            return
        self.tags, self.items, self.templates = prev.tags[:c], prev.items[:c], prev.templates[:c]
        self.serial = prev.serial[:c]
        self.need, self.ends = prev.need[:c], prev.ends[:c]
        k = bisect_left(prev.call_at, self.start)
        self.call_at, self.call_ids = prev.call_at[:k], prev.call_ids[:k]
        self.call_kinds = prev.call_kinds[:k]
        self.reasoning = prev.reasoning[: bisect_left(prev.reasoning, self.start)]
        st.call_kinds.update(zip(self.call_ids, self.call_kinds, strict=True))
        lowereds = self.templates  # shared: nothing changes a lowering in place
        items, need = self.items, self.need  # the parts, made when asked for
        st.parts.share(prev.index, c, lambda pos: Part(items[pos], lowereds[pos], need[pos]))
        out += lowereds
        serialised += self.serial

    def call(self, i: int, cid: str, kind: str) -> None:
        self.st.call_kinds[cid] = kind
        self.call_at.append(i)
        self.call_ids.append(cid)
        self.call_kinds.append(kind)

    def add(self, tag: str, part: Part, kept: bool) -> None:
        """``part`` lowered (its items up to ``part.items[-1]``); ``kept``: a snapshot will hold
        it (so the rules get a copy), else nothing is recorded."""
        part.lowered[TAG] = tag
        self.st.parts[tag] = part
        if not kept:  # nothing to keep: the rules get the message, the runner serialises it
            self.out.append(part.lowered)
            self.serialised.append(None)
            return
        data = sorted_bytes(part.lowered)  # the lowering itself is kept as it is
        self.out.append(part.lowered)
        self.serialised.append(data)
        self.tags.append(tag)
        self.items.append(part.items)
        self.templates.append(part.lowered)
        self.serial.append(data)
        self.need.append(part.need)
        self.ends.append(part.items[-1] + 1)

    def snapshot(
        self,
        slot: Hashable,
        datas: list[bytes | None],
        whole: Whole | None,
        system: Message | None = None,
        tools: tuple[Any, list[Any] | None] | None = None,
    ) -> Snapshot:
        prev: Snapshot | None = self.st.prefix
        shared = self.st.shared
        c = self.st.parts.count
        index = tag_index(prev.index if prev else None, prev.tags if prev else (), c, self.tags)
        kept = prev.datas[:shared] if prev is not None else []
        kept += [d if d is None else compact(d) for d in datas[shared:]]
        # the items' bytes, and the lowered messages' twice: their bytes, and the strings their
        # templates keep alive (shared with the client's parsed items, which go)
        lowered = sum(map(len, filter(None, self.serial)))
        cost = sum(map(len, filter(None, kept))) + 2 * lowered + PER_MESSAGE_BYTES * len(kept)
        cost += whole.cost if whole is not None else 0
        return Snapshot(
            slot, kept, self.tags, self.items, self.templates, self.serial,
            self.need, self.ends, self.call_at, self.call_ids, self.call_kinds, self.reasoning,
            index, cost, whole=whole, system=system, tools=tools,
        )  # fmt: skip


def reuse_lifted(st: State, hashes: Sequence[str], base: int, out: list[Any]) -> int:
    """The previous request's liftings this request shares, onto ``out``: the output message
    index where lifting goes on."""
    prev: Snapshot | None = st.prefix
    mem = prev.lift if prev is not None else None
    if mem is None or mem.base != base:
        return base
    r = min(common_prefix(hashes, mem.hashes) - base, bisect_left(mem.top, st.shared))
    kinds = st.call_kinds
    for j, cid, kind in mem.asked:
        if j - base >= r:
            break
        if kinds.get(cid) != kind:
            r = j - base
            break
    if r <= 0:
        return base
    end_out = mem.outs[r - 1]
    loaded = mem.objects
    items = st.items
    out.extend([items[j] if j >= 0 else loaded[~j] for j in mem.plan[:end_out]])
    return base + r


class Recorder:
    """Builds this request's ``LiftMemory``: the reused messages' entries, then each message
    lifted."""

    def __init__(self, st: State, base: int, resumed: int) -> None:
        self.st, self.base = st, base
        r = resumed - base
        mem: LiftMemory | None = st.prefix.lift if r > 0 else None
        self.broken = False
        if mem is None:
            self.outs: list[int] = []
            self.vals_end: list[int] = []
            self.top: list[int] = []
            self.plan: list[int] = []
            self.values: list[bytes] = []
            self.objects: list[Any] = []
            self.asked: list[tuple[int, str, str | None]] = []
            return
        self.outs, self.vals_end, self.top = mem.outs[:r], mem.vals_end[:r], mem.top[:r]
        self.plan = mem.plan[: mem.outs[r - 1]]
        self.values = mem.values[: mem.vals_end[r - 1]]
        self.objects = mem.objects[: mem.vals_end[r - 1]]
        self.asked = [a for a in mem.asked if a[0] < resumed]

    def message(self, k: int, m: Message, out: list[Any], before: int) -> None:
        """Output message ``k`` (``m``) was lifted as ``out[before:]``."""
        if self.broken:
            return
        st = self.st
        top = self.top[-1] if self.top else -1
        tag = m.get(TAG)
        idxs: tuple[int, ...] = ()
        if tag is None:
            cid = m.get("tool_call_id")
            if m.get("role") == "tool" and isinstance(cid, str):
                self.asked.append((k, cid, st.call_kinds.get(cid)))
        else:
            part = st.parts.get(tag)
            if part is None or not part.items:  # instructions or string input, or unknown
                self.broken = True
                return
            idxs = part.items
            top = max(top, part.need - 1)
        items = st.items
        if not plan_values(out[before:], idxs, items, self.plan, self.values, self.objects):
            self.broken = True  # not JSON through and through: this message and the rest not kept
            return
        self.outs.append(len(self.plan))
        self.vals_end.append(len(self.values))
        self.top.append(top)

    def array(self, out: list[Any]) -> list[bytes] | None:
        """The JSON of each of ``out`` (the forwarded items), from the bytes known of it: a client
        item's own, a written value's kept JSON (None: one not known)."""
        snap: Snapshot | None = self.st.snapshot
        if self.broken or snap is None or len(self.plan) != len(out):
            return None
        return planned_bytes(self.plan, snap.datas, self.values)

    def done(self, hashes: Sequence[str], members: MemberBytes | None = None) -> Snapshot | None:
        """This request's snapshot with its lifting (None: nothing to keep)."""
        snap: Snapshot | None = self.st.snapshot
        if snap is None:
            return None
        n = len(self.outs)
        end = self.vals_end[-1] if n else 0
        values = self.values[:end]
        plan = self.plan[: self.outs[-1]] if n else []
        mem = LiftMemory(
            self.base, list(hashes), self.outs, self.vals_end, self.top, plan, values,
            self.objects[:end], self.asked,
        )  # fmt: skip
        cost = snap.cost + OBJECT_COST * sum(map(len, values)) + PER_MESSAGE_BYTES * n
        cost += sum(len(data) for _, data in members.values()) if members else 0
        return replace(snap, lift=mem, cost=cost, members=members)
