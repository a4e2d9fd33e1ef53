"""Per-call repairs for ``repair_tool_chain``: call shape, ``arguments``, and ids that the
upstream accepts (``rules.chain.call_ids``) and unique in the request. Ids are renamed on the
call here; the results that answer a call follow it in ``chain_repairs`` so both sides stay
consistent."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from rules.base import Messages
from rules.chain.call_ids import STRICTEST, CallIdRule
from rules.chain.validator import arguments_ok, call_shape_ok
from rules.messages import call_name, custom_call, id_text, role
from rules.report import Repair


@dataclass
class Slot:
    """One tool call of one assistant message, and what becomes of it."""

    index: int  # message index in the input
    pos: int  # position in that message's tool_calls
    raw_id: str | None
    new_id: str
    call: dict[str, Any]  # the call as it will be forwarded (the input dict when unchanged)
    answers: list[int] = field(default_factory=list)  # tool message indices, first = primary
    drop: bool = False  # left out of a runaway turn

    @property
    def name(self) -> str:
        return call_name(self.call)


def _fixed_arguments(fn: dict[str, Any]) -> tuple[str, str]:
    """(arguments as a JSON object string, what was done)."""
    args = fn.get("arguments")
    # JSON's null as text is no arguments too (an Anthropic tool_use's ``"input": null``)
    if args is None or (isinstance(args, str) and args.strip() in ("", "null")):
        return "{}", "empty_arguments_to_empty_object"
    if isinstance(args, dict):
        return orjson.dumps(args).decode(), "serialised_arguments_object"
    raw = args if isinstance(args, str) else orjson.dumps(args).decode()
    # Truncated or non-object JSON: a valid object that keeps the raw text for the model to read.
    return orjson.dumps({"raw_arguments": raw}).decode(), "wrapped_raw_arguments"


def fix_call(call: dict[str, Any], index: int, repairs: list[Repair]) -> dict[str, Any]:
    """The call with a valid shape and JSON-object arguments (the same dict when already fine)."""
    cid = id_text(call.get("id"))
    shape_ok = call_shape_ok(call)
    args_ok = arguments_ok(call)
    if shape_ok and args_ok:
        return call
    new = dict(call)
    custom = custom_call(call)
    if shape_ok and custom is not None:  # a custom tool's input that is no string
        raw = custom.get("input")
        text = "" if raw is None else raw if isinstance(raw, str) else orjson.dumps(raw).decode()
        new["custom"] = {**custom, "input": text}
        repairs.append(
            {"kind": "invalid_arguments", "index": index, "tool_call_id": cid,
             "action": "input_to_string"}
        )  # fmt: skip
        return new
    fn = dict(call["function"]) if isinstance(call.get("function"), dict) else {}
    if not shape_ok:
        new["type"] = "function"
        if not isinstance(fn.get("name"), str) or not fn["name"]:
            fn["name"] = "unknown_tool"
        repairs.append(
            {
                "kind": "invalid_call",
                "index": index,
                "tool_call_id": cid,
                "action": "filled_type_and_name",
            }
        )
    if not args_ok:
        fn["arguments"], action = _fixed_arguments(fn)
        repairs.append(
            {"kind": "invalid_arguments", "index": index, "tool_call_id": cid, "action": action}
        )
    new["function"] = fn
    return new


def collect_slots(
    messages: Messages, repairs: list[Repair], rule: CallIdRule = STRICTEST
) -> dict[int, list[Slot]]:
    """Every call of every assistant message, with fixed shape and a new id ``rule`` accepts,
    unique in the request.

    The first use of a valid id keeps it (earlier messages stay byte-identical, which keeps the
    provider's prompt cache); later uses and invalid ids get a derived, unused id.
    """
    reserved: set[str] = set()
    raw_calls: list[tuple[int, int, Any]] = []
    for i, m in enumerate(messages):
        if role(m) != "assistant" or not isinstance(m.get("tool_calls"), list):
            continue
        for pos, call in enumerate(m["tool_calls"]):
            raw_calls.append((i, pos, call))
            given = id_text(call.get("id")) if isinstance(call, dict) else None
            if given is not None and rule.accepts(given):
                reserved.add(given)
    used: set[str] = set()
    suffixes: dict[str, int] = {}
    slots: dict[int, list[Slot]] = {}
    for i, pos, call in raw_calls:
        if not isinstance(call, dict):
            repairs.append(
                {
                    "kind": "invalid_call",
                    "index": i,
                    "tool_call_id": None,
                    "action": "dropped_non_object_call",
                }
            )
            continue
        raw = id_text(call.get("id"))
        valid = raw is not None and rule.accepts(raw)
        new_id = raw if raw is not None and valid else rule.fit(raw or "")
        if new_id in used or (new_id != raw and new_id in reserved):
            base = new_id
            k = suffixes.get(base, 2)  # remembered, so an id reused n times costs O(n), not O(n²)
            while (numbered := rule.numbered(base, k)) in used or numbered in reserved:
                k += 1
            new_id = numbered
            suffixes[base] = k + 1
        used.add(new_id)
        if new_id != raw:
            kind = "duplicate_call_id" if valid else "invalid_call_id"
            action = "renamed" if kind == "duplicate_call_id" else "sanitised"
            repairs.append(
                {"kind": kind, "index": i, "tool_call_id": raw, "action": action, "new_id": new_id}
            )
        elif call.get("id") != raw:  # a number: its digits, as its results' ids become
            repairs.append(
                {"kind": "invalid_call_id", "index": i, "tool_call_id": raw,
                 "action": "number_to_string", "new_id": new_id}
            )  # fmt: skip
        fixed = fix_call(call, i, repairs)
        if fixed.get("id") != new_id:
            fixed = {**fixed, "id": new_id}
        slots.setdefault(i, []).append(Slot(i, pos, raw, new_id, fixed))
    return slots
