"""Each session's last request body, kept so that the next one is parsed only where it differs.
An agent resends its whole conversation with every request, a message or two longer: parsing,
depth-checking and validating the ~400 messages both share (~0.5 MB) again costs ~0.9 ms, more
than any rule.

Reuse is proven on the bytes, never trusted. A body is kept only as far as its bytes are what
``orjson.dumps`` writes for what was parsed from them (a compact client's: Claude Code, Codex and
httpx send such JSON), checked piece by piece: the members before the array (``messages``,
``input``), each of its items, the members after it. A later body reuses the first ``k`` items
when it starts with the kept bytes up to the end of item ``k`` followed by ``,`` or ``]``. What
follows is read on its own: the new items as an array and the members after the array, split
where the body ends with those members as ``orjson.dumps`` writes them (the kept ones, or those
parsed from the split on). Both reads must succeed, and the new items must not be empty after a
``,``, so the body is exactly the head, the shared items, the new items and those members, which
is what parsing it whole gives (a head member repeated after the array: last value, first place,
as orjson). Anything else (a body not written compactly, a different start, bad JSON) is parsed
whole, as it always was, and errors are worded by that parse.

The parsed objects are shared with the next request that reuses them: nothing downstream changes
a parsed body (the rules and adapters copy what they change; the litellm paths get a copy).
Bounded by slots (a session header, else the body's first bytes; LRU), bodies per slot (the next
request of a conversation replaces its last; another conversation's is kept beside it) and the
bytes each is charged (``charge``: its raw body and an estimate of its parsed objects). Over a
bound, the principal holding most (slots, or bytes) loses its least recently used slot first: one
tenant's many sessions or large bodies do not push another's out.

The body limits hold before anything is parsed (``body_limits``): at most ``max_items`` items
and ``max_json_containers`` objects and arrays, counted on the bytes to be parsed (a reused
prefix counts as the kept body's count, an upper bound). ``read`` says how many of a body's
bytes were new (what the work on it will cost: ``proxy.rewrite.offload``) and, given ``inline``,
reads nothing when more than that would have to be parsed: the caller then reads it off the event
loop."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from proxy.protocols.body import MAX_JSON_DEPTH, parse_json
from proxy.protocols.body_limits import check_body, check_containers, check_items
from proxy.protocols.exact_json import LossyNumber, exact_within_depth

# A body names its slot by its first bytes when no session header does (the model and the start
# of the first message); a slot keeps this many bodies (sub-agents sharing a session header, or
# sessions sharing a first message), the longest shared prefix wins.
KEY_BYTES = 512
PER_SLOT = 4
# Parsed JSON takes ~1.5× its compact bytes for long texts, ~6× for an agent's tool calls and
# short results (measured with tracemalloc): a body is charged its bytes thrice and this per item
# of its array, which holds for both (~1.3× and ~0.9× what it keeps alive)
ITEM_BYTES = 700
# the last items are tried first (an agent appends; a moved cache breakpoint rewrites one or two)
_TRIES = 3

Validate = Callable[[dict[str, Any], int], None]


@dataclass(frozen=True, slots=True)
class Kept:
    """A body as kept: never changed once kept."""

    raw: bytes
    head: tuple[tuple[str, Any], ...]  # the members before the array
    items: tuple[Any, ...]  # the array's items
    ends: tuple[int, ...]  # where each proven item ends in ``raw`` (the first ``len(ends)``)
    close: int  # where the array's ``]`` is in ``raw`` (-1: the members after it not proven)
    rest: tuple[tuple[str, Any], ...]  # the members after the array (when ``close >= 0``)
    nodes: int = 0  # at least as many as the objects and arrays in ``raw`` (when counted)

    @property
    def charge(self) -> int:
        return 3 * len(self.raw) + ITEM_BYTES * len(self.items)


class BodyMemory:
    """Bodies whose array is ``key``, parsed (``parse_json``) and validated (``validate(body,
    start)``: the items before ``start`` were validated at the same index before)."""

    def __init__(
        self,
        key: str,
        validate: Validate,
        max_bytes: int = 128_000_000,
        max_slots: int = 256,
        max_items: int | None = None,
        max_containers: int | None = None,
    ) -> None:
        self.key = key
        self.max_items = max_items
        self.max_containers = max_containers
        self._opening = orjson.dumps(key) + b":["
        self._validate = validate
        self.max_bytes = max_bytes
        self.max_slots = max_slots
        self._slots: OrderedDict[Any, list[Kept]] = OrderedDict()
        self._bytes = 0
        self._held: dict[Any, list[int]] = {}  # principal -> [its slots, their bytes]
        self._lock = threading.Lock()
        self.reused = 0  # bodies read from a kept one (for tests and the bench)

    @property
    def held_bytes(self) -> int:
        return self._bytes

    def parse(self, raw: bytes, hint: str | None = None, principal: str = "") -> dict[str, Any]:
        """``raw`` parsed and validated; ``hint``: the request's session header, if any; each
        principal's bodies are kept apart."""
        read = self.read(raw, hint, principal)
        assert read is not None  # read whatever it takes without ``inline``
        return read[0]

    def read(
        self, raw: bytes, hint: str | None = None, principal: str = "", inline: int | None = None
    ) -> tuple[dict[str, Any], int] | None:
        """``parse``, and how many of ``raw``'s bytes were new (not a kept body's prefix, nor
        its unchanged members after the array). With ``inline``: None, having read nothing,
        when more bytes than that would be new (the caller reads it elsewhere)."""
        slot = (principal, "s", hint) if hint else (principal, "b", raw[:KEY_BYTES])
        with self._lock:
            candidates = list(self._slots.get(slot, ()))
        # the body sharing the longest prefix first (a slot may hold several conversations)
        ranked = sorted(((_shared(kept, raw), kept) for kept in candidates), key=_first)
        for shared, kept in reversed(ranked):
            if not shared:
                break
            fresh = _fresh(kept, raw, kept.ends[shared - 1])
            if inline is not None and fresh > inline:
                return None  # the others share less of it
            read = self._reuse(kept, raw, shared)
            if read is not None:
                body, kept_now = read
                # the same conversation's next request replaces it; another one is kept beside
                known = len(kept.ends)
                follows = shared >= known - _TRIES and 2 * shared > known
                self._keep(slot, kept_now, replacing=kept if follows else None, reused=True)
                return body, fresh
        if inline is not None and len(raw) > inline:
            return None
        nodes = 0
        if self.max_containers is not None:
            nodes = check_containers(raw, self.max_containers)
        body = parse_json(raw)
        if self.max_items is not None:
            check_body(body, self.key, self.max_items)
        self._validate(body, 0)
        proven = self._proven(raw, body, nodes)
        if proven is not None:
            self._keep(slot, proven, replacing=None)
        return body, len(raw)

    def _reuse(self, kept: Kept, raw: bytes, shared: int) -> tuple[dict[str, Any], Kept] | None:
        """``raw`` read from ``kept``, whose first ``shared`` items it starts with."""
        end = kept.ends[shared - 1]
        if raw[end] not in b",]":
            return None
        # a view, not a copy: the members after the array (the tools) are often half the body
        suffix: bytes | memoryview | None = (
            memoryview(kept.raw)[kept.close :] if kept.close >= 0 else None
        )
        rest = kept.rest
        changed = suffix is None or not raw.endswith(suffix) or len(raw) - len(suffix) < end
        # counted before any of it is parsed; the members after the array too when they changed
        counted = len(raw) if changed or suffix is None else len(raw) - len(suffix)
        nodes = self._nodes(raw, kept, end, counted)
        if changed:
            # the members after the array changed: parsed from the split on, then proven
            start = end + 1 if raw[end] == 0x2C else end
            try:
                tail = orjson.loads(b"{" + self._opening + raw[start:])
            except orjson.JSONDecodeError:
                return None
            rest = tuple(tail.items())[1:]  # after the array, whose name comes first
            suffix = _suffix(rest)
            if suffix is None or not raw.endswith(suffix) or len(raw) - len(suffix) < end:
                return None
            if not _exact_within_depth(dict(rest), MAX_JSON_DEPTH - 1):
                return None
        assert suffix is not None
        close = len(raw) - len(suffix)
        new: list[Any] = []
        if close > end:  # ``,`` and the new items
            if raw[end] != 0x2C:
                return None
            try:
                new = orjson.loads(b"[" + raw[end + 1 : close] + b"]")
            except orjson.JSONDecodeError:
                return None
            if not new or not _exact_within_depth(new, MAX_JSON_DEPTH - 2):
                return None
        if self.max_items is not None:
            check_items(shared + len(new), self.key, self.max_items)
        body = dict(kept.head)
        items = kept.items[:shared] + tuple(new)
        body[self.key] = list(items)
        body.update(rest)  # a head member repeated after the array: its last value, first place
        self._validate(body, shared)
        ends = _proven_items(raw, new, end + 1, list(kept.ends[:shared]))
        return body, Kept(raw, kept.head, items, tuple(ends), close, rest, nodes)

    def _nodes(self, raw: bytes, kept: Kept, end: int, counted: int) -> int:
        """At least as many as ``raw``'s objects and arrays: ``kept``'s (whose first bytes up to
        ``end`` it shares) and the brackets in ``raw[end:counted]``; counted over the whole body
        (400 past the limit) when that exceeds the limit."""
        cap = self.max_containers
        if cap is None:
            return 0
        nodes = kept.nodes + raw.count(b"{", end, counted) + raw.count(b"[", end, counted)
        return nodes if nodes <= cap else check_containers(raw, cap)

    def _proven(self, raw: bytes, body: dict[str, Any], nodes: int = 0) -> Kept | None:
        """``raw`` as kept when it is ``body`` written compactly up to its first item at least."""
        items = body.get(self.key)
        if type(items) is not list or not items:
            return None
        members = list(body.items())
        at = next(i for i, (name, _) in enumerate(members) if name == self.key)
        head, rest = tuple(members[:at]), tuple(members[at + 1 :])
        try:
            opening = orjson.dumps(dict(head))[:-1] + (b"," if head else b"") + self._opening
            suffix = _suffix(rest)
        except TypeError:  # not JSON orjson writes (a body parsed otherwise)
            return None
        if not raw.startswith(opening):
            return None
        ends = _proven_items(raw, items, len(opening), [])
        if not ends:
            return None
        close = len(raw) - len(suffix) if suffix is not None and raw.endswith(suffix) else -1
        if close < ends[-1]:  # the members after the array are not written so
            close, rest = -1, ()
        return Kept(raw, head, tuple(items), tuple(ends), close, rest, nodes)

    def _keep(self, slot: Any, kept: Kept, replacing: Kept | None, reused: bool = False) -> None:
        with self._lock:
            self.reused += reused
            bodies = self._take(slot)
            bodies = [kept, *(b for b in bodies if b is not replacing)][:PER_SLOT]
            if kept.charge > self.max_bytes // 4:
                bodies = bodies[1:]
            if bodies:
                self._put(slot, bodies)
            while self._slots and (over := self._over()):
                self._take(self._evictee(over))

    def _over(self) -> int:
        """Which bound is passed: 1 the slots', 2 the bytes' (0: none)."""
        return 1 if len(self._slots) > self.max_slots else 2 if self._bytes > self.max_bytes else 0

    def _evictee(self, over: int) -> Any:
        """The least recently used slot of the principal holding most slots (``over`` 1) or
        bytes (2)."""
        heaviest = max(self._held, key=lambda p: self._held[p][over - 1])
        return next((k for k in self._slots if k[0] == heaviest), next(iter(self._slots)))

    def _put(self, slot: Any, bodies: list[Kept]) -> None:
        charge = sum(b.charge for b in bodies)
        self._slots[slot] = bodies
        self._bytes += charge
        held = self._held.setdefault(slot[0], [0, 0])
        held[0] += 1
        held[1] += charge

    def _take(self, slot: Any) -> list[Kept]:
        bodies = self._slots.pop(slot, [])
        if bodies:
            charge = sum(b.charge for b in bodies)
            self._bytes -= charge
            held = self._held[slot[0]]
            held[0] -= 1
            held[1] -= charge
            if not held[0]:
                del self._held[slot[0]]
        return bodies


def _first(pair: tuple[int, Kept]) -> int:
    return pair[0]


def _fresh(kept: Kept, raw: bytes, end: int) -> int:
    """The bytes of ``raw`` after ``end`` (where the prefix it shares with ``kept`` ends) when
    the members after the array are ``kept``'s, unchanged; else all of them. Those members may
    name another session (``user``, ``metadata``) or model (another token encoding), whose rules
    know nothing of the shared messages: their work is the whole body's."""
    if kept.close >= 0:
        suffix = len(kept.raw) - kept.close
        if len(raw) - suffix >= end and raw.endswith(memoryview(kept.raw)[kept.close :]):
            return len(raw) - suffix - end
    return len(raw)


def _shared(kept: Kept, raw: bytes) -> int:
    """How many of ``kept``'s proven items ``raw`` starts with (the bytes up to an item's end,
    with more after them)."""
    view = memoryview(kept.raw)
    ends = kept.ends
    size = len(raw)

    def starts(i: int) -> bool:
        end = ends[i - 1]
        return size > end and raw.startswith(view[:end])

    n = len(ends)
    for i in range(n, max(n - _TRIES, 0), -1):
        if starts(i):
            return i
    lo, hi = 0, max(n - _TRIES, 0)  # ``starts`` holds up to some i, then never again
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if starts(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _suffix(rest: tuple[tuple[str, Any], ...]) -> bytes | None:
    """The array's ``]`` and the members after it, as ``orjson.dumps`` writes them."""
    try:
        return b"]," + orjson.dumps(dict(rest))[1:] if rest else b"]}"
    except TypeError:
        return None


def _proven_items(raw: bytes, items: Any, pos: int, ends: list[int]) -> list[int]:
    """``ends`` and the ends of those of ``items`` (from ``pos``, each after a ``,``) written as
    ``orjson.dumps`` writes them, up to the first that is not."""
    dumps = orjson.dumps
    last = len(items) - 1
    for i, item in enumerate(items):
        try:
            data = dumps(item)
        except TypeError:
            break
        if not raw.startswith(data, pos):
            break
        pos += len(data)
        ends.append(pos)
        if i < last and raw[pos : pos + 1] != b",":
            break
        pos += 1
    return ends


def _exact_within_depth(value: dict[str, Any] | list[Any], remaining: int) -> bool:
    """``exact_within_depth``, False on an integer past 64 bits (the body is then parsed whole,
    which keeps it exactly)."""
    try:
        return exact_within_depth(value, remaining)
    except LossyNumber:
        return False
