"""A captured event stream's secrets that no one event holds: a model streams its text in
pieces, so a key it writes (``sk-proj-…``) may come in three ``data:`` events, each harmless
alone. Redacting the stream's text finds the secrets inside one event; this finds the ones
across two or more, and replaces the pieces that hold them.

Method: the strings at each place (path) in the events' JSON, in order, joined: a text's
deltas, a tool call's arguments. At each boundary between two pieces within ``WINDOW`` of a
secret the joined text holds, the text around it (``WINDOW`` characters each side, then the
narrowest reach that shows the secret) is redacted, whole and as its two sides; where the two
differ, what the whole's redaction replaces there marks the part of each piece it covers (a
value cut in two, or the value after a cut name: ``pass`` then ``word=hunter2``)."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator
from itertools import accumulate
from typing import Any

import orjson

from rules.redact import REDACTED, redact_text

WINDOW = 256  # longer than any key shape the redactor knows, and than a name and its value


def _strings(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], str]]:
    """Each string in a JSON value, with its path, in document order."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _strings(v, (*path, i))


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _common_suffix(a: str, b: str, most: int) -> int:
    i = 0
    while i < most and a[-1 - i] == b[-1 - i]:
        i += 1
    return i


_REACHES = (32, 64, 128, WINDOW)


def _split_change(joined: str, boundary: int, reach: int) -> list[tuple[int, int]]:
    """What redaction replaces in the text ``reach`` characters around ``boundary`` (ranges in
    ``joined``) when the two sides alone do not show all of it (a value cut in two, or a name:
    ``pass`` then ``word=hunter2``); else nothing."""
    lo, hi = max(0, boundary - reach), min(len(joined), boundary + reach)
    window = joined[lo:hi]
    out = redact_text(window)
    if out == window or out == redact_text(joined[lo:boundary]) + redact_text(joined[boundary:hi]):
        return []  # no secret, or none the two sides do not hold alone
    return [(lo + first, lo + last) for first, last in _replaced_ranges(window, out)]


def _replaced_ranges(text: str, out: str) -> list[tuple[int, int]]:
    """The ranges of ``text`` that redaction replaced in ``out``: the parts of ``out`` between
    its markers are found in ``text`` in order. Where they cannot be (``text`` held a marker
    already), one range from the first character that differs to the last."""
    parts = out.split(REDACTED)
    ranges: list[tuple[int, int]] = []
    pos = len(parts[0])
    aligned = text.startswith(parts[0]) and REDACTED not in text
    for part in parts[1:-1]:
        if not aligned or not part:
            continue  # two markers side by side: one range
        at = text.find(part, pos + 1)
        if at < 0:
            aligned = False
            break
        ranges.append((pos, at))
        pos = at + len(part)
    end = len(text) - len(parts[-1])
    if aligned and end > pos and text.endswith(parts[-1]):
        return [*ranges, (pos, end)]
    head = _common_prefix(text, out)
    return [(head, len(text) - _common_suffix(text, out, min(len(text), len(out)) - head))]


def split_pieces(pieces: list[str]) -> dict[int, tuple[int, int]]:
    """The pieces that hold part of a secret only their joined text shows: for each, the part
    (start, end in the piece) to replace."""
    joined = "".join(pieces)
    if len(pieces) < 2:
        return {}
    out = redact_text(joined)
    if out == joined:
        return {}
    starts = [0, *accumulate(len(p) for p in pieces)]
    boundaries = sorted(set(starts[1:-1]))  # an empty piece's two boundaries are one
    near: set[int] = set()  # the boundaries a secret of the joined text is within reach of
    for first, last in _replaced_ranges(joined, out):
        at = bisect_right(boundaries, first - WINDOW)
        while at < len(boundaries) and boundaries[at] < last + WINDOW:
            near.add(boundaries[at])
            at += 1
    marked: dict[int, tuple[int, int]] = {}
    for boundary in sorted(near):
        if not _split_change(joined, boundary, WINDOW):
            continue
        for reach in _REACHES:  # the narrowest window that shows it: its changes only
            if changes := _split_change(joined, boundary, reach):
                break
        for first, last in changes:
            i = bisect_right(starts, first) - 1
            while i < len(pieces) and starts[i] < last:
                cut = (max(first, starts[i]) - starts[i], min(last, starts[i + 1]) - starts[i])
                if i in marked:
                    cut = (min(cut[0], marked[i][0]), max(cut[1], marked[i][1]))
                if cut[0] < cut[1]:  # an empty piece holds nothing
                    marked[i] = cut
                i += 1
    return marked


def _replaced(value: Any, path: tuple[Any, ...], cut: tuple[int, int]) -> Any:
    """``value`` with the string at ``path`` cut (``cut``: the part that becomes REDACTED), a
    copy along the path."""
    if not path:
        return value[: cut[0]] + REDACTED + value[cut[1] :]
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replaced(value[head], rest, cut)}
    copy = list(value)
    copy[head] = _replaced(copy[head], rest, cut)
    return copy


def redact_split_secrets(text: str) -> str:
    """``text`` (an event stream) with the pieces of its split secrets replaced by REDACTED;
    anything else is returned as it is."""
    if "data:" not in text:
        return text
    lines = text.split("\n")
    events: dict[int, Any] = {}
    fields: dict[tuple[Any, ...], list[tuple[int, str]]] = {}  # a field's pieces, in order
    for n, line in enumerate(lines):
        if not line.startswith("data:"):
            continue
        try:
            event = orjson.loads(line[5:])
        except orjson.JSONDecodeError:
            continue  # [DONE], or a line cut short
        events[n] = event
        for path, piece in _strings(event):
            fields.setdefault(path, []).append((n, piece))
    changed: set[int] = set()
    for path, pieces in fields.items():
        for i, cut in split_pieces([piece for _, piece in pieces]).items():
            n = pieces[i][0]
            events[n] = _replaced(events[n], path, cut)
            changed.add(n)
    if not changed:
        return text
    for n in changed:
        ending = "\r" if lines[n].endswith("\r") else ""
        lines[n] = "data: " + orjson.dumps(events[n]).decode() + ending
    return "\n".join(lines)
