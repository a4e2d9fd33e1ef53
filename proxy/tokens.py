"""Token counting with tiktoken, offline, with counts cached per text so a conversation that grows
by two messages costs two messages of counting. Media parts (images, audio, documents), a tool
result's too, count the providers' published estimates (``rules.media``). A long text is counted
in windows (``proxy.token_windows``), which bounds the tokenizer's time and memory on a run
without whitespace. A tokenizer that fails on a text, however it fails, leaves that text an
estimate of ``CHARS_PER_TOKEN`` characters a token (``count_guarded``): counting never fails a
request."""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from functools import lru_cache
from operator import is_
from pathlib import Path
from typing import Any

import orjson

from proxy.failures import STOPPING
from proxy.generations import Generations, compact
from proxy.token_windows import windows
from rules.base import Message
from rules.media import marked_media_tokens, media_tokens
from rules.memo_scope import memo_scope
from rules.messages import (
    ABSORBED,
    MEDIA_TOKENS,
    call_arguments_text,
    call_name,
    text_of,
    tool_calls,
)
from rules.text_cache import ENTRY_CHARS

log = logging.getLogger("ctxproxy.tokens")

# Chat formats add a few tokens per message for the role and separators (OpenAI's cookbook figure).
PER_MESSAGE_OVERHEAD = 4
_O200K_PREFIXES = (
    "gpt-4o",
    "gpt-4.1",
    "gpt-4.5",
    "gpt-5",
    "o1",
    "o3",
    "o4",
    "chatgpt-4o",
    "gpt-oss",
)


def ensure_offline_tiktoken() -> None:
    """Point tiktoken at the encodings litellm ships (tiktoken would download them otherwise).

    Finds litellm's folder without importing litellm (that costs seconds). Must run before the first
    encoding is loaded; an explicit TIKTOKEN_CACHE_DIR from the environment wins.
    """
    if os.environ.get("TIKTOKEN_CACHE_DIR"):
        return
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return
    folder = Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"
    if folder.is_dir():
        os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)


def encoding_name_for(model: str) -> str:
    name = model.rsplit("/", 1)[-1].lower()
    return "o200k_base" if name.startswith(_O200K_PREFIXES) else "cl100k_base"


@lru_cache(maxsize=4)
def _encoding(name: str) -> Any:
    ensure_offline_tiktoken()
    from proxy.kept_encodings import encoding

    return encoding(name)  # its table kept between runs, once a command keeps them


def _loaded(name: str) -> Callable[[str], Any]:
    """The encoding's ``encode_ordinary``; when it cannot be loaded (its file missing offline),
    one that fails, so every text is estimated (``count_guarded`` logs it)."""
    try:
        encode: Callable[[str], Any] = _encoding(name).encode_ordinary
    except STOPPING:
        raise
    except BaseException as exc:
        failure = exc

        def encode(text: str) -> Any:
            raise RuntimeError(f"the {name} encoding could not be loaded: {failure!r}")

    return encode


# The estimate for a text the tokenizer failed on: English prose runs about 4 characters a token.
CHARS_PER_TOKEN = 4
_warned: set[str] = set()  # the encodings whose failure was logged (once per process each)


def estimate_tokens(text: str) -> int:
    """``text``'s tokens estimated from its length (``CHARS_PER_TOKEN``), rounded up."""
    return -(-len(text) // CHARS_PER_TOKEN)


def count_guarded(encode: Callable[[str], Any], text: str, encoding: str) -> tuple[int, bool]:
    """(tokens, counted): the tokens of ``text``'s ``windows``, or the estimate when the tokenizer
    failed in any way but the process or task being stopped (pyo3's ``PanicException`` is a
    ``BaseException``). The first failure of each encoding is logged as a warning."""
    try:
        return sum(len(encode(window)) for window in windows(text)), True
    except STOPPING:
        raise
    except BaseException as exc:
        if encoding not in _warned:
            _warned.add(encoding)
            log.warning(
                "the %s tokenizer failed (%s) on a text of %d characters: such texts are "
                "estimated at %d characters a token (logged once)",
                encoding, type(exc).__name__, len(text), CHARS_PER_TOKEN,
            )  # fmt: skip
        return estimate_tokens(text), False


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _scoped_digest(key: tuple[str, str | bytes], text: str) -> tuple[str, bytes]:
    """A failed text's entry: its key's scope and the text's digest (the key's, when it is one)."""
    scope, kept = key
    return scope, kept if isinstance(kept, bytes) else _digest(text)


# Texts up to this length are their own cache key (str hashing is the cheapest key there is, and
# the cache is bounded by the characters it holds); a longer one is keyed by a digest, so one huge
# tool output never pins megabytes.
_INLINE_KEY_CHARS = 262_144
_MAX_FAILED = 256  # texts remembered as failed, per counter


# tools lists held by identity, by their serialised bytes (parsed: ~6x that, shared with the
# bodies the body memory keeps); past it, a list is counted by its bytes' digest again
TOOL_LIST_BYTES = 2_000_000


class TiktokenCounter:
    """A TokenCounter for one encoding, caching counts per text in an LRU bounded by the characters
    it holds. Thread-safe: a large request's pipeline may run in a worker thread."""

    def __init__(self, encoding_name: str = "o200k_base", cache_chars: int = 32_000_000) -> None:
        self.encoding_name = encoding_name
        self._encode: Callable[[str], Any] = _loaded(encoding_name)
        # digests of the texts the tokenizer failed on: never handed to it again (bounded)
        self._failed: OrderedDict[tuple[str, bytes], int] = OrderedDict()
        self._failed_chars = 0  # the length of the shortest text that failed (once one has)
        self._cache: OrderedDict[tuple[str, str | bytes], int] = OrderedDict()
        self._cache_chars = cache_chars
        self._held = 0
        self._schemas = _Schemas(min(cache_chars, 4_000_000))
        # the last tools lists counted, by identity: the body memory hands a session's next
        # request the very list it parsed before, so its count needs no serialising at all
        self._tool_lists: OrderedDict[int, tuple[Sequence[Any], int, int]] = OrderedDict()
        self._tool_bytes = 0  # the serialised size of the lists held
        self._lock = threading.Lock()

    def count_text(self, text: str) -> int:
        if not text:
            return 0
        # within the principal's own entries (``rules.memo_scope``): a hit on another tenant's
        # text would answer faster than a miss
        key: tuple[str, str | bytes] = (
            memo_scope(),
            text if len(text) <= _INLINE_KEY_CHARS else _digest(text),
        )
        cached = self._cache.get(key)  # a C-level OrderedDict call: atomic, no lock needed to read
        if cached is not None:
            # evicted by another thread meanwhile: fine. (contextlib.suppress would cost more than
            # the rest of a hit, and this is the hottest call of a request)
            try:  # noqa: SIM105
                self._cache.move_to_end(key)
            except KeyError:
                pass
            return cached
        n = self._count(text, key)
        with self._lock:
            if key not in self._cache:
                self._cache[key] = n
                self._held += len(key[1]) + ENTRY_CHARS
                while self._held > self._cache_chars and self._cache:
                    old, _ = self._cache.popitem(last=False)
                    self._held -= len(old[1]) + ENTRY_CHARS
        return n

    def _count(self, text: str, key: tuple[str, str | bytes]) -> int:
        """The tokenizer's count, or the estimate for a text it failed on (then or before)."""
        failed = self._failed
        # only texts as long as one that failed can be one: no digest to pay for the others
        digest = None
        if failed and len(text) >= self._failed_chars:
            digest = _scoped_digest(key, text)
            known = failed.get(digest)
            if known is not None:
                return known
        n, counted = count_guarded(self._encode, text, self.encoding_name)
        if not counted:
            with self._lock:
                failed[digest or _scoped_digest(key, text)] = n
                shortest = self._failed_chars
                self._failed_chars = min(shortest, len(text)) if shortest else len(text)
                while len(failed) > _MAX_FAILED:
                    failed.popitem(last=False)
        return n

    def count_message(self, message: Message) -> int:
        content = message.get("content")
        n = PER_MESSAGE_OVERHEAD + self.count_text(text_of(content)) + media_tokens(content)
        if MEDIA_TOKENS in message or ABSORBED in message:  # a result's blocks its adapter holds
            n += marked_media_tokens(message)
        for call in tool_calls(message):
            n += 3 + self.count_text(call_name(call)) + self.count_text(call_arguments_text(call))
        return n

    def count_messages(self, messages: Sequence[Message]) -> int:
        return sum(self.count_message(m) for m in messages) + 3

    def count_tools(self, tools: Sequence[Any] | None) -> int:
        if not tools:
            return 0
        known = self._tool_lists.get(id(tools))
        if known is not None and known[0] is tools:  # the entry holds the list: ids not reused
            return known[1]
        # keyed by the schema's bytes: an agent sends the same tools (tens of kB) every request,
        # and decoding and hashing them as text cost more than the count's lookup
        data = orjson.dumps(list(tools))
        n = self._schemas.lookup(data)
        if n is None:
            n = self.count_text(data.decode())
            self._schemas.keep(data, n)
        with self._lock:
            old = self._tool_lists.pop(id(tools), None)
            self._tool_bytes += len(data) - (old[2] if old else 0)
            self._tool_lists[id(tools)] = (tools, n, len(data))
            while self._tool_bytes > TOOL_LIST_BYTES and self._tool_lists:
                self._tool_bytes -= self._tool_lists.popitem(last=False)[1][2]
        return n


class _Schemas(Generations[int]):
    """Token counts of tool schemas by their serialised bytes, bounded by the bytes held."""

    def lookup(self, data: bytes) -> int | None:
        key = (memo_scope(), data)  # the principal's own entries (``rules.memo_scope``)
        n = self._young.get(key)
        if n is None:
            n = self._old.get(key)
            if n is not None:
                self.keep(data, n)  # used again: into the newer generation
        return n

    def keep(self, data: bytes, n: int) -> None:
        self._keep((memo_scope(), compact(data)), n, len(data) + 100)


COUNTED_LISTS = 4  # lists ``RequestTokens.count_messages`` keeps running totals of


class RequestTokens:
    """One request's view of a counter: message counts memoised per message object, since every
    rule counts the same messages again. Entries keep their message, so ids are not reused."""

    def __init__(self, base: TiktokenCounter) -> None:
        self.base = base
        self._memo: dict[int, tuple[Message, int]] = {}
        self._texts: dict[int, tuple[str, int]] = {}
        self._tools: tuple[Any, int] | None = None  # the last tools list counted, and its count
        # the last lists counted (newest first) with their counts
        self._lists: list[tuple[tuple[Message, ...], int]] = []

    def adopt(
        self,
        counts: dict[int, tuple[Message, int]],
        texts: dict[int, tuple[str, int]],
        lists: list[tuple[tuple[Message, ...], int]],
    ) -> None:
        """Count into these tables from now on: the session's, kept across its requests
        (``proxy.rewrite.session_memos``), which hold what this request has counted too."""
        counts.update(self._memo)
        texts.update(self._texts)
        self._memo, self._texts, self._lists = counts, texts, lists

    def count_tools(self, tools: Sequence[Any] | None) -> int:
        # several rules count the request's one tools list: once per request
        last = self._tools
        if last is not None and last[0] is tools:
            return last[1]
        n = self.base.count_tools(tools)
        self._tools = (tools, n)
        return n

    def count_text(self, text: str) -> int:
        # The rules pass the same string objects again and again; a long one would be digested
        # for the shared cache on every call.
        hit = self._texts.get(id(text))
        if hit is not None and hit[0] is text:
            return hit[1]
        n = self.base.count_text(text)
        self._texts[id(text)] = (text, n)
        return n

    def count_message(self, message: Message) -> int:
        hit = self._memo.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        content = message.get("content")
        if content.__class__ is str:
            n = PER_MESSAGE_OVERHEAD + self.count_text(content)
        else:  # parts: their text, and the media among them at the providers' estimates
            n = PER_MESSAGE_OVERHEAD + self.count_text(text_of(content)) + media_tokens(content)
        if MEDIA_TOKENS in message or ABSORBED in message:  # a result's blocks its adapter holds
            n += marked_media_tokens(message)
        if message.get("tool_calls"):  # missing, null or empty: no calls
            count = self.count_text
            for call in tool_calls(message):
                n += 3 + count(call_name(call)) + count(call_arguments_text(call))
        self._memo[id(message)] = (message, n)
        return n

    def known(self, message: Message) -> int | None:
        """The message's count if this request already has it, else None."""
        hit = self._memo.get(id(message))
        return hit[1] if hit is not None and hit[0] is message else None

    def table(self) -> dict[int, tuple[Message, int]]:
        """The request's counts, ``id(message) -> (message, count)``: the runner fills it in bulk
        with counts known from earlier requests (``remember``'s, for many)."""
        return self._memo

    def remember(self, message: Message, n: int) -> None:
        """Take the message's count as known (the runner's records: counted in an earlier
        request, by the same encoding)."""
        self._memo[id(message)] = (message, n)

    def count_messages(self, messages: Sequence[Message]) -> int:
        # the hottest loop of a request: every rule sizes its view, and a session's next
        # request holds the very same lists of messages again (the same body resent, a retry)
        # a tool loop's next request is the last list and a call and result more: the longest
        # list kept that these messages start with is counted already (compared in C)
        n = len(messages)
        start, total = 0, 3
        for seen, known in self._lists:
            k = len(seen)
            if k > n or k <= start or (k and seen[-1] is not messages[k - 1]):
                continue
            if all(map(is_, seen, messages)):  # ``map`` stops at the shorter: ``seen``'s length
                if k == n:
                    return known
                start, total = k, known
        memo = self._memo
        for m in messages[start:] if start else messages:  # memo hits inlined
            hit = memo.get(id(m))
            total += hit[1] if hit is not None and hit[0] is m else self.count_message(m)
        lists = self._lists  # the session's, once adopted: changed in place
        lists.insert(0, (tuple(messages), total))
        del lists[COUNTED_LISTS:]
        return total


class TokenCounters:
    """One counter per encoding, shared across requests (their caches make counting cheap)."""

    def __init__(self) -> None:
        self._by_encoding: dict[str, TiktokenCounter] = {}

    def preload(self, encodings: tuple[str, ...] = ("o200k_base", "cl100k_base")) -> None:
        for name in encodings:
            if name not in self._by_encoding:
                self._by_encoding[name] = TiktokenCounter(name)

    def for_model(self, model: str) -> TiktokenCounter:
        name = encoding_name_for(model)
        counter = self._by_encoding.get(name)
        if counter is None:
            counter = self._by_encoding[name] = TiktokenCounter(name)
        return counter
