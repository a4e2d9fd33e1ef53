"""Shared vocabulary of the pipeline: what a rule sees (Context), what it returns (RuleResult),
the per-session memory it may read and update (SessionState), and the base of every rule's config.

A rule is a module with a ``Config`` class (a ``RuleConfig``) and a function
``apply(ctx: Context, cfg: Config) -> RuleResult``. Rules are pure: no I/O, no clock (``ctx.now``),
no environment, and they never mutate ``ctx.messages`` or the dicts inside it: a rule that changes
a message builds a new dict for it and a new list. Returning the very same list object means
"no change", which lets the runner skip re-measuring.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import is_
from typing import Any, Protocol, TypeVar

import orjson
from pydantic import BaseModel, ConfigDict, Field

from rules.report import Report

Message = dict[str, Any]
Messages = list[Message]
# ``Context.memo``: by name, the last lists of messages (a tuple of the very objects, or the list
# itself) and what was made of them
ListMemo = dict[str, list[tuple[Sequence[Message], Any]]]
T = TypeVar("T")


def content_hash(message: Message) -> str:
    """Short hash of a message (sorted keys), used to anchor edits and compare prefixes."""
    return hash_bytes(orjson.dumps(message, option=orjson.OPT_SORT_KEYS))


def hash_bytes(data: bytes) -> str:
    """``content_hash`` of a message already serialised with sorted keys."""
    return hashlib.blake2b(data, digest_size=10).hexdigest()


class RuleConfig(BaseModel):
    """Base of every rule's options. Unknown options are an error at start-up, never per request."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    enabled: bool = Field(
        default=True, description="false: the rule does not run (its options are still checked)"
    )


@dataclass(frozen=True)
class SessionState:
    """Per-session memory, one JSON-serialisable value per namespace (a rule owns its namespace).

    Immutable: ``with_value`` returns a new state, so a rule that raises leaves the old one intact.
    """

    data: Mapping[str, Any] = field(default_factory=dict)

    def get(self, namespace: str, default: Any = None) -> Any:
        return self.data.get(namespace, default)

    def with_value(self, namespace: str, value: Any) -> SessionState:
        new = dict(self.data)
        new[namespace] = value
        return SessionState(new)

    def to_json(self) -> dict[str, Any]:
        return dict(self.data)


class TokenCounter(Protocol):
    """Counts tokens for the request's model. Implementations cache per message."""

    def count_text(self, text: str) -> int: ...

    def count_message(self, message: Message) -> int: ...

    def count_messages(self, messages: Sequence[Message]) -> int: ...

    def count_tools(self, tools: Sequence[Any] | None) -> int: ...


@dataclass(frozen=True)
class Ancestor:
    """A parent (or grand-parent …) session of a sub-agent, nearest first."""

    session_id: str
    state: SessionState
    depth: int


@dataclass(frozen=True)
class CacheFacts:
    """What the proxy knows of the provider's prompt cache for this request: the model's prices
    (per token; cached reads and cache writes as ratios of a fresh token) and cache rules, plus
    what the upstream reported about the session's previous request. The proxy fills it (cost
    model and usage feedback); rules only read it. The defaults are the strictest case: unknown
    prices count as r = 0.1."""

    input_price: float | None = None  # fresh input, per token (None: unknown)
    read_ratio: float = 0.1  # a cached token costs this share of a fresh one
    write_ratio: float = 1.0  # writing the cache (Anthropic: 1.25)
    ttl_s: float = 300.0  # the provider keeps a prefix this long after its last use
    min_prefix_tokens: int = 1024  # shorter prompts are never cached
    # Anthropic's cache is read at breakpoints, looking back this many blocks for an earlier
    # entry (about one a message here): an edit further back re-bills all but the system prompt.
    # None: a plain prefix cache (OpenAI, Gemini, DeepSeek).
    lookback_messages: int | None = None
    # the session's previous request, as the upstream reported it (None: never seen)
    last_at: float | None = None  # when it was sent (the request's clock)
    last_prompt_tokens: int | None = None
    last_cached_tokens: int | None = None  # tokens read from the cache
    last_cache_write_tokens: int | None = None


class RenderMemo(Protocol):
    """Messages rules rendered on earlier requests (an elided result, a shrunk turn, a block
    placed on its host), kept by the runner across requests. A key must determine the message:
    it holds every input of the pure function that rendered it (content hashes for messages).
    ``get`` returns a fresh copy each time (the caller may hand it on), or None."""

    def get(self, key: Hashable) -> Message | None: ...

    def put(self, key: Hashable, message: Message) -> None: ...


# The lists ``frozen`` froze last, newest first: (the list, its length, its tuple).
_FROZEN: list[tuple[Any, int, tuple[Any, ...]] | None] = [None, None]


def frozen(messages: Sequence[Message]) -> tuple[Message, ...]:
    """``tuple(messages)``: the very same tuple for a list frozen just before (its length the
    same: a request's lists are not changed once handed on). The rules keep the session's last
    list as a tuple each; one tuple for them all lets ``rules.messages.shared_prefix`` compare
    the next request's list with it once."""
    if messages.__class__ is tuple:
        return messages
    for hit in _FROZEN:
        if hit is not None and hit[0] is messages and hit[1] == len(messages):
            return hit[2]
    out = tuple(messages)
    _FROZEN[:] = [(messages, len(out), out), _FROZEN[0]]
    return out


# The last answers of ``shared_prefix`` for a kept tuple: (it, the list, its length, the answer).
_SHARED: list[tuple[Any, Any, int, int] | None] = [None] * 4


def shared_prefix(before: Sequence[Message], now: Sequence[Message]) -> int:
    """How many leading messages are the very same objects in both lists (an agent's next
    request resends its last one's: the runner keeps them as objects per session). The rules
    keep the session's last list as one tuple (``frozen``): asked again of it and the same
    list, the answer is not walked for again."""
    kept = before.__class__ is tuple
    if kept:
        for hit in _SHARED:
            if hit is not None and hit[0] is before and hit[1] is now and hit[2] == len(now):
                return hit[3]
    same = list(map(is_, before, now))  # stops at the shorter list
    k = same.index(False) if False in same else len(same)
    if kept:
        _SHARED[:] = [(before, now, len(now), k), *_SHARED[:-1]]
    return k


def release_lists() -> None:
    """Let go of the lists ``frozen`` and ``shared_prefix`` remember. They are process-wide and
    their hits come within one request's rules (the next request brings other lists), so the
    pipeline calls this when a request's rules are done: nothing past it keeps a request's
    messages alive (up to the body limit each)."""
    _FROZEN[:] = [None] * len(_FROZEN)
    _SHARED[:] = [None] * len(_SHARED)


def lists_held() -> int:
    """How many lists ``frozen`` and ``shared_prefix`` remember now."""
    return sum(hit is not None for hit in (*_FROZEN, *_SHARED))


DERIVED_LISTS = 4  # lists ``Context.derived`` keeps a value for, for each name (newest first)
HASHES_MEMO = "hashes"  # ``Context.memo`` name of the lists ``hashes_of`` hashed last
HASHED_LISTS = 2  # the client's and the forwarded


@dataclass(frozen=True)
class Context:
    """Everything a rule may look at. ``messages`` is the conversation as it stands after the
    previous rule; ``original_messages`` is what the client sent (never to be changed)."""

    messages: Messages
    model: str
    tokens: TokenCounter
    now: float
    session_id: str = ""
    state: SessionState = field(default_factory=SessionState)
    tools: list[Any] | None = None
    request: Mapping[str, Any] = field(default_factory=dict)  # the whole body, read-only
    original_messages: Messages = field(default_factory=list)
    ancestors: tuple[Ancestor, ...] = ()
    budget: int | None = None
    # What no forwarded request may pass, where known (the model's window less the output
    # reserve, or a limit the upstream stated): a rule may leave a request over ``budget``,
    # never over this.
    window_room: int | None = None
    cache: CacheFacts = field(default_factory=CacheFacts)  # prices and the cache's last answer
    # The tool-call ids the upstream accepts: a rule's name in ``rules.chain.call_ids.RULES``
    call_ids: str = "anthropic"
    report: Report = field(default_factory=Report)  # fragments of earlier rules, read-only
    # Answers fetched by the proxy for a second pass (e.g. the optional resolver model's picks):
    # data in, so the rules stay free of I/O.
    hints: Mapping[str, Any] = field(default_factory=dict)
    # Per-request caches of pure derived values, shared by every rule of one request (evolve keeps
    # them). Entries hold the object they were computed from, so an id is never reused meanwhile:
    # ``derived`` values by name, ``table``s by name, message hashes by id.
    memo: ListMemo = field(default_factory=dict, compare=False, repr=False)
    tables: dict[str, dict[int, tuple[Any, Any]]] = field(
        default_factory=dict, compare=False, repr=False
    )
    hashes: dict[int, tuple[Message, str]] = field(default_factory=dict, compare=False, repr=False)
    # The runner's memo of rendered messages across requests (None: render every time).
    renders: RenderMemo | None = field(default=None, compare=False, repr=False)

    def evolve(self, **changes: Any) -> Context:
        # dataclasses.replace re-runs __init__ (~8 µs); the runner evolves twice per rule
        new = object.__new__(Context)
        new.__dict__.update(self.__dict__)
        new.__dict__.update(changes)
        return new

    def derived(self, name: str, compute: Callable[[Messages], T]) -> T:
        """``compute(self.messages)``, once for each messages list: rules that pass the list on
        unchanged share the result (e.g. the observations prune and working_set use). ``compute``
        depends on the list's messages alone, so a list of the very same message objects (the
        runner keeps a session's memo across its requests) shares it too."""
        messages = self.messages
        kept = self.memo.get(name)
        if kept is not None:
            for seen, value in kept:  # the lists of a request: a few (the input, prune's view …)
                if seen.__class__ is tuple:  # derived: the very same messages will do
                    if len(seen) == len(messages) and all(map(is_, seen, messages)):
                        return value  # type: ignore[no-any-return]  # what ``compute`` gave
                elif seen is messages:  # shared: for this very list only
                    return value  # type: ignore[no-any-return]
        value = compute(messages)
        # the messages as they are now (a tuple: a list changed later cannot match)
        self.memo[name] = [(frozen(messages), value), *(kept or [])[: DERIVED_LISTS - 1]]
        return value

    def keyed(self, name: str, key: tuple[object, ...], compute: Callable[[], T]) -> T:
        """``compute()``, a pure function of this request's messages and of the objects in
        ``key`` (a rule's options, a namespace of the state as the session holds it): kept for
        the last ``DERIVED_LISTS`` lists of the very same messages with the very same objects
        (a resent body, the session's next request before a rule changed it)."""
        found, value = self.recall(name, key)
        if not found:
            value = compute()
            self.keep(name, key, value)
        return value  # type: ignore[no-any-return]  # what ``compute`` gave

    def recall(self, name: str, key: tuple[object, ...]) -> tuple[bool, Any]:
        """(True, what ``keep`` kept under ``name`` for the very same messages and ``key``
        objects), or (False, None)."""
        messages = self.messages
        n = len(messages)
        for seen, (objects, value) in self.memo.get(name) or ():
            if (
                len(seen) == n
                and all(map(is_, objects, key))
                and shared_prefix(seen, messages) == n
            ):
                return True, value
        return False, None

    def keep(self, name: str, key: tuple[object, ...], value: Any) -> None:
        """Keep ``value`` for ``recall``: the entries hold their objects, so an id is never
        reused meanwhile; the last ``DERIVED_LISTS`` are kept."""
        kept = self.memo.get(name) or []
        self.memo[name] = [(frozen(self.messages), (key, value)), *kept[: DERIVED_LISTS - 1]]

    def share(self, name: str, messages: Messages, value: Any) -> None:
        """Take ``value`` as ``derived(name, …)`` of this very list, worked out another way (not
        from its messages alone, as prune's anchors of a view are its sources'): no other list
        of the same messages, in this request or a later one, gets it."""
        kept = self.memo.get(name) or []
        self.memo[name] = [(messages, value), *kept[: DERIVED_LISTS - 1]]

    def told(self, name: str) -> Any:
        """What ``share`` told of this very list that ``derived(name, …)`` gives now, or None
        (it gives a value worked out from the messages alone): a value kept for a resent list
        and read from a ``derived`` one keys on it."""
        messages = self.messages
        for seen, value in self.memo.get(name) or ():  # in ``derived``'s order: its first match
            if seen.__class__ is tuple:
                if len(seen) == len(messages) and all(map(is_, seen, messages)):
                    return None
            elif seen is messages:
                return value
        return None

    def table(self, name: str) -> dict[int, tuple[Any, Any]]:
        """One request's table ``name`` of values derived from single objects (mostly messages):
        ``id(obj) -> (obj, value)``, the object kept so its id is never reused meanwhile. Shared
        by every rule of the request, so a message object checked once is not checked again."""
        table = self.tables.get(name)
        if table is None:
            table = self.tables[name] = {}
        return table

    def remember_hash(self, message: Message, value: str) -> None:
        """Tell ``hash_of`` the message's hash, known from elsewhere (the runner's records)."""
        self.hashes[id(message)] = (message, value)

    def hashes_of(self, messages: Sequence[Message]) -> list[str]:
        """``[hash_of(m) for m in messages]``, its lookups inlined (every message, several times
        a request: the history's, anchors, the forwarded prefix's). The lists hashed last (the
        session's ``memo``: the client's and the forwarded) lend the hashes of the messages
        they share at the start, the same objects: only the rest is looked up."""
        kept: list[tuple[Sequence[Message], Any]] = self.memo.get(HASHES_MEMO) or []
        shared, out = 0, []
        for seen, (hashes, _) in kept:
            k = shared_prefix(seen, messages)
            if k == len(seen) == len(messages):
                return list(hashes)  # this very list again: nothing new to keep
            if k > shared:
                shared, out = k, hashes[:k]
        get, hash_of = self.hashes.get, self.hash_of
        for m in messages[shared:] if shared else messages:
            hit = get(id(m))
            out.append(hit[1] if hit is not None and hit[0] is m else hash_of(m))
        self.memo[HASHES_MEMO] = [(frozen(messages), (out, self.hashes)), *kept[: HASHED_LISTS - 1]]
        return list(out)

    def unhashed(self, messages: Sequence[Message]) -> list[int]:
        """The indices of the messages whose hash is not known yet. Those a list hashed last
        into these ``hashes`` (``hashes_of``) shares at the start are: they are not looked up."""
        start = 0
        for seen, (_, into) in self.memo.get(HASHES_MEMO) or ():
            if into is not self.hashes:
                continue
            start = max(start, shared_prefix(seen, messages))
        get = self.hashes.get
        tail = enumerate(messages[start:], start)
        return [i for i, m in tail if (h := get(id(m))) is None or h[0] is not m]

    def hash_of(self, message: Message) -> str:
        """``content_hash(message)``, computed once per message object per request."""
        hit = self.hashes.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        value = content_hash(message)
        self.hashes[id(message)] = (message, value)
        return value


@dataclass(frozen=True)
class RuleResult:
    """A rule's answer: the new conversation and state (same objects = unchanged) and a report
    fragment in data, merged by the runner: list values are appended, others set."""

    messages: Messages
    state: SessionState
    report: Report = field(default_factory=Report)

    @classmethod
    def unchanged(cls, ctx: Context, report: Report | None = None) -> RuleResult:
        return cls(ctx.messages, ctx.state, report or {})
