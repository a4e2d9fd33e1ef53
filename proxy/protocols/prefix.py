"""The previous request of each session, kept so the next one reuses what was derived from the
messages they share (the Anthropic and Responses adapters' lowerings and liftings:
``anthropic_prefix``, ``responses_prefix``). An agent resends its whole conversation with every
request, two messages longer: walking the ~400 messages both share one by one (a lookup, a copy,
a lifting each) costs more than the rules themselves.

Reuse is proven, never trusted: a client message counts as shared only when its bytes
(``orjson.dumps``, key order and types included) equal the previous request's at the same index
(compared in one piece, ``read_bytes``, when the messages read as one array start with the
previous ones), and a lifting only when the rules' output messages it stands for have the
previous request's content hashes and its client messages are shared. What is kept is
immutable once kept (a request builds its own snapshot from slices of the previous one), so a race
only loses a reuse.

Bounded by sessions and by the bytes each snapshot is charged (its messages' bytes and a
per-message overhead); a session's snapshot is replaced by its next request's. Over a bound, the
principal holding most sessions (or bytes) loses its least recently kept snapshot first
(``proxy.fair_lru``): one tenant's stream of new sessions does not push another's out, whose next
request would walk its whole conversation again."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from operator import is_
from typing import Any, Generic, TypeVar

import orjson

from proxy.generations import compact
from proxy.protocols.base import TAG
from proxy.protocols.body_memory import ITEM_BYTES
from proxy.protocols.kept_lifts import json_exact
from rules.base import Message

# What a snapshot holds per client message beyond its bytes (its lowering's tuples and lists, the
# liftings' plan and facts; most of it shared with the kept lowerings), charged to the bound.
PER_MESSAGE_BYTES = 256
# a kept JSON value is held as its bytes and as objects (~1.7× its bytes): charged this × bytes
OBJECT_COST = 3
_STEP = 32
# a group's values are found among its client messages by a scan up to this many, else by id
_SCAN = 16


def common_prefix(a: Sequence[Any], b: Sequence[Any]) -> int:
    """How many leading items of ``a`` and ``b`` are equal (slices compared in C, then one by
    one). Bytes compare by content (``memcmp``), strings too; None equals None, which callers
    never keep as shared (a message without bytes is not kept)."""
    n = min(len(a), len(b))
    i = 0
    while i + _STEP <= n and a[i : i + _STEP] == b[i : i + _STEP]:
        i += _STEP
    while i < n and a[i] == b[i]:
        i += 1
    return i


def same_objects(a: Sequence[Any], b: Sequence[Any], limit: int | None = None) -> int:
    """How many leading items of ``a`` and ``b`` (up to ``limit``) are the very same objects:
    compared in C (``operator.is_``), not one by one in Python."""
    n = min(len(a), len(b)) if limit is None else min(len(a), len(b), limit)
    same = list(map(is_, a[:n], b[:n]))
    return same.index(False) if False in same else n


def shared_bytes(previous: Sequence[bytes | None], datas: Sequence[bytes | None]) -> int:
    """The client messages shared with the previous request: equal bytes, none unknown."""
    k = common_prefix(previous, datas)
    if None in datas[:k]:
        k = datas.index(None)
    return k


def message_bytes(source: Sequence[Any], limit: int) -> list[bytes | None]:
    """Each client message's (or item's) bytes, which prove it shared (None: not to be kept:
    not JSON, or over ``limit`` bytes)."""
    dumps = orjson.dumps
    datas: list[bytes | None] = []
    for m in source:
        try:
            data = dumps(m)
        except TypeError:  # lone surrogates (a body not parsed by orjson): lowered each time
            datas.append(None)
            continue
        # compact: orjson's output keeps kilobytes of spare room (``generations.compact``)
        datas.append(compact(data) if len(data) <= limit else None)
    return datas


@dataclass(frozen=True, slots=True)
class Whole:
    """A request's client messages as one JSON array (``orjson.dumps`` of the list: ``[``, each
    message's bytes joined by ``,``, ``]``), where each message's bytes end in it (those from
    the first up to one whose bytes are not known) and the messages themselves."""

    data: bytes | None  # None: read by its objects (``_extended``), never written whole
    ends: list[int]
    items: tuple[Any, ...] = ()

    @property
    def cost(self) -> int:
        """Its bytes (orjson's output keeps some spare capacity: a quarter more) and the client
        messages it holds (their known bytes twice, and ``body_memory.ITEM_BYTES`` each: what
        parsing keeps alive of them, charged here too since the body memory may drop them)."""
        held = 2 * self.ends[-1] + ITEM_BYTES * len(self.items) if self.items and self.ends else 0
        return len(self.data or b"") * 5 // 4 + 8 * len(self.ends) + held


# How many of the previous request's last messages a request may have changed (a moved cache
# breakpoint, a rewritten last message) and still be read in one piece
_TRIES = 3


def read_bytes(
    prev: Whole | None, prev_datas: Sequence[bytes | None], source: Sequence[Any], limit: int
) -> tuple[list[bytes | None], int, Whole | None]:
    """Each client message's bytes (``message_bytes``), how many lead ``prev_datas`` (shared)
    and the messages as one array. An agent resends its conversation with a message or two
    more: its array starts with the previous one's up to the end of a message and a ``,`` (or
    ends there), which one comparison proves, and only the messages after it are read one by
    one. Exact: each message is one JSON value, the next one starting after the ``,``, so the
    first ``k`` messages' bytes are the previous request's. Messages that are the previous
    request's very objects (``body_memory`` hands them out again for the same bytes) need not
    even be written."""
    if prev is not None and prev.ends:
        k = _same_objects(prev, source)
        if k:
            return _extended(prev, k, prev_datas, source, limit)
        data: bytes | None = None
        if prev.data is not None:  # else read one by one
            try:
                data = orjson.dumps(source)
            except TypeError:  # lone surrogates; nested one level too deep: read one by one
                data = None
        k = _shared_whole(prev, data) if data is not None else 0
        if k and data is not None:
            datas = [*prev_datas[:k], *message_bytes(source[k:], limit)]
            ends = _ends(prev.ends[:k], datas)
            if len(ends) < len(datas):  # only the known messages' bytes are compared: kept
                data = data[: ends[-1]]  # (not a screenshot's megabytes after them)
            return datas, k, Whole(data, ends, tuple(source))
    datas = message_bytes(source, limit)
    shared = shared_bytes(prev_datas, datas) if prev_datas else 0
    whole = None
    if datas and datas[0] is not None:
        ends = _ends([], datas)
        known = len(ends)
        # the array as orjson writes it: its known messages' bytes joined (read whole next time)
        tail = b"" if known < len(datas) else b"]"
        data = b"[" + b",".join(datas[:known]) + tail  # type: ignore[arg-type]
        whole = Whole(data, ends, tuple(source))
    return datas, shared, whole


def _same_objects(prev: Whole, source: Sequence[Any]) -> int:
    """How many of ``source``'s first messages are ``prev``'s very objects (with known bytes)."""
    n = min(len(prev.ends), len(source))
    same = list(map(is_, prev.items[:n], source[:n]))
    return same.index(False) if False in same else len(same)


def _extended(
    prev: Whole, k: int, prev_datas: Sequence[bytes | None], source: Sequence[Any], limit: int
) -> tuple[list[bytes | None], int, Whole]:
    """``read_bytes`` when the first ``k`` messages are ``prev``'s objects: their bytes are
    ``prev``'s, only the messages after them are written (and compared: an equal message may be
    a new object). The array is not written whole: the next request, handed the same objects,
    is read by them too (one that is not is read one by one)."""
    datas = [*prev_datas[:k], *message_bytes(source[k:], limit)]
    shared = k + shared_bytes(prev_datas[k:], datas[k:])
    return datas, shared, Whole(None, _ends(prev.ends[:k], datas), tuple(source))


def _shared_whole(prev: Whole, data: bytes) -> int:
    """How many of ``prev``'s leading messages ``data`` (an array) starts with, tried from the
    last back ``_TRIES`` messages (0: fewer, or ``prev`` not written whole)."""
    if prev.data is None:
        return 0
    view = memoryview(prev.data)
    n = len(prev.ends)
    for k in range(n, max(n - _TRIES, 0), -1):
        end = prev.ends[k - 1]
        if len(data) > end and data[end] in b",]" and data.startswith(view[:end]):
            return k
    return 0


def _ends(ends: list[int], datas: Sequence[bytes | None]) -> list[int]:
    """``ends`` (those of ``datas``' first messages) and those of the next known ones."""
    pos = ends[-1] if ends else 0  # the ``[`` or the ``,`` before each message
    out = list(ends)
    for d in datas[len(ends) :]:
        if d is None:
            break
        pos += 1 + len(d)
        out.append(pos)
    return out


P = TypeVar("P")


class SharedParts(Generic[P]):
    """An adapter's parts by provenance tag: those lowered for this request, and those of the
    previous request's lowered messages it shares, made when first asked for (most never are:
    their liftings are reused too)."""

    __slots__ = ("count", "index", "made", "make")

    def __init__(self) -> None:
        self.made: dict[str, P] = {}
        # the shared messages: tag -> position (those from ``count`` on are not shared), and the
        # part at a position
        self.index: dict[str, int] = {}
        self.count = 0
        self.make: Callable[[int], P] | None = None

    def share(self, index: dict[str, int], count: int, make: Callable[[int], P]) -> None:
        self.index, self.count, self.make = index, count, make

    def get(self, tag: Any) -> P | None:
        part = self.made.get(tag)
        if part is None and self.make is not None:
            pos = self.index.get(tag)
            if pos is not None and pos < self.count:
                part = self.made[tag] = self.make(pos)
        return part

    def __getitem__(self, tag: str) -> P:
        part = self.get(tag)
        if part is None:
            raise KeyError(tag)
        return part

    def __setitem__(self, tag: str, part: P) -> None:
        self.made[tag] = part

    def __contains__(self, tag: object) -> bool:
        return self.get(tag) is not None

    def keys(self) -> set[str]:
        return {t for t, pos in self.index.items() if pos < self.count} | self.made.keys()

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())


def tag_index(
    prev_index: dict[str, int] | None, prev_tags: Sequence[str], shared: int, tags: Sequence[str]
) -> dict[str, int]:
    """Each tag's position in ``tags``, whose first ``shared`` are ``prev_tags``' (indexed as
    ``prev_index``): the previous index copied, without its tags past them."""
    if prev_index is None or not shared:
        return dict(zip(tags, range(len(tags)), strict=True))
    index = prev_index.copy()
    for tag in prev_tags[shared:]:
        del index[tag]
    index.update(zip(tags[shared:], range(shared, len(tags)), strict=True))
    return index


def plan_values(
    lifted: Sequence[Any], idxs: Sequence[int], source: Sequence[Any], plan: list[int],
    kept: list[bytes], objects: list[Any],
) -> bool:  # fmt: skip
    """Each lifted value onto ``plan``: the client message or item it is (``>= 0``: its index in
    ``source``, one of ``idxs``) or ``~j``, the ``j``-th JSON value appended to ``kept`` (its
    bytes) and ``objects`` (itself: forwarded again as it is, since nothing changes a forwarded
    body). False when one does not survive a JSON round trip exactly (the caller then keeps
    nothing more)."""
    # a long run (thousands of user-side messages in one group) is looked up by identity, not
    # scanned for each value: the scan would be quadratic in the run
    by_id = {id(source[i]): i for i in reversed(idxs)} if len(idxs) > _SCAN else {}  # first wins
    for v in lifted:
        j = by_id.get(id(v)) if by_id else next((i for i in idxs if source[i] is v), None)
        if j is not None:
            plan.append(j)
            continue
        data = json_exact(v)
        if data is None:
            return False
        kept.append(data)
        objects.append(v)
        plan.append(~(len(kept) - 1))
    return True


def system_message(kept: Message | None, text: str) -> Message:
    """The system message lowered from ``text`` (tagged ``s``): ``kept``, the session's previous
    request's, when it says the same, so the runner's memos of the session know it."""
    if kept is not None and kept["content"] == text:
        return kept
    return {"role": "system", "content": text, TAG: "s"}


def planned_bytes(
    plan: Sequence[int], data: Sequence[bytes | None], values: Sequence[bytes]
) -> list[bytes] | None:
    """The JSON of each value ``plan`` (``plan_values``) names: a client message's or item's own
    bytes (``data``), a written value's kept JSON (``values``). None: one's bytes not known."""
    pieces: list[bytes] = []
    for j in plan:
        piece = data[j] if j >= 0 else values[~j]
        if piece is None:
            return None
        pieces.append(piece)
    return pieces


MemberBytes = dict[str, tuple[Any, bytes]]


def read_tools(
    tools: Any, prev: Any, read: Callable[[Any], list[Any] | None]
) -> tuple[Any, list[Any] | None]:
    """``(tools, read(tools))``: the tools as the rules read them, taken from ``prev`` (the
    session's previous snapshot, its ``tools`` field) when they were read from this very object
    (the body memory hands a session's next body the same one), so the list is the same object
    too and what is derived from it by identity (token counts, the cache ledger's digest) is
    not derived again."""
    held = prev.tools if prev is not None else None
    if held is not None and held[0] is tools:
        return held  # type: ignore[no-any-return]
    return tools, read(tools)


def with_items(
    body: dict[str, Any],
    key: str,
    items: list[bytes],
    known: MemberBytes | None = None,
    wrote: MemberBytes | None = None,
) -> bytes | None:
    """``orjson.dumps(body)``, ``body[key]`` being the array of the values whose JSON is
    ``items`` (its other members written; None: one is not JSON). One copy of the bytes.
    ``body`` is a validated one's rewrite: nested at most ``body.MAX_JSON_DEPTH`` levels, far
    below orjson's limit, so its items, written alone, are written as they are inside it.
    ``known``: members written before, by name with the value itself; a member whose value is
    that very object is taken from there, not written again (a session's system instruction and
    tools: the same objects request after request, from the body memory). ``wrote``: filled
    with the members written here, so."""
    dumps = orjson.dumps
    pieces = [b"{"]
    try:
        for k, v in body.items():
            if len(pieces) > 1:
                pieces.append(b",")
            if k == key:
                pieces += (dumps(k), b":[", b",".join(items), b"]")
                continue
            seen = known.get(k) if known is not None else None
            data = seen[1] if seen is not None and seen[0] is v else dumps(v)
            if wrote is not None:
                wrote[k] = (v, data)
            pieces += (dumps(k), b":", data)
    except TypeError:
        return None
    pieces.append(b"}")
    return b"".join(pieces)
