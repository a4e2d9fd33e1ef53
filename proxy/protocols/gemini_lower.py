"""Lowering Gemini ``contents`` to the chat view (see ``gemini``).

- ``systemInstruction``: a system message (its text parts);
- a ``model`` content: one assistant message, its visible text parts joined, its
  ``functionCall`` parts as ``tool_calls`` (a call sent without an id gets one named by its place,
  never written back); ``thought`` and ``inlineData`` parts are the adapter's to keep;
- a ``user`` content: each ``functionResponse`` part a tool message (with the media parts
  right after it, the result's as Gemini CLI sends them), the other parts (in runs between them)
  a user message. A response without an id answers the previous model turn's next unanswered
  call of its name, as Gemini pairs them.

Tags: ``s`` for the system instruction, ``{content}.{first part}`` for the others."""

from __future__ import annotations

from typing import Any

from proxy.protocols.base import TAG, opaque_note
from proxy.protocols.gemini_media import media_estimate, media_type, response_parts
from proxy.protocols.gemini_parts import (
    SYNTHETIC_PREFIX,
    Part,
    State,
    arguments_of,
    call_of,
    is_text,
    part_kind,
    parts_of,
    response_of,
    response_text,
    texts,
)
from proxy.protocols.media_blocks import mark_media
from proxy.protocols.prefix import system_message
from rules.base import Message
from rules.messages import HARNESS_TAGS, HELD, MEDIA_TOKENS, PLACEHOLDER_PREFIX

EMPTY_MODEL_TURN = f"{PLACEHOLDER_PREFIX} empty model turn]"


def system_key(body: dict[str, Any]) -> str | None:
    for key in ("systemInstruction", "system_instruction"):
        if key in body:
            return key
    return None


def lower_system(
    body: dict[str, Any], st: State, out: list[Message], kept: Message | None = None
) -> None:
    """The system instruction's message (``kept``, the session's previous one, when it says the
    same: the runner's memos of the session know it)."""
    key = system_key(body)
    st.system_key = key
    system = body.get(key) if key else None
    if isinstance(system, str):
        system = {"parts": [{"text": system}]}
    if isinstance(system, dict):
        text = texts(parts_of(system))
        if text:
            _add(st, out, "s", Part(-1, (), system_message(kept, text)))


# The calls of the model turn before a content, unanswered so far: (name, id)
Calls = list[tuple[str, str]]


def lower_content(st: State, out: list[Message], i: int, content: Any, calls: Calls) -> Calls:
    """``contents[i]`` onto ``out``; the calls the next content answers: a model turn's, or the
    ones a user content left open (a next user content's responses answer them: the lifting
    writes the run as one content, as Gemini pairs a turn's calls with the next content only)."""
    if not isinstance(content, dict):
        return []
    if content.get("role") == "model":
        before = st.contents[i - 1] if i else None
        after_model = isinstance(before, dict) and before.get("role") == "model"
        if (i == 0 or (after_model and not calls)) and any(
            call_of(p) is not None for p in parts_of(content)
        ):
            # calls first, or right after the model's own turn, which Gemini refuses: the
            # lifting puts a user's turn before them, or joins them to that turn
            st.misplaced.add(i)
            st.repairs.append({"kind": "call_turn_order", "index": i, "action": "joined_turns"})
        # a turn after a turn: the next content may answer both turns' calls
        return _lower_model(st, out, i, content, calls if after_model else [])
    return _lower_user(st, out, i, content, calls)


def held_history(body: dict[str, Any]) -> bool:
    """Whether the body continues a conversation a ``cachedContent`` holds."""
    cached = body.get("cachedContent", body.get("cached_content"))
    return isinstance(cached, str) and bool(cached)


def lower_contents(body: dict[str, Any]) -> tuple[list[Message], State]:
    """The whole body lowered, nothing reused."""
    contents: list[Any] = body.get("contents") or []
    st = State(contents, held_history=held_history(body))
    out: list[Message] = []
    lower_system(body, st, out)
    calls: Calls = []
    for i, content in enumerate(contents):
        calls = lower_content(st, out, i, content, calls)
    return out, st


def _add(st: State, out: list[Message], tag: str, part: Part) -> None:
    part.lowered[TAG] = tag
    st.parts[tag] = part
    if part.content >= 0:
        st.tags.setdefault(part.content, []).append(tag)
    out.append(part.lowered)


def _lower_model(
    st: State, out: list[Message], i: int, content: dict[str, Any], calls: Calls
) -> Calls:
    """``contents[i]``, a model turn, onto ``out``; ``calls``: those of a model turn just
    before, still open. The calls open after it."""
    parts = parts_of(content)
    tool_calls: list[dict[str, Any]] = []
    named: Calls = []
    for j, p in enumerate(parts):
        call = call_of(p)
        if call is None:
            continue
        cid = call.get("id")
        if not isinstance(cid, str) or not cid:
            cid = f"{SYNTHETIC_PREFIX}{i}_{j}"
            st.synthetic.add(cid)
        name = call.get("name")
        fn = {"name": name, "arguments": arguments_of(call)}
        tool_calls.append({"id": cid, "type": "function", "function": fn})
        named.append((name if isinstance(name, str) else "", cid))
    if any(isinstance(p, dict) and p.get("thought") for p in parts):
        st.thoughts.add(i)
    answers = [j for j, p in enumerate(parts) if response_of(p) is not None]
    if answers:  # refused there: lifted into a user's content after the turn
        st.misplaced.add(i)
        st.repairs.append({"kind": "response_in_model_turn", "index": i,
                           "action": "moved_to_user_turn"})  # fmt: skip
        if len(answers) == len(parts):  # nothing but responses: the turn is theirs alone
            return _answered(st, out, i, parts, answers, [*calls, *named])
    if not parts:  # Gemini refuses a content without parts: the lifting writes the note below
        st.misplaced.add(i)
        st.repairs.append({"kind": "empty_content", "index": i, "action": "filled"})
    text = texts(parts)
    if not parts:
        text = EMPTY_MODEL_TURN
    elif not text and not tool_calls:
        text = opaque_note([part_kind(p) for p in parts])
    msg: Message = {"role": "assistant", "content": text or None}
    if tool_calls:
        msg["tool_calls"] = tool_calls
    media = [p for p in parts if media_type(p) is not None]
    if media:  # an image model's own images: counted, and kept by a changed turn's lifting
        msg[MEDIA_TOKENS] = media_estimate(media)
    _add(st, out, f"{i}.0", Part(i, tuple(range(len(parts))), msg))
    return _answered(st, out, i, parts, answers, [*calls, *named]) if answers else [*calls, *named]


def _answered(
    st: State, out: list[Message], i: int, parts: list[Any], answers: list[int], calls: Calls
) -> Calls:
    """The function responses ``parts[j]`` (``answers``) of a model turn as results after it,
    each answering the open call its id, else its name, names (none: an orphan, which the chain
    repair keeps as text); the calls still open."""
    open_calls = list(calls)
    for j in answers:
        response = response_of(parts[j]) or {}
        cid, name = response.get("id"), response.get("name")
        match = next((c for c in open_calls if isinstance(cid, str) and c[1] == cid), None)
        match = match or next((c for c in open_calls if c[0] == name), None)
        if match is not None:
            open_calls.remove(match)
            cid = match[1]
        else:
            cid = f"{SYNTHETIC_PREFIX}{i}_{j}"
            st.synthetic.add(cid)
        msg: Message = {"role": "tool", "tool_call_id": cid, "content": response_text(response)}
        if isinstance(name, str):
            msg["name"] = name
        _add(st, out, f"{i}.{j}", Part(i, (j,), msg))
    return open_calls


def _in_order(st: State, i: int, at: int, last: int) -> int:
    """Note content ``i`` as one to write anew when its response to the call at ``at`` comes
    after one to a later call (Gemini pairs a turn's calls with the next turn's responses in
    order; the lifting writes them in the calls' order); the place now last."""
    if at < last and i not in st.misnamed:
        st.misnamed.add(i)
        st.repairs.append({"kind": "response_order", "index": i, "action": "reordered_to_calls"})
    return max(at, last)


def _split_from_calls(st: State, i: int) -> None:
    """Note content ``i`` as one to write anew: it answers calls of a model turn that another
    user content follows (a client that sent each response as its own content)."""
    if i not in st.misnamed:
        st.misnamed.add(i)
        st.repairs.append({"kind": "responses_split", "index": i, "action": "merged_into_turn"})


def _lower_user(
    st: State, out: list[Message], i: int, content: dict[str, Any], calls: Calls
) -> Calls:
    parts = parts_of(content)
    open_calls = list(calls)
    before = st.contents[i - 1] if i else None
    carried = bool(calls) and not (isinstance(before, dict) and before.get("role") == "model")
    run: list[int] = []
    if any(part_kind(p) in HARNESS_TAGS for p in parts):
        st.thoughts.add(i)

    def flush() -> None:
        if run:
            chosen = [parts[j] for j in run]
            if all(is_text(p) for p in chosen):
                value: Any = "\n\n".join(p["text"] for p in chosen)
            else:
                value = [
                    {"type": "text", "text": p["text"]}
                    if is_text(p)
                    else {"type": media_type(p) or part_kind(p)}  # media by type: counted
                    for p in chosen
                ]
            msg: Message = {"role": "user", "content": value}
            _add(st, out, f"{i}.{run[0]}", Part(i, tuple(run), msg))
            run.clear()

    beside: set[int] = set()  # media parts that go with the response before them
    last = -1  # the place among ``calls`` of the last call answered
    place = {c: k for k, c in enumerate(calls)}
    for j, p in enumerate(parts):
        response = response_of(p)
        if j in beside:
            continue
        if response is None:
            run.append(j)
            continue
        flush()
        cid = response.get("id")
        name = response.get("name")
        held = False  # answering a call the cached content holds
        if isinstance(cid, str) and cid:
            answered = next((c for c in open_calls if c[1] == cid), None)
            held = answered is None and st.held_history
            if answered is not None:
                open_calls.remove(answered)
                last = _in_order(st, i, place[answered], last)
                if carried:
                    _split_from_calls(st, i)
                if answered[0] != name:  # Gemini refuses a response not naming its call
                    st.misnamed.add(i)
                    action = "renamed_to_call"
                    repair = {"kind": "response_name_mismatch", "index": i, "tool_call_id": cid}
                    st.repairs.append({**repair, "action": action})
        else:
            match = next((c for c in open_calls if c[0] == name), None)
            if match is not None:
                open_calls.remove(match)
                cid = match[1]
                last = _in_order(st, i, place[match], last)
                if carried:
                    _split_from_calls(st, i)
                if "id" in response and not isinstance(response["id"], str):
                    # an id of no string (-1, a list) names no call: the call's is written
                    st.misnamed.add(i)
                    repair = {"kind": "response_id_invalid", "index": i, "tool_call_id": cid}
                    st.repairs.append({**repair, "action": "set_to_call"})
            else:
                cid = f"{SYNTHETIC_PREFIX}{i}_{j}"
                st.synthetic.add(cid)
                held = st.held_history
        msg: dict[str, Any] = {
            "role": "tool", "tool_call_id": cid, "content": response_text(response)
        }  # fmt: skip
        if isinstance(name, str):
            msg["name"] = name
        if held:
            msg[HELD] = True
        # its media, for the count, the chain repair and an elision: its own (Gemini 3's images
        # of a read file) and those right after it (Gemini CLI's to other models)
        after = _media_after(parts, j)
        beside.update(after)
        media = [*(response_parts(response) or ()), *(parts[k] for k in after)]
        mark_media(msg, media, is_text, media_estimate)
        _add(st, out, f"{i}.{j}", Part(i, (j, *after), msg))
    flush()
    if not parts:  # an empty content: a message all the same, so the turn is not lost; Gemini
        # refuses a content without parts, so the lifting gives it one
        _add(st, out, f"{i}.0", Part(i, (), {"role": "user", "content": ""}))
        st.misplaced.add(i)
        st.repairs.append({"kind": "empty_content", "index": i, "action": "filled"})
    return open_calls


def _media_after(parts: list[Any], j: int) -> list[int]:
    """The media parts right after the function response ``parts[j]``, up to the next part of
    another kind: how Gemini CLI sends a read image to a model it does not nest it for."""
    out: list[int] = []
    k = j + 1
    while k < len(parts) and response_of(parts[k]) is None and media_type(parts[k]) is not None:
        out.append(k)
        k += 1
    return out
