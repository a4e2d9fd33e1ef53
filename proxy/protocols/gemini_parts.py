"""The Gemini adapter's bookkeeping (what each lowered message stands for in the client's
``contents``) and small readers of Gemini parts (``text``, ``thought``, ``functionCall``,
``functionResponse``, ``inlineData`` …)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from proxy.protocols import exact_json
from proxy.protocols.patching import appended
from rules.base import Message
from rules.messages import HARNESS_TAGS

# A call the client sent without an id gets one for the chat view (the chain rules pair by id),
# named by its place; it is never written back (lifting leaves the client's part without one).
SYNTHETIC_PREFIX = "ctxproxy-gemini-call-"


@dataclass(slots=True)
class Part:
    """One lowered message: the content it comes from (-1: the system instruction), the part
    indices it stands for, and the message as lowered."""

    content: int
    parts: tuple[int, ...]
    lowered: Message


@dataclass
class State:
    contents: list[Any]
    parts: dict[str, Part] = field(default_factory=dict)
    # each content's lowered messages' tags, in order (a content kept whole when all are untouched)
    tags: dict[int, list[str]] = field(default_factory=dict)
    synthetic: set[str] = field(default_factory=set)  # ids made for calls sent without one
    # the body names a ``cachedContent``: the conversation begins in it (the provider's), so a
    # response to a call the body does not hold answers one there (``rules.messages.HELD``)
    held_history: bool = False
    system_key: str | None = None  # ``systemInstruction`` or ``system_instruction``
    # the lifting of the session's previous request, and this one's (``gemini_lift.Lifting``)
    lifted: Any = None
    lifting: Any = None
    # the contents holding a ``thought`` part or a harness block (``hidden_text`` reads those)
    thoughts: set[int] = field(default_factory=set)
    checked: Any = None  # the session's last final check (``GeminiAdapter.violations``)
    # the contents holding a response that does not name the call it answers (lifted renamed)
    # or that answers the calls out of their order (lifted in order), and the repairs made so
    # (the rules' report shape)
    misnamed: set[int] = field(default_factory=set)
    repairs: list[dict[str, Any]] = field(default_factory=list)
    # the contents the lifting writes anew (a repair each, in ``repairs``): a model content
    # holding function responses, which Gemini refuses in a model turn (written without them),
    # and a content without parts, which Gemini refuses too (a model turn's says it was empty, a
    # user turn's is left out)
    misplaced: set[int] = field(default_factory=set)
    # each content's JSON (None: not JSON), kept across a session's requests: a forwarded body
    # is written from its contents' bytes, not serialised again (``GeminiAdapter.lift``)
    datas: list[bytes | None] | None = None
    # the JSON of the contents the lifting wrote (not the client's), by id with the object itself
    # (an id is trusted only while its object is the one kept): the previous request's, which a
    # content lifted again as the same object (a lifted group reused) is written from, and this
    # one's (only the contents it forwards: one request's worth)
    was_written: dict[int, tuple[Any, bytes]] | None = None
    written: dict[int, tuple[Any, bytes]] | None = None
    # the body's other members as last written (``prefix.with_items``: by name, with the value
    # itself) and the function declarations as the rules read them, with the ``tools`` value
    # they were read from: the session's previous request's, taken over while the body memory
    # hands the same objects
    members: dict[str, tuple[Any, bytes]] | None = None
    tools: tuple[Any, list[Any] | None] | None = None


def parts_of(content: Any) -> list[Any]:
    parts = content.get("parts") if isinstance(content, dict) else None
    return parts if isinstance(parts, list) else []


def is_text(part: Any) -> bool:
    """A visible text part: not a ``thought`` part (the model's thinking, kept as sent), nor a
    harness block of its own (``harness_tag``)."""
    if not isinstance(part, dict) or part.get("thought"):
        return False
    text = part.get("text")
    return isinstance(text, str) and (not text.startswith("<") or harness_tag(part) is None)


def harness_tag(part: Any) -> str | None:
    """The tag of a text part that is one harness block and nothing else (Gemini CLI's
    ``<session_context>``: date, OS, workspace and its listing, regenerated on every resume).
    Such a part is the adapter's to keep as sent: the rules read the user's words, and a
    conversation resumed with a fresh listing is the same conversation to them."""
    text = part.get("text") if isinstance(part, dict) else None
    if not isinstance(text, str) or not text.startswith("<"):
        return None
    body = text.rstrip()
    for tag in HARNESS_TAGS:
        if body.startswith(f"<{tag}>") and body.endswith(f"</{tag}>"):
            inner = body[len(tag) + 2 : len(body) - len(tag) - 3]
            return tag if f"<{tag}>" not in inner else None
    return None


def make_text(text: str) -> dict[str, Any]:
    return {"text": text}


def texts(parts: list[Any]) -> str:
    return "\n\n".join(p["text"] for p in parts if is_text(p) and p["text"])


# Gemini's REST API reads proto-JSON names in snake_case too: a part may spell its call
# ``function_call`` (its answer ``function_response``); both are read, and a patched part keeps
# the client's spelling (``call_key``, ``response_key``)
CALL_KEYS = ("functionCall", "function_call")
RESPONSE_KEYS = ("functionResponse", "function_response")


def call_of(part: Any) -> dict[str, Any] | None:
    if not isinstance(part, dict):
        return None
    call = part.get("functionCall")
    if call is None:
        call = part.get("function_call")
    return call if isinstance(call, dict) else None


def response_of(part: Any) -> dict[str, Any] | None:
    if not isinstance(part, dict):
        return None
    response = part.get("functionResponse")
    if response is None:
        response = part.get("function_response")
    return response if isinstance(response, dict) else None


def call_key(part: dict[str, Any]) -> str:
    """The name ``part`` spells its call with (camelCase when it has none)."""
    return "function_call" if "function_call" in part else "functionCall"


def response_key(part: dict[str, Any]) -> str:
    return "function_response" if "function_response" in part else "functionResponse"


def camel(name: str) -> str:
    """A snake_case field name in camelCase (``inline_data``: ``inlineData``)."""
    head, *rest = name.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def part_kind(part: Any) -> str:
    """A part's kind: the first data key it holds (``text``, ``inlineData`` …), a harness
    block's tag."""
    if not isinstance(part, dict):
        return "unknown"
    if part.get("thought"):
        return "thought"
    tag = harness_tag(part)
    if tag is not None:
        return tag
    for key in part:
        if key not in ("thoughtSignature", "thought_signature", "thought"):
            name = str(key)[:40]
            return camel(name) if "_" in name else name  # one kind whatever the spelling
    return "unknown"


# The fields a function response's text is read from, in this order, when it has others too
# (Gemini CLI's ``output``, the ``output`` / ``error`` Gemini's documentation names, MCP's
# ``content``, a shell's ``stdout`` and ``stderr``)
TEXT_FIELDS = ("output", "content", "result", "text", "stdout", "stderr", "error")


def text_field(value: Any) -> str | None:
    """The field of a function response's ``response`` that holds its text: its only field when
    that is a string, else the first of ``TEXT_FIELDS`` holding a string that is not empty, else
    the first holding one (None: none)."""
    if not isinstance(value, dict):
        return None
    if len(value) == 1:
        key, only = next(iter(value.items()))
        return key if isinstance(only, str) else None
    empty = None
    for key in TEXT_FIELDS:
        text = value.get(key)
        if isinstance(text, str):
            if text:
                return key
            empty = empty or key
    return empty


def _header(value: dict[str, Any], key: str) -> str:
    """The JSON of a response's fields other than its text field (one line)."""
    return orjson.dumps({k: v for k, v in value.items() if k != key}).decode()


def response_text(response: dict[str, Any]) -> str:
    """A function response as the chat view's tool result. With a text field (``text_field``):
    that field's text, after a line with the JSON of the other fields and a blank line when
    there are others (so the rules read its lines, and the fields too). Else its JSON."""
    value = response.get("response")
    if value is None:
        return ""
    key = text_field(value)
    if key is not None:
        if len(value) == 1:
            return value[key]  # type: ignore[no-any-return]
        return f"{_header(value, key)}\n\n{value[key]}"
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return ""


def response_value(old: Any, text: str) -> Any:
    """``old`` (a function response's ``response``) now saying ``text`` (``response_text`` of it
    as the rules changed it). With a text field, the edited text goes back into that field and
    the other fields stay fields: as sent while the header line is, as the rules rewrote it
    while it still reads as a JSON object, as sent when the rules replaced the whole text (which
    then is the field's). Without one: the JSON object the text spells; an appended note as a
    field of its own (``output``, or ``note`` when ``output`` holds no text); else the text as
    ``output``."""
    key = text_field(old)
    if key is not None:
        if len(old) == 1:
            return {key: text}
        header, sep, rest = text.partition("\n")
        rest = rest.removeprefix("\n")  # the blank line (an elision may have taken it)
        if header == _header(old, key):
            return {**old, key: rest}
        fields = _object(header) if sep else None
        if fields is None:
            return {**old, key: text}
        out = {k: rest if k == key else fields[k] for k in old if k == key or k in fields}
        out.update((k, v) for k, v in fields.items() if k not in out)
        return out
    value = _object(text)
    if value is not None:
        return value
    if isinstance(old, dict):
        try:
            before = orjson.dumps(old).decode()
        except TypeError:
            before = None
        note = appended(before, text) if before is not None else None
        if note is not None:  # the object stays one (an ``output`` of its own not a string too)
            return {**old, _free_field(old): note}
    return {"output": text}


def _free_field(value: dict[str, Any]) -> str:
    """A field for an appended note that ``value`` does not have: ``output``, else ``note``,
    else the first ``note_N`` free."""
    for name in ("output", "note"):
        if name not in value:
            return name
    return next(f"note_{n}" for n in range(2, len(value) + 3) if f"note_{n}" not in value)


def _object(text: str) -> dict[str, Any] | None:
    """The JSON object ``text`` spells (None: it spells none)."""
    if not text.startswith("{"):
        return None
    try:
        value = exact_json.loads(text)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def arguments_of(call: dict[str, Any]) -> str:
    args = call.get("args")
    try:
        return orjson.dumps(args if args is not None else {}).decode()
    except TypeError:
        return "{}"
