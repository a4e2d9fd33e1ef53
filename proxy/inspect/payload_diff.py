"""The client's conversation against the forwarded one, from the captured payloads: each side
read as a list of entries in its protocol's own terms (``payload_entries``), the lists aligned
entry by entry and each changed entry shown as a capped unified diff; a page shows at most
``MAX_HUNKS`` entries and ``MAX_PAGE_LINES`` lines."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from proxy.inspect.line_diff import Budget, diff_lines
from proxy.inspect.payload_align import aligned
from proxy.inspect.payload_entries import Entry, clip, entries
from proxy.inspect.payload_entries import message_lines as message_lines  # report_view's

MAX_DIFF_LINES = 60  # per changed entry: a pruned 5,000-line log must not flood the view
MAX_HUNKS = 400  # entries a page shows (its unchanged runs among them)
MAX_PAGE_LINES = 8_000  # diff lines a page shows, all its entries together


def diff(row: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The client's entries against the forwarded ones, aligned entry by entry; None when the
    payloads were not captured (or cannot be read). Each item: ``op`` (same, changed, removed,
    added), ``title`` (the line a person reads), ``client`` / ``forwarded`` (body indices: a
    [first, last] pair for a same run), ``role`` and ``lines`` (the diff's lines)."""
    client, forwarded = entries(row, "request_body"), entries(row, "forwarded_body")
    if client is None or forwarded is None:
        return None
    page, budget = _Page(), Budget()
    for op, a1, a2, b1, b2 in aligned([e.key for e in client], [e.key for e in forwarded]):
        if op == "equal":
            page.add(partial(_same, client[a1:a2], forwarded[b1:b2]), changed=False)
            continue
        # Inside a changed run, pair entries in the same slot (role and call id), so an inserted
        # synthetic result is "added" rather than a rewrite of the next user turn.
        inner = aligned([e.slot for e in client[a1:a2]], [e.slot for e in forwarded[b1:b2]])
        for op2, i1, i2, j1, j2 in inner:
            if op2 == "equal":
                pairs = zip(client[a1 + i1 : a1 + i2], forwarded[b1 + j1 : b1 + j2], strict=True)
                for a, b in pairs:
                    page.add(partial(_changed, a, b, budget))
                continue
            for e in client[a1 + i1 : a1 + i2]:
                page.add(partial(_one, "removed", e))
            for e in forwarded[b1 + j1 : b1 + j2]:
                page.add(partial(_one, "added", e))
    return page.done()


class _Page:
    """The hunks a page shows: ``MAX_HUNKS`` and ``MAX_PAGE_LINES`` at most; past them a changed
    entry is counted, not diffed (a body of 19,000 repaired messages made a 40 MB page that held
    the event loop 4 s), and one line says how many."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.lines = self.more = 0

    def add(self, make: Callable[[], dict[str, Any]], changed: bool = True) -> None:
        if len(self.items) < MAX_HUNKS:
            item = make()
            size = len(item.get("lines") or ())
            if self.lines + size <= MAX_PAGE_LINES:
                self.items.append(item)
                self.lines += size
                return
        self.more += changed

    def done(self) -> list[dict[str, Any]]:
        if self.more:
            self.items.append(
                {"op": "same", "title": f"… {self.more} more changed entries, not shown"}
            )
        return self.items


def _span(run: list[Entry]) -> str:
    """What a run of unchanged entries is called: ``messages 0..4``, ``system, messages 0..2``."""
    parts = [e.label for e in run if e.index is None]
    numbered = [e for e in run if e.index is not None]
    if numbered:
        parts.append(f"{numbered[0].noun}s {numbered[0].index}..{numbered[-1].index}")
    return ", ".join(parts)


def _same(client: list[Entry], forwarded: list[Entry]) -> dict[str, Any]:
    def bounds(run: list[Entry]) -> list[int | None]:
        numbered = [e.index for e in run if e.index is not None]
        return [numbered[0], numbered[-1]] if numbered else [None, None]

    return {
        "op": "same",
        "client": bounds(client),
        "forwarded": bounds(forwarded),
        "title": f"= {_span(client)} unchanged",
    }


def _one(op: str, e: Entry) -> dict[str, Any]:
    if op == "removed":
        sign, side, what = "-", "client", "not forwarded"
    else:
        sign, side, what = "+", "forwarded", "added by the proxy"
    return {
        "op": op,
        side: e.index,
        "role": e.role,
        "title": f"{sign} {e.label} {what} ({e.role})",
        "lines": _cap([f"{sign} " + x for x in e.lines]),
    }


def _changed(a: Entry, b: Entry, budget: Budget) -> dict[str, Any]:
    lines, total = diff_lines(a.lines, b.lines, budget, MAX_DIFF_LINES)
    if not lines:  # the same text, other fields (e.g. a re-serialised id): show the fields
        lines = [f"- {clip(a.key)}", f"+ {clip(b.key)}"]
    if a.noun and a.noun == b.noun:
        where = f"{a.label} → {b.index}"
    else:
        where = a.label if a.label == b.label else f"{a.label} → {b.label}"
    return {
        "op": "changed",
        "client": a.index,
        "forwarded": b.index,
        "role": b.role,
        "title": f"~ {where} ({b.role})",
        "lines": _cap(lines, total),
    }


def _cap(lines: list[str], total: int | None = None) -> list[str]:
    """The first ``MAX_DIFF_LINES`` of ``lines`` (of ``total``, when only those were made)."""
    total = len(lines) if total is None else total
    if total <= MAX_DIFF_LINES:
        return lines
    return [*lines[:MAX_DIFF_LINES], f"… {total - MAX_DIFF_LINES} more lines"]
