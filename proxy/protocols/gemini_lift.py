"""Lifting the rules' chat view back onto the client's Gemini ``contents`` (``gemini``).

An assistant message becomes a ``model`` content; a run of user and tool messages between two
assistant messages becomes ``user`` content. Untouched messages give back the client's own
content objects (two ``user`` contents in a row stay two: Gemini accepts them, and merging them
would rewrite the request for nothing). Where the rules changed a run, its messages become one
``user`` content whose ``functionResponse`` parts come first, in the order of the calls of the
``model`` turn before it (Gemini pairs the N calls of a turn with the next turn's N responses),
the other parts after them. A changed model turn keeps its ``thought`` parts, its
``thoughtSignature`` fields and its unknown parts where they were; calls the rules dropped go
(with the signature on their part). Where lifting leaves two contents of one role next to each
other and one of them is not the client's own, they are merged: roles alternate again."""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from functools import partial
from typing import Any

import orjson

from proxy.protocols import exact_json
from proxy.protocols.base import TAG
from proxy.protocols.gemini_media import response_parts
from proxy.protocols.gemini_parts import (
    SYNTHETIC_PREFIX,
    Part,
    State,
    call_key,
    call_of,
    is_text,
    make_text,
    parts_of,
    response_key,
    response_of,
    response_value,
)
from proxy.protocols.media_blocks import absorbed_blocks, media_elided
from proxy.protocols.patching import matched_by_id, patch_joined, patch_parts
from proxy.protocols.prefix import same_objects
from rules.base import Message
from rules.messages import ABSORBED, call_id, call_name, role, text_of, tool_calls

EMPTY_USER_TURN = "(empty)"  # what a user content sent without parts says (as Anthropic's mend)

# A content as lifted, and whether it is the client's own object (untouched)
Lifted = tuple[Any, bool]


@dataclass(frozen=True)
class Lifting:
    """A request's lifting, by group (a system message, a model turn, a run of user-side
    messages): where each group's messages end, and its contents. Never changed once kept."""

    messages: list[Message]
    ends: list[int]
    values: list[list[Lifted]]
    system: Message | None
    contents: list[Any]  # the contents forwarded (``_alternating`` of the values)
    marks: list[Mark]  # after each group: see ``Mark``


# After a group of ``_alternating``: how many contents were out, the last of them as it was
# then (a later group may merge into it), and whether that one was the client's own
Mark = tuple[int, Any, bool]


def lift_contents(st: State, messages: list[Message]) -> tuple[list[Any], Message | None]:
    """The contents to forward and the system message as the rules left it (None: none).

    The groups the session's previous request lifted from the very same message objects are
    reused (``st.lifted``): a message object is the same only where its client content is (the
    lowering reuses its messages for identical contents only), and a group ending before the
    first message that differs is made of the same messages and ends there again."""
    prev: Lifting | None = st.lifted
    n = len(messages)
    ends: list[int] = []
    values: list[list[Lifted]] = []
    system: Message | None = None
    k = reused = 0
    if prev is not None:
        same = same_objects(prev.messages, messages)
        reused = bisect.bisect_left(prev.ends, same)  # the groups ending before ``same``
        ends, values = prev.ends[:reused], prev.values[:reused]  # sliced in C, not group by group
        k = ends[-1] if ends else 0
        if k and prev.system is not None and prev.system is messages[0]:
            system = prev.system
    while k < n:
        m = messages[k]
        if m.get(TAG) == "s" and "s" in st.parts:
            system = m
            group: list[Lifted] = []
            k += 1
        elif role(m) == "assistant":
            group = _model_content(st, m)
            k += 1
        else:
            end = k + 1
            while end < n and role(messages[end]) != "assistant" and messages[end].get(TAG) != "s":
                end += 1
            before = messages[k - 1] if k and role(messages[k - 1]) == "assistant" else None
            group = _user_contents(st, messages[k:end], before)
            k = end
        ends.append(k)
        values.append(group)
    contents, marks = _alternating(values, reused, prev)
    st.lifting = Lifting(messages, ends, values, system, contents, marks)
    return contents, system


def _source(st: State, m: Message) -> Part | None:
    tag = m.get(TAG)
    return st.parts.get(tag) if isinstance(tag, str) else None


def _user_contents(st: State, run: list[Message], before: Message | None) -> list[Lifted]:
    """A run of user-side messages (``before``: the model turn just before, whose calls they
    answer) as user contents: the client's own when untouched, else one content."""
    calls = tool_calls(before) if before is not None else []
    names = {call_id(c): call_name(c) for c in calls}
    whole = _untouched(st, run) if _named_as_called(run, names) else None
    if whole is not None:
        return [(c, True) for c in whole]
    results = [m for m in run if role(m) == "tool"]
    order = {call_id(c): i for i, c in enumerate(calls)}
    results.sort(key=lambda m: order.get(str(m.get("tool_call_id")), len(order)))
    parts: list[Any] = [p for m in results for p in _response_parts(st, m, names)]
    base: dict[str, Any] | None = None
    for m in run:
        src = _source(st, m)
        if src is not None and base is None:
            base = st.contents[src.content]
        if role(m) != "tool":
            parts.extend(_user_parts(st, m, src))
    if not parts and (base is None or parts_of(base)):
        return []
    if not parts:  # the client's content had none (Gemini refuses that)
        parts = [make_text(EMPTY_USER_TURN)]
    content: dict[str, Any] = dict(base) if base is not None else {"role": "user"}
    if content.get("role") == "model":  # responses a model turn held (Gemini refuses them there)
        content["role"] = "user"
    content["parts"] = parts
    return [(content, False)]


def _named_as_called(run: list[Message], names: dict[str, str]) -> bool:
    """Whether each response in ``run`` names the call it answers (``names``: each call's, by
    id): one the chain repair moved next to its call (it came before it) may name another tool,
    which Gemini refuses."""
    for m in run:
        if role(m) == "tool":
            called = names.get(str(m.get("tool_call_id")))
            if called is not None and m.get("name") != called:
                return False
    return True


def _untouched(st: State, run: list[Message]) -> list[Any] | None:
    """The client's own contents, when ``run`` is exactly their lowering, untouched."""
    out: list[Any] = []
    k = 0
    while k < len(run):
        src = _source(st, run[k])
        if src is None or run[k] is not src.lowered or src.content in st.misnamed | st.misplaced:
            return None
        tags = st.tags[src.content]
        if [m.get(TAG) for m in run[k : k + len(tags)]] != tags:
            return None
        if any(
            m is not st.parts[t].lowered for m, t in zip(run[k : k + len(tags)], tags, strict=True)
        ):
            return None
        out.append(st.contents[src.content])
        k += len(tags)
    return out


def _response_parts(st: State, m: Message, names: dict[str, str]) -> list[Any]:
    """The function response part for the result ``m``, and the media parts that came right
    after it (gone with an elision)."""
    cid = m.get("tool_call_id")
    text = text_of(m.get("content"))
    src = _source(st, m)
    called = names.get(str(cid))  # the name of the call it answers, where known
    if src is not None:
        source = parts_of(st.contents[src.content])
        part = source[src.parts[0]]
        elided = media_elided(m, src.lowered)
        after = [] if elided else [source[k] for k in src.parts[1:]]
        old = response_of(part) or {}
        renamed = called is not None and old.get("name") != called
        same_text = m is src.lowered or text == src.lowered.get("content")
        bad_id = "id" in old and not isinstance(old["id"], str)  # the call's written instead
        if same_text and cid == src.lowered.get("tool_call_id") and not renamed and not bad_id:
            return [part, *after]
        response = dict(old)
        if not same_text:
            response["response"] = response_value(response.get("response"), text)
        if elided:  # elided with its images
            response.pop("parts", None)
        elif ABSORBED in m:  # duplicates merged into it: their images after its own, as sent
            nested = absorbed_blocks(m, partial(_nested_media, st), is_text)
            if nested:
                response["parts"] = [*(response_parts(response) or ()), *nested]
            after += absorbed_blocks(m, partial(_media_after, st), is_text)
        if cid != src.lowered.get("tool_call_id") or bad_id:
            _set_id(response, cid)
        if renamed:
            response["name"] = called
        return [{**part, response_key(part): response}, *after]
    name = called or m.get("name") or ""
    response = {"name": name, "response": {"output": text}}
    _set_id(response, cid)
    return [{"functionResponse": response}]


def _set_id(holder: dict[str, Any], cid: Any) -> None:
    if isinstance(cid, str) and cid and not cid.startswith(SYNTHETIC_PREFIX):
        holder["id"] = cid
    else:
        holder.pop("id", None)


def _nested_media(st: State, m: Message) -> list[Any] | None:
    """The media nested in the function response ``m`` was lowered from (None: none)."""
    src = _source(st, m)
    if src is None or not src.parts:
        return None
    return response_parts(response_of(parts_of(st.contents[src.content])[src.parts[0]]))


def _media_after(st: State, m: Message) -> list[Any] | None:
    """The media parts that came right after the function response ``m`` was lowered from."""
    src = _source(st, m)
    if src is None or len(src.parts) < 2:
        return None
    source = parts_of(st.contents[src.content])
    return [source[k] for k in src.parts[1:]]


def _user_parts(st: State, m: Message, src: Part | None) -> list[Any]:
    new = m.get("content")
    if src is None:
        text = text_of(new)
        head = [make_text(text)] if text.strip() else []
        if ABSORBED in m:  # orphan results kept as user text: their images after it
            nested = absorbed_blocks(m, partial(_nested_media, st), is_text)
            return [*head, *nested, *absorbed_blocks(m, partial(_media_after, st), is_text)]
        return head
    source = [parts_of(st.contents[src.content])[j] for j in src.parts]
    if m is src.lowered or new == src.lowered.get("content"):
        return source
    old = src.lowered.get("content")
    if isinstance(old, list) and isinstance(new, list):  # text and other parts: part for part
        return patch_parts(source, old, new, is_text, make_text)
    sep = "\n\n" if isinstance(old, str) else "\n"  # how the lowering joined the texts
    return patch_joined(source, text_of(old), text_of(new), is_text, make_text, sep)


def _model_content(st: State, m: Message) -> list[Lifted]:
    src = _source(st, m)
    if src is not None and m is src.lowered and src.content not in st.misplaced:
        return [(st.contents[src.content], True)]
    return [(_model_turn(st, m), False)]


def _model_turn(st: State, m: Message) -> dict[str, Any]:
    src = _source(st, m)
    calls = tool_calls(m)
    if src is None:
        parts: list[Any] = []
        text = text_of(m.get("content"))
        if text.strip():
            parts.append(make_text(text))
        parts.extend(_call_part(c) for c in calls)
        return {"role": "model", "parts": parts or [make_text(" ")]}
    content = st.contents[src.content]
    misplaced = src.content in st.misplaced
    if m is src.lowered and not misplaced:
        return content  # type: ignore[no-any-return]
    source = parts_of(content)
    if misplaced:  # function responses, which Gemini refuses in a model turn, left out
        source = [p for p in source if response_of(p) is None]
    lowered_calls = tool_calls(src.lowered)
    old_text = text_of(src.lowered.get("content"))
    new_text = text_of(m.get("content"))
    parts = (
        source
        if old_text == new_text
        else patch_joined(source, old_text, new_text, is_text, make_text)
    )
    lowered_ids = [call_id(c) for c in lowered_calls]
    by_id: dict[str, dict[str, Any]] = {}
    for c in calls:
        by_id.setdefault(call_id(c), c)
    # the rules renamed ids in place (one of a turn's calls sharing an id, a malformed one): each
    # call is the one in its place
    in_place = len(calls) == len(lowered_calls) and (
        len(set(lowered_ids)) < len(lowered_ids) or not all(i in by_id for i in lowered_ids)
    )
    # else by id, and a call renamed where others went by its name and arguments: its part keeps
    # the thoughtSignature (Gemini 3 refuses a turn whose first call comes back unsigned)
    matched = {} if in_place else dict(matched_by_id(enumerate(lowered_calls), calls))
    out: list[Any] = []
    used: set[int] = set()
    k = 0
    for p in parts:
        call = call_of(p)
        if call is None:
            out.append(p)
            continue
        old = lowered_calls[k] if k < len(lowered_calls) else None
        new = None if old is None else calls[k] if in_place else matched.get(k)
        k += 1
        if new is None or id(new) in used:
            continue  # the rules dropped the call
        used.add(id(new))
        out.append(_patched_call(p, call, old, new))
    out.extend(_call_part(c) for c in calls if id(c) not in used)
    return {**content, "parts": out or [make_text(text_of(m.get("content")) or " ")]}


def _patched_call(
    part: dict[str, Any], call: dict[str, Any], old: dict[str, Any] | None, new: dict[str, Any]
) -> dict[str, Any]:
    if old is not None and new == old:
        return part
    patched = dict(call)
    fn = new.get("function") or {}
    old_fn = (old or {}).get("function") or {}
    if fn.get("arguments") != old_fn.get("arguments"):
        patched["args"] = _args(fn.get("arguments"))
    if fn.get("name") != old_fn.get("name") and isinstance(fn.get("name"), str):
        patched["name"] = fn["name"]  # filled for a call without one: its response names it so
    if call_id(new) != call_id(old or {}):
        _set_id(patched, call_id(new))
    return {**part, call_key(part): patched}


def _call_part(call: dict[str, Any]) -> dict[str, Any]:
    fn = call.get("function") or {}
    out: dict[str, Any] = {"name": fn.get("name") or "", "args": _args(fn.get("arguments"))}
    _set_id(out, call_id(call))
    return {"functionCall": out}


def _args(arguments: Any) -> Any:
    if isinstance(arguments, dict):
        return arguments
    try:
        value = exact_json.loads(arguments or "{}")  # integers past 64 bits kept
    except (orjson.JSONDecodeError, TypeError):
        return {"input": str(arguments)}
    return value if isinstance(value, dict) else {"input": value}


def _alternating(
    values: list[list[Lifted]], reused: int, prev: Lifting | None
) -> tuple[list[Any], list[Mark]]:
    """Adjacent contents of one role merged where one of them is not the client's own. The
    first ``reused`` groups are ``prev``'s: their contents are taken as they stood after the
    last of them (a content is final once another follows it), and only the rest is walked."""
    out: list[Any] = []
    marks: list[Mark] = []
    own_last = False
    if reused and prev is not None:
        count, last, own_last = prev.marks[reused - 1]
        out, marks = prev.contents[:count], prev.marks[:reused]
        if count:
            out[-1] = last
    for group in values[reused:]:
        for c, own in group:
            # a model turn's calls must follow a user's turn (Gemini's 400 "function call turn
            # comes immediately after a user turn or after a function response turn"): a turn
            # of calls after the model's own turn joins it, the client's own or not
            joined = _calls_in(c) and _role(c) == "model"
            if joined and not out:  # the history starts with calls: a user's turn before them
                out.append({"role": "user", "parts": [make_text(EMPTY_USER_TURN)]})
            if out and (joined or not (own and own_last)) and _role(out[-1]) == _role(c):
                prev_content = out[-1]
                out[-1] = {**prev_content, "parts": [*parts_of(prev_content), *parts_of(c)]}
                own_last = False
                continue
            out.append(c)
            own_last = own
        marks.append((len(out), out[-1] if out else None, own_last))
    return out, marks


def _calls_in(content: Any) -> bool:
    return any(call_of(p) is not None for p in parts_of(content))


def _role(content: Any) -> Any:
    return (content.get("role") or "user") if isinstance(content, dict) else None
