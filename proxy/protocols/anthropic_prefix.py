"""The Anthropic adapter's reuse of a session's previous request (``prefix_memory.PrefixMemory``).

Lowering: the client messages whose bytes equal the previous request's at the same index (the
longest such prefix; a message's lowering is a pure function of its bytes and index) take the
previous lowering's specs as one slice each, handed to the rules as they are, instead of being
looked up message by message.

Lifting walks the rules' output in groups (an assistant message, a run of user-side messages …),
each lifted from its messages and the client messages their parts come from. A group of the
previous request is reused when every output message up to its end has the previous request's
content hash (tags included: the same parts), the client messages it comes from are shared, the
first user message is the same one and the group ends where it ended then. Its values are the
current request's own client messages (where the lifting returned the client's message) or the
values it forwarded then (kept with their JSON, which proves them JSON through and through; a
forwarded body is never changed, so they are forwarded again as they are); each value's facts for
the final check come along."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from proxy.protocols.anthropic_lower import Lowering
from proxy.protocols.anthropic_parts import State, user_side
from proxy.protocols.base import TAG
from proxy.protocols.prefix import (
    OBJECT_COST,
    PER_MESSAGE_BYTES,
    MemberBytes,
    Whole,
    common_prefix,
    plan_values,
    planned_bytes,
)
from proxy.protocols.prefix import shared_bytes as shared_bytes  # where it was, for callers
from rules.base import Message


@dataclass(frozen=True, slots=True)
class LiftMemory:
    """What a request's lifting made, group by group (parallel lists, one item per group: the
    output message it ends before, the forwarded values and kept JSON values before its end, the
    highest client message index used so far, whether it is a run of user-side messages), and
    per forwarded value: where it comes from (>= 0: that client message itself; < 0: ``~j``, the
    ``j``-th JSON value) and its facts for the final check."""

    base: int  # 1 when the output starts with the top-level system (lifted apart), else 0
    hashes: list[str]
    ends: list[int]
    outs: list[int]
    vals_end: list[int]
    top: list[int]
    runs: list[bool]
    plan: list[int]
    values: list[bytes]
    objects: list[Any]  # the values themselves, forwarded again as they are
    facts: list[Any]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A request's lowering (per client message, and its specs in order as parallel lists) and,
    once lifted, its ``LiftMemory``."""

    slot: Hashable
    datas: list[bytes | None]
    entries: list[Lowering]
    shapes: list[int]
    facts: list[Any]
    spec_end: list[int]  # per client message (and one past the last): specs before it
    tags: list[str]
    idxs: list[int]
    blocks: list[tuple[int, ...]]
    templates: list[Message]
    calls: list[Any]
    serial: list[bytes | None]
    user_items: list[tuple[int, list[str]]]
    user_end: list[int]  # per client message (and one past the last): user items before it
    first_user: int | None
    index: dict[str, int]  # tag -> position of its spec
    cost: int
    lift: LiftMemory | None = None
    whole: Whole | None = None  # the client messages as one array (``prefix.read_bytes``)
    system: Message | None = None  # the system message lowered (``prefix.system_message``)
    # the body's other members as its lifting wrote them (``prefix.with_items``: by name, with
    # the value itself), which the session's next body, handed the same objects, takes over
    members: MemberBytes | None = None
    # the tools as the rules read them, with the ``tools`` value they were read from: taken
    # over while the body memory hands the session's next body the same object
    tools: tuple[Any, list[Any] | None] | None = None
    hidden: list[int] | None = None  # ``State.hidden``: which shapes hold a thinking block


def reuse_lifted(
    st: State, messages: list[Message], hashes: Sequence[str], base: int, out: list[Any],
    known: list[Any],
) -> tuple[int, int]:  # fmt: skip
    """The previous request's groups this request shares, onto ``out`` and ``known``: the
    output message index where lifting goes on, and how many groups were reused."""
    prev: Snapshot | None = st.prefix
    mem = prev.lift if prev is not None else None
    if mem is None or mem.base != base or prev.first_user != st.first_user:  # type: ignore[union-attr]
        return base, 0
    hp = common_prefix(hashes, mem.hashes)
    g = min(bisect_right(mem.ends, hp), bisect_left(mem.top, st.shared)) - 1
    n = len(messages)
    # a run that ended where the shared hashes end must end there now too
    if g >= 0 and mem.ends[g] == hp and mem.runs[g] and hp < n and user_side(messages[hp]):
        g -= 1
    if g < 0:
        return base, 0
    end_out = mem.outs[g]
    loaded = mem.objects
    source = st.source
    out.extend([source[j] if j >= 0 else loaded[~j] for j in mem.plan[:end_out]])
    known.extend(mem.facts[:end_out])
    return mem.ends[g], g + 1


class Recorder:
    """Builds this request's ``LiftMemory``: the reused groups' items, then each group lifted."""

    def __init__(self, st: State, base: int, reused: int) -> None:
        self.st, self.base = st, base
        mem: LiftMemory | None = st.prefix.lift if reused else None
        if mem is None:
            self.ends: list[int] = []
            self.outs: list[int] = []
            self.vals_end: list[int] = []
            self.top: list[int] = []
            self.runs: list[bool] = []
            self.plan: list[int] = []
            self.values: list[bytes] = []
            self.objects: list[Any] = []
        else:
            g = reused
            self.ends, self.outs = mem.ends[:g], mem.outs[:g]
            self.vals_end, self.top, self.runs = mem.vals_end[:g], mem.top[:g], mem.runs[:g]
            self.plan = mem.plan[: mem.outs[g - 1]]
            self.values = mem.values[: mem.vals_end[g - 1]]
            self.objects = mem.objects[: mem.vals_end[g - 1]]
        self.broken = False

    def group(
        self, messages: list[Message], start: int, end: int, out: list[Any], before: int
    ) -> None:
        """``messages[start:end]`` were lifted as ``out[before:]``."""
        if self.broken:
            return
        parts, source = self.st.parts, self.st.source
        idxs: list[int] = []
        for m in messages[start:end]:
            tag = m.get(TAG)
            part = parts.get(tag)  # type: ignore[arg-type]
            if tag == "s":  # the top-level system, lifted apart: never reused
                self.broken = True
                return
            if part is not None:
                idxs.append(part.index)
        if not plan_values(out[before:], idxs, source, self.plan, self.values, self.objects):
            self.broken = True  # not JSON through and through: this group and the rest not kept
            return
        self.ends.append(end)
        self.outs.append(len(out))
        self.vals_end.append(len(self.values))
        self.top.append(max(self.top[-1] if self.top else -1, max(idxs, default=-1)))
        role = messages[start].get("role")
        self.runs.append(role not in ("assistant", "system", "developer"))

    def array(self, out: list[Any]) -> list[bytes] | None:
        """The JSON of each of ``out`` (the forwarded messages), from the bytes known of it: a
        client message's own, a written value's kept JSON (None: one not known)."""
        if self.broken or (self.outs[-1] if self.outs else 0) != len(out):
            return None
        return planned_bytes(self.plan[: len(out)], self.st.data, self.values)

    def done(
        self, hashes: Sequence[str], known: list[Any], members: MemberBytes | None = None
    ) -> Snapshot | None:
        """This request's snapshot with its lifting (None: nothing to keep)."""
        snap: Snapshot | None = self.st.snapshot
        if snap is None:
            return None
        n = self.outs[-1] if self.outs else 0
        end = self.vals_end[-1] if self.vals_end else 0
        values = self.values[:end]
        mem = LiftMemory(
            self.base, list(hashes), self.ends, self.outs, self.vals_end, self.top, self.runs,
            self.plan[:n], values, self.objects[:end], known[:n],
        )  # fmt: skip
        cost = snap.cost + OBJECT_COST * sum(map(len, values)) + PER_MESSAGE_BYTES * n
        cost += sum(len(data) for _, data in members.values()) if members else 0
        return replace(snap, lift=mem, cost=cost, members=members)
