"""A memo for pure functions of texts, bounded by the characters it holds, not by entries:
``functools.lru_cache(maxsize=4096)`` keyed by whole tool outputs could pin gigabytes (4,096
outputs of 200 kB are 800 MB). Thread-safe (a large request's pipeline runs in a worker thread);
a text over ``max_text_chars`` is computed every time and never held. ``max_entries`` bounds the
entries too: a table that keeps growing is copied whole at each doubling (an OrderedDict of 1,365
entries takes 40-180 µs to grow, on whichever call inserts next); one kept small never is."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from functools import wraps
from typing import Any, Protocol, TypeVar, cast

from rules.memo_scope import memo_scope

R = TypeVar("R")
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
    (``rules.memo_scope``); the size of an entry is the length of its string arguments. Least
    recently used entries go first once ``max_chars`` are held, or ``max_entries`` entries."""

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
            size = sum(len(a) for a in args if isinstance(a, str)) + 1
            if size > max_text_chars:
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
