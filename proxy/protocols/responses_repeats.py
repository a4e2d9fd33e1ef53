"""A Responses turn sent twice: a client's retry that appends its items again repeats their
``id``s, and Responses refuses an input with an item id said twice (400, on every retry).

An item that repeats an earlier item whole, id and all, adds nothing: it goes (a reasoning item,
a message, a call of any kind with its output). A call repeated whole whose output differs (the
tool ran again) stays, for the chain repair to tell the two apart by renaming the copy's call id
(``responses_lift``). A message or a function call that repeats an id with other content loses
the copy's id (it is optional on input); a kind that requires one gets its own, after its call
id. A ``local_shell_call_output``'s ``id`` names its call, not itself."""

from __future__ import annotations

from typing import Any

from proxy.protocols.responses_parts import kind, output_call_id

# the kinds whose ``id`` is optional on input: a copy said again with other content loses it
_OPTIONAL_ID = frozenset({"message", "function_call", "function_call_output", "custom_tool_call",
                          "custom_tool_call_output"})  # fmt: skip


def _own_id(item: Any) -> str | None:
    if not isinstance(item, dict) or kind(item) == "local_shell_call_output":
        return None  # its id names its call
    iid = item.get("id")
    return iid if isinstance(iid, str) else None


def drop_repeated(items: list[Any], start: int) -> tuple[list[Any], list[dict[str, Any]]]:
    """``items`` without the copies of earlier items (a new list, or ``items`` itself when none
    is repeated), and the repairs made. ``start``: the items before it were forwarded before
    and held no repeat; only an id from ``start`` on can repeat one."""
    fresh = [iid for i in range(start, len(items)) if (iid := _own_id(items[i])) is not None]
    if not fresh:
        return items, []
    ids = [x.get("id") if x.__class__ is dict else None for x in items]  # one pass, no call
    if len(set(fresh)) == len(fresh) and set(ids[:start]).isdisjoint(fresh):
        return items, []  # the common case: new ids, each said once
    first: dict[str, int] = {}
    repeated: list[int] = []
    for i, iid in enumerate(ids):
        if iid.__class__ is not str or _own_id(items[i]) is None:
            continue
        if iid in first:
            repeated.append(i)
        else:
            first[iid] = i
    if not repeated:
        return items, []
    outputs = _first_outputs(items)
    drop: set[int] = set()
    renamed: dict[int, dict[str, Any]] = {}
    repairs: list[dict[str, Any]] = []
    for i in repeated:
        item, earlier = items[i], items[first[_own_id(items[i]) or ""]]
        cid = item.get("call_id")
        if item == earlier:
            if isinstance(cid, str) and not _output_repeats(items, outputs, cid, i):
                continue  # the tool ran again: the chain repair renames the copy
            drop.add(i)
            if isinstance(cid, str):
                drop.update(j for j in outputs.get(cid, ())[1:] if j > i)
            repairs.append({"kind": "repeated_item", "index": i, "tool_call_id": cid,
                            "action": "dropped_copy"})  # fmt: skip
        elif kind(item).endswith("_output") and cid == earlier.get("call_id"):
            continue  # a second output of one call: the chain repair keeps it as text
        elif kind(item) in _OPTIONAL_ID:
            renamed[i] = {k: v for k, v in item.items() if k != "id"}
            repairs.append({"kind": "repeated_item", "index": i, "tool_call_id": cid,
                            "action": "dropped_repeated_id"})  # fmt: skip
        elif isinstance(cid, str) and f"{item['id']}_{cid}" not in first:
            # an id the kind requires: one of its own, named after its call
            renamed[i] = {**item, "id": f"{item['id']}_{cid}"}
            repairs.append({"kind": "repeated_item", "index": i, "tool_call_id": cid,
                            "action": "renamed_repeated_id"})  # fmt: skip
    if not drop and not renamed:
        return items, []
    out = [renamed.get(i, item) for i, item in enumerate(items) if i not in drop]
    return out, repairs


def _first_outputs(items: list[Any]) -> dict[str, list[int]]:
    """The indexes of each call id's output items, in order."""
    found: dict[str, list[int]] = {}
    for i, item in enumerate(items):
        if isinstance(item, dict) and kind(item).endswith("_output"):
            cid = output_call_id(item)
            if isinstance(cid, str):
                found.setdefault(cid, []).append(i)
    return found


def _output_repeats(items: list[Any], outputs: dict[str, list[int]], cid: str, at: int) -> bool:
    """Whether the copy at ``at`` of a call ``cid`` has no output of its own, or one that
    repeats the first's whole."""
    mine = [j for j in outputs.get(cid, ()) if j > at]
    if not mine:
        return True
    earlier = [j for j in outputs.get(cid, ()) if j < at]
    return bool(earlier) and items[mine[0]] == items[earlier[0]]
