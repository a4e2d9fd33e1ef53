"""A rewritten body's bytes, spliced from the client's. The rules change a message or two of an
agent's ~400 (the last user message, a pruned result): writing the whole body again
(``orjson.dumps``, ~0.3 ms for 0.5 MB) costs more than the change. What the rewrite holds of the
client's own objects is copied from the client's bytes instead, in runs, and only the rest is
written.

Exact: ``written`` returns ``orjson.dumps(forwarded)``, byte for byte. The body memory proved
each kept item's bytes, the members before the array and those after it to be what
``orjson.dumps`` writes for those very objects (``body_memory``), and nothing changes a parsed
body. A member the rewrite replaced is written again, as is every object not the client's."""

from __future__ import annotations

from typing import Any

import orjson

from proxy.protocols.body_memory import Kept


def written(forwarded: dict[str, Any], body: dict[str, Any], kept: Kept | None, key: str) -> bytes:
    """``orjson.dumps(forwarded)``, where ``forwarded`` is a rewrite of ``body``, read from
    ``kept`` (None: written whole)."""
    items = forwarded.get(key)
    names = list(forwarded)
    if kept is None or type(items) is not list or names != list(body) or key not in names:
        return orjson.dumps(forwarded)
    at = names.index(key)
    view = memoryview(kept.raw)
    head = names[:at]
    pieces: list[Any] = []
    if all(forwarded[n] is body[n] for n in head):
        pieces.append(view[: kept.start])
    else:
        members = {n: forwarded[n] for n in head}
        pieces += (orjson.dumps(members)[:-1], b"," if head else b"", orjson.dumps(key), b":[")
    _items(pieces, items, kept, view)
    rest = names[at + 1 :]
    if kept.close >= 0 and all(forwarded[n] is body[n] for n in rest):
        pieces.append(view[kept.close :])
    else:
        members = {n: forwarded[n] for n in rest}
        pieces.append(b"]," + orjson.dumps(members)[1:] if rest else b"]}")
    return b"".join(pieces)


def _items(pieces: list[Any], items: list[Any], kept: Kept, view: memoryview) -> None:
    """The array's items onto ``pieces``: runs of the client's own (proven) items as one slice
    of its bytes each (the ``,`` between them included), the others written."""
    ends, own = kept.ends, kept.items
    proven = len(ends)
    where: dict[int, int] | None = None  # made when an item is not the one after the last
    start = end = -1  # the current run of the client's items, as offsets in its bytes
    last = -2
    for n, x in enumerate(items):
        i = last + 1
        if not (0 <= i < proven and own[i] is x):
            if where is None:
                where = {id(y): j for j, y in enumerate(own[:proven])}
            i = where.get(id(x), -1)  # (``own`` holds its items: no other object has their ids)
            if i < 0:  # not the client's (or not proven): written
                _flush(pieces, view, start, end)
                start = end = -1
                last = -2
                pieces.append(b"," + orjson.dumps(x) if n else orjson.dumps(x))
                continue
        if i == last + 1 and end >= 0:  # the next client item: the run goes on
            end = ends[i]
        else:
            _flush(pieces, view, start, end)
            if n:
                pieces.append(b",")
            start, end = (ends[i - 1] + 1 if i else kept.start), ends[i]
        last = i
    _flush(pieces, view, start, end)


def _flush(pieces: list[Any], view: memoryview, start: int, end: int) -> None:
    if end >= 0:
        pieces.append(view[start:end])
