"""What counts as a provider's error event in a stream, in one place: the usage tap logs it as the
request's ``upstream_stream_error`` (``sse_usage``), and the stream's scanner holds it back and
redacts it (``error_redaction``). Both ask ``error_event``; the scanner asks it through
``is_error_head``, on an event's first bytes.

The shapes: a member ``error`` holding an object (chat completions, Gemini, Anthropic's
``{"type": "error", "error": {...}}``) or any other value that is not empty (Hugging Face TGI's
``{"error": "…"}``, a list, ``true``), ``type: "error"`` or ``object: "error"`` with the error's
fields on the event itself (the Responses API; vLLM and other OpenAI-compatible servers), and
``type: "response.failed"`` with the error in its response; or the event's name ``error`` or
``response.failed``, whatever its data."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import orjson

ERROR_NAMES = frozenset({b"error", b"response.failed"})
# The start of a data payload that may be an error event, for a first line longer than the head
# the scanner waits for (and for Gemini's JSON-array elements): its first member decides. It errs
# toward holding back: ``{"error": null, ...}`` matches, and is redacted, harmlessly.
ERROR_START = re.compile(
    rb'[ \t]*\{\s*"(?:error"|(?:type|object)"\s*:\s*"(?:error|response\.failed)")'
)
HEAD_BYTES = 512  # bytes of an event's start the scanner holds back, at most, to tell


def error_event(obj: dict[str, Any]) -> str | None:
    """``"<type or code>: <message>"`` when ``obj`` (an event's data) is an error, else None."""
    kind = obj.get("type")
    error = obj.get("error")
    if kind == "response.failed":
        response = obj.get("response")
        found = response.get("error") if isinstance(response, dict) else None
    elif isinstance(error, dict):
        found = error
    elif kind == "error" or obj.get("object") == "error":
        found = obj  # the error's fields on the event itself
    elif error not in (None, False, "", [], 0):
        # a string, a list, ``true`` (Hugging Face TGI's ``{"error": "…"}``): an error to the
        # SDKs all the same (such an event relayed the server's key unredacted)
        message = error if isinstance(error, str) else obj.get("message") or str(error)[:500]
        found = {"message": message}
    else:
        return None
    if not isinstance(found, dict):
        return None
    name = found.get("type") if found.get("type") not in (None, "error") else None
    name = name or found.get("code") or found.get("status") or "error"
    return f"{name}: {found.get('message') or ''}"[:2000]


def data_objects(lines: list[bytes]) -> Iterator[dict[str, Any]]:
    """The JSON objects of an event's data lines: the lines joined, as the spec says, or (when
    that is no JSON) one object per line, as some upstreams send them."""
    candidates = [b"\n".join(lines)] if len(lines) == 1 else [b"\n".join(lines), *lines]
    for payload in candidates:
        try:
            obj = orjson.loads(payload)
        except orjson.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            yield obj


def data_error(lines: list[bytes]) -> str | None:
    """``error_event`` of an event's data lines (``data_objects``)."""
    for obj in data_objects(lines):
        if (said := error_event(obj)) is not None:
            return said
    return None


def is_error_event(event: bytes) -> bool:
    """Whether a whole event (its bytes to its blank line, or to the stream's end) is an error
    event: by its name, or its data read as the usage tap and the SDKs read it."""
    lines = event.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    data: list[bytes] = []
    for line in lines:
        if line.startswith(b"event:") and line[6:].strip() in ERROR_NAMES:
            return True
        if line.startswith(b"data:"):
            data.append(line[5:])
    return data_error(data) is not None


def is_error_head(head: bytes, final: bool = False) -> bool | None:
    """Whether the event starting with ``head`` is an error event; None: not known yet (more of
    it is needed: past ``HEAD_BYTES``, the whole event, ``is_error_event``). ``final``: the
    stream ended after ``head``. An event that ends within ``HEAD_BYTES`` is read whole, as the
    usage tap reads it; a longer one is an error by its name or its first data line (whole: what
    it holds; cut off by the head: its start, ``ERROR_START``), and is not one only once read
    whole: an error member after 512 bytes of others, or after a long comment line, is an error
    to the SDKs all the same (it relayed the server's key unredacted)."""
    lines = head.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    data: list[bytes] = []
    for line in lines[:-1]:
        if not line:  # the event ended: its data decides
            return data_error(data) is not None
        if line.startswith(b"event:") and line[6:].strip() in ERROR_NAMES:
            return True
        if line.startswith(b"data:"):
            data.append(line[5:])
    last = lines[-1][5:] if lines[-1].startswith(b"data:") else None
    if final:
        return data_error([*data, last] if last is not None else data) is not None
    if len(head) < HEAD_BYTES:
        return None
    if data:
        try:
            first = orjson.loads(data[0])
        except orjson.JSONDecodeError:
            pass
        else:
            if isinstance(first, dict) and error_event(first) is not None:
                return True
    start = data[0] if data else last
    return True if start is not None and ERROR_START.match(start) is not None else None
