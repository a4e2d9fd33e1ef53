"""Lifting the Responses adapter's chat view back onto the client's items (``responses``): the
items of a message the rules wrote, and a changed message patched onto its own items; and the
mending of a reasoning item cut from the item it led to, before lowering."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from itertools import islice
from typing import Any

import orjson

from proxy.protocols.base import TAG
from proxy.protocols.media_blocks import absorbed_blocks, media_elided
from proxy.protocols.patching import (
    appended,
    matched_by_id,
    patch_joined,
    patch_parts,
    patch_texts,
)
from proxy.protocols.responses_parts import (
    CALLS,
    OWN_ROLES,
    Part,
    State,
    call_of,
    is_text,
    kind,
    message_text,
    output_call_id,
    part_maker,
)
from rules.base import Message
from rules.messages import ABSORBED, role, text_of, tool_calls


def mend(items: list[Any], start: int = 0) -> tuple[list[Any], list[dict[str, Any]]]:
    """A reasoning item must be followed by the item it led to; one followed by a user message,
    a tool output or nothing at all was cut from it (Responses refuses it): it goes. Walked from
    the end, so a reasoning item left last by dropping the one after it goes too. ``start``: the
    items before it are known to need nothing (a request that needed nothing had them, each
    followed by the same item), so only the rest is walked unless something goes."""
    drop = _orphans(items, start)
    if drop and start:
        drop = _orphans(items, 0)
    if not drop:
        return items, []
    drop.reverse()
    gone = set(drop)
    repairs = [{"kind": "reasoning_orphaned", "index": i, "tool_call_id": None,
                "action": "dropped_reasoning_item"} for i in drop]  # fmt: skip
    return [it for i, it in enumerate(items) if i not in gone], repairs


def _orphans(items: list[Any], start: int) -> list[int]:
    """The reasoning items to drop among ``items[start:]``, last first."""
    drop: list[int] = []
    nxt: Any = None  # the next item kept
    for i in range(len(items) - 1, start - 1, -1):
        item = items[i]
        if kind(item) == "reasoning":
            next_kind = kind(nxt)
            if (
                nxt is None
                or next_kind.endswith("_output")  # any tool's (a shell's, a patch's …)
                or (next_kind == "message" and nxt.get("role") in OWN_ROLES)
            ):
                drop.append(i)
                continue
        nxt = item
    return drop


# the output type of a function and of a custom call
_CALL_OUTPUTS = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
}
_OUTPUT_CALLS = {v: k for k, v in _CALL_OUTPUTS.items()}
LOOK_BACK = 64  # items ``typed`` looks back over for the call an output answers


def new_items(st: State, m: Message, before: Sequence[Any] = ()) -> list[Any]:
    """Items for a message the rules wrote; ``before``: the items forwarded ahead of it."""
    r = role(m)
    if r == "tool":
        cid = m.get("tool_call_id")
        # the output's type is its call's as forwarded: the repair may have renamed the call
        # (its client's id reused, or shared by a function and a custom call)
        call_kind = _forwarded_kind(before, cid)
        if call_kind is None and isinstance(cid, str):
            call_kind = st.call_kinds.get(cid)
        out_kind = _CALL_OUTPUTS.get(call_kind or "", "function_call_output")
        return [{"type": out_kind, "call_id": cid, "output": text_of(m.get("content"))}]
    if r == "assistant":
        out: list[Any] = []
        text = text_of(m.get("content"))
        if text.strip():
            out.append({"type": "message", "role": "assistant",
                        "content": [{"type": "output_text", "text": text}]})  # fmt: skip
        for c in tool_calls(m):
            fn = c.get("function") or {}
            out.append({"type": "function_call", "call_id": c.get("id"), "name": fn.get("name"),
                        "arguments": fn.get("arguments") or "{}"})  # fmt: skip
        return out
    text = text_of(m.get("content"))
    parts = [{"type": "input_text", "text": text}]
    if ABSORBED in m:  # orphan results kept as user text: their images after it
        parts.extend(absorbed_blocks(m, partial(_output_parts, st), is_text))
    return [{"type": "message", "role": r if r in OWN_ROLES else "user",
             "content": parts}]  # fmt: skip


def typed(item: Any, before: Sequence[Any]) -> Any:
    """``item`` as forwarded after ``before``: a function's or a custom call's output answering
    a call of the other kind (the client's result the repair moved to it: the id reused, or the
    result sent ahead of its call) takes that call's type, as the upstream pairs them by type.
    The call is looked for among the last ``LOOK_BACK`` items (the repair puts a result after its
    call's run): a bounded cost per output, whatever the body."""
    k = kind(item)
    if k not in _OUTPUT_CALLS:
        return item
    want = _CALL_OUTPUTS.get(_forwarded_kind(before, output_call_id(item), LOOK_BACK) or "")
    return item if want is None or want == k else {**item, "type": want}


def _forwarded_kind(before: Sequence[Any], cid: Any, limit: int | None = None) -> str | None:
    """The type of the nearest call item ``before`` holds with ``call_id`` ``cid`` (among its
    last ``limit`` items: None, all)."""
    for item in islice(reversed(before), limit):
        if isinstance(item, dict) and item.get("call_id") == cid and kind(item) in CALLS:
            return str(kind(item))
    return None


def patched_items(st: State, part: Part, m: Message, before: Sequence[Any] = ()) -> list[Any]:
    """Items for a message the rules changed; ``before``: the items forwarded ahead of it."""
    r = role(m)
    if r == "assistant":
        return _patched_assistant(st, part, m)
    item = st.items[part.items[0]]
    if r == "tool":
        old, new = part.lowered.get("content") or "", text_of(m.get("content"))
        output = item.get("output")
        if isinstance(output, list) and not media_elided(m, part.lowered):
            output = patch_texts(output, old, new, is_text, part_maker("user"))
        else:  # a text, or a result elided with its images
            output = new
        if ABSORBED in m:  # duplicates merged into it: their images after their text
            more = absorbed_blocks(m, partial(_output_parts, st), is_text)
            head = output if isinstance(output, list) else [part_maker("user")(output)]
            output = [*head, *more]
        patched = {**item, "output": output}
        cid = m.get("tool_call_id")
        if cid != output_call_id(item):
            named_by_id = "call_id" not in item and kind(item) == "local_shell_call_output"
            patched["id" if named_by_id else "call_id"] = cid
        return [typed(patched, before)]
    return [_patched_message(item, part.lowered.get("content"), m.get("content"))]


def _patched_message(item: dict[str, Any], old: Any, new: Any) -> dict[str, Any]:
    content = item.get("content")
    make = part_maker(str(item.get("role")))
    if not isinstance(content, list):
        return {**item, "content": text_of(new)}
    if isinstance(old, list) and isinstance(new, list):
        return {**item, "content": patch_parts(content, old, new, is_text, make)}
    if old is None:  # a replacement: the first text part takes it, the others go
        kept, placed = [], False
        for p in content:
            if not is_text(p):
                kept.append(p)
            elif not placed:
                placed = True
                kept.append({**p, "text": text_of(new)})
        return {**item, "content": kept if placed else [*kept, make(text_of(new))]}
    old_text = old if isinstance(old, str) else text_of(old)
    return {**item, "content": patch_joined(content, old_text, text_of(new), is_text, make)}


def _patched_assistant(st: State, part: Part, m: Message) -> list[Any]:
    calls = tool_calls(m)
    lowered_calls = tool_calls(part.lowered)
    call_items = [i for i in part.items if kind(st.items[i]) in CALLS]
    if len(calls) == len(lowered_calls):
        matched = dict(zip(call_items, calls, strict=True))
    else:
        # each kept call stands for one item (a runaway turn's calls may share one id)
        matched = dict(matched_by_id(((i, call_of(st.items[i])) for i in call_items), calls))
    old_text = text_of(part.lowered.get("content"))
    new_text = text_of(m.get("content"))
    added = appended(old_text, new_text)
    suffix = f"\n\n{added}" if added else None
    last_message = max((i for i in part.items if kind(st.items[i]) == "message"), default=-1)
    out: list[Any] = []
    waiting: list[int] = []  # reasoning, until the item it led to is kept or dropped
    led_to_dropped = False  # what ``waiting`` led to is gone: it goes if more reasoning comes
    text_done = placed = False
    for i in part.items:
        item = st.items[i]
        k = kind(item)
        if k == "reasoning":
            if led_to_dropped:  # the reasoning that led to a dropped call goes with it
                waiting.clear()
                led_to_dropped = False
            waiting.append(i)
            continue
        if k in CALLS:
            call = matched.get(i)
            if call is None:
                # gone (a runaway turn's call): its reasoning stays for the turn's next kept
                # call, which it led to as well (parallel calls follow one reasoning item, and
                # Responses refuses a call without the reasoning it came with)
                led_to_dropped = True
                continue
            patched = _patched_call(item, call)
            if patched.get("call_id") != item.get("call_id") and _repeats_an_id(st, i):
                # a turn sent twice whose tool ran again (``responses_repeats`` drops a whole
                # copy): the repair renamed the call; ids said twice are refused (400), so the
                # copy goes without its own and without the reasoning items that repeat the
                # first's
                own = patched.get("id")
                patched = {k: v for k, v in patched.items() if k != "id"}
                if k == "local_shell_call":  # its id is required: one of the copy's own
                    patched["id"] = f"{own}_{patched.get('call_id')}"
                waiting = [r for r in waiting if not _repeats_an_id(st, r)]
            item = patched
        elif k == "message" and new_text != old_text:
            if i == last_message and suffix is not None:
                item = _patched_message(item, message_text(item), f"{message_text(item)}{suffix}")
                placed = True
            elif suffix is None:
                if text_done:  # replaced: the first message holds the new text
                    waiting.clear()  # the reasoning that led to this one goes with it
                    led_to_dropped = False
                    continue
                text_done = placed = True
                item = _patched_message(item, None, new_text)
        out.extend(st.items[r] for r in waiting)
        waiting.clear()
        led_to_dropped = False
        out.append(item)
    if not led_to_dropped:
        out.extend(st.items[r] for r in waiting)
    if new_text != old_text and not placed and new_text.strip():
        # a turn of calls alone given text (a runaway turn's note): a message of its own, first,
        # as the chat view's text comes before its calls
        out.insert(0, new_items(st, {"role": "assistant", "content": new_text})[0])
    known = {id(c) for c in matched.values()}
    out.extend(new_items(st, {"role": "assistant", "content": None,
                              "tool_calls": [c for c in calls if id(c) not in known]}))  # fmt: skip
    return out


def _repeats_an_id(st: State, at: int) -> bool:
    """Whether the ``id`` of the item at ``at`` is an earlier item's (looked for only on a
    renamed call)."""
    item = st.items[at]
    own = item.get("id") if isinstance(item, dict) else None
    return own is not None and any(
        isinstance(x, dict) and x.get("id") == own for x in st.items[:at]
    )


def _patched_call(item: dict[str, Any], call: dict[str, Any]) -> dict[str, Any]:
    fn = call.get("function") or {}
    arguments = fn.get("arguments")
    lowered = call_of(item)
    out = item
    if call.get("id") != lowered["id"]:
        out = {**out, "call_id": call.get("id")}
    if kind(item) == "local_shell_call":  # its action is its arguments (shrunk, say); no name
        if isinstance(arguments, str) and arguments != lowered["function"]["arguments"]:
            action = _json_object(arguments)
            out = out if action is None else {**out, "action": action}
        return out
    name = fn.get("name")
    if isinstance(name, str) and name != lowered["function"].get("name"):
        out = {**out, "name": name}  # filled for a call without one
    if isinstance(arguments, str) and arguments != lowered["function"]["arguments"]:
        if kind(item) == "custom_tool_call":
            raw = item.get("input")
            value = _json_object(arguments)
            if not isinstance(raw, str):  # as a chat custom call's: JSON text, or empty
                out = {**out, "input": "" if raw is None else orjson.dumps(raw).decode()}
            elif value is not None and isinstance(value.get("input"), str):
                out = {**out, "input": value["input"]}
        else:
            out = {**out, "arguments": arguments}
    return out


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _output_parts(st: State, m: Message) -> Any:
    """The client's output parts of the tool output ``m`` was lowered from (None: not one)."""
    part = st.parts.get(m.get(TAG))  # type: ignore[arg-type]
    if part is None or not part.items:
        return None
    item = st.items[part.items[0]]
    return item.get("output") if isinstance(item, dict) else None
