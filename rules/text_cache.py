"""A memo for pure functions of texts, bounded by what it holds, not by entries:
``functools.lru_cache(maxsize=4096)`` keyed by whole tool outputs could pin gigabytes (4,096
outputs of 200 kB are 800 MB). Thread-safe (a large request's pipeline runs in a worker thread);
a text over ``max_text_chars`` is computed every time and never held. ``max_entries`` bounds the
entries too: a table that keeps growing is copied whole at each doubling (an OrderedDict of 1,365
entries takes 40-180 µs to grow, on whichever call inserts next); one kept small never is.

An entry is charged its texts' characters, what its value holds (``charge``) and ``ENTRY_CHARS``
for the entry itself (its key, its table slots): charged the texts alone, a million short texts
held 16-44 bytes a character charged, and one tenant's request of distinct short names took the
process past a gigabyte. Charged so, a unit is at most a few bytes (docs/architecture.md)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from functools import wraps
from typing import Any, Protocol, TypeVar, cast

from rules.memo_scope import memo_scope

ENTRY_CHARS = 200  # an entry's own cost: its key tuple, its slots in the two tables
_OBJECT_CHARS = 56  # a container's or an object's own cost in a value
_DEPTH = 4  # a value is charged this deep; below, each object at ``_OBJECT_CHARS``

R = TypeVar("R")


def charge(value: Any, depth: int = _DEPTH) -> int:
    """What ``value`` holds, in characters, a character about a byte: a string's length and its
    own cost, a container's items (and a slot each) and its own cost, an object's fields
    (``__dict__`` or ``__slots__``); a small number or None nothing (shared)."""
    if value is None or isinstance(value, (bool, int, float)):
        return 0
    if isinstance(value, (str, bytes)):  # one character or none: the interpreter's own, shared
        return _OBJECT_CHARS + len(value) if len(value) > 1 else 0
    if depth <= 0:
        return _OBJECT_CHARS
    depth -= 1
    if isinstance(value, dict):
        items = value.items()
        return _OBJECT_CHARS + sum(24 + charge(k, depth) + charge(v, depth) for k, v in items)
    if isinstance(value, (list, tuple, set, frozenset)):
        return _OBJECT_CHARS + sum(8 + charge(v, depth) for v in value) if value else 0
    fields = getattr(value, "__dict__", None)  # its names are its class's, shared
    if fields is not None:
        return 2 * _OBJECT_CHARS + sum(24 + charge(v, depth) for v in fields.values())
    slots = getattr(type(value), "__slots__", ())
    return _OBJECT_CHARS + sum(8 + charge(getattr(value, n, None), depth) for n in slots)


R_co = TypeVar("R_co", covariant=True)


class TextCached(Protocol[R_co]):
    """A function wrapped by ``text_cache``: called with the same positional arguments."""

    cache_chars: Callable[[], int]  # the characters its entries hold now
    cache_clear: Callable[[], None]  # drops every entry

    def __call__(self, *args: Any) -> R_co: ...


def text_cache(
    max_chars: int, max_text_chars: int = 1_000_000, max_entries: int = 1 << 20
) -> Callable[[Callable[..., R]], TextCached[R]]:
    """Cache ``f(*args)`` by its arguments, within the current principal's entries
    (``rules.memo_scope``); an entry is charged the length of its string arguments, its value's
    ``charge`` and ``ENTRY_CHARS``. Least recently used entries go first once ``max_chars`` are
    held, or ``max_entries`` entries."""

    def decorate(f: Callable[..., R]) -> TextCached[R]:
        entries: OrderedDict[tuple[str, tuple[Any, ...]], R] = OrderedDict()
        sizes: dict[tuple[str, tuple[Any, ...]], int] = {}
        held = 0
        lock = threading.Lock()

        @wraps(f)
        def cached(*args: Any) -> R:
            nonlocal held
            key = (memo_scope(), args)
            hit = entries.get(key)
            if hit is not None:
                # one C call, atomic: no lock (a hit is most calls, once per tool call of every
                # request); evicted by another thread meanwhile is fine
                try:  # noqa: SIM105 (contextlib.suppress costs more than the rest of a hit)
                    entries.move_to_end(key)
                except KeyError:
                    pass
                return hit
            value = f(*args)
            texts = sum(len(a) for a in args if isinstance(a, str))
            if texts > max_text_chars:
                return value
            size = texts + ENTRY_CHARS + charge(value)
            if size > max_chars:  # held, it would push every other entry out, then itself
                return value
            with lock:
                if key not in entries:
                    entries[key] = value
                    sizes[key] = size
                    held += size
                    while (held > max_chars or len(entries) > max_entries) and entries:
                        old, _ = entries.popitem(last=False)
                        held -= sizes.pop(old)
            return value

        def clear() -> None:
            nonlocal held
            with lock:
                entries.clear()
                sizes.clear()
                held = 0

        wrapper = cast("TextCached[R]", cached)  # a function with the attributes set below
        wrapper.cache_chars = lambda: held
        wrapper.cache_clear = clear
        return wrapper

    return decorate
