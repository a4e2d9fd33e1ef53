"""JSON an API client printed (``curl``, ``gh api``, ``http``): read as the structured result of a
tool named after the request, its method and the last named segment of its URL path
("curl -X POST …/v1/customers" -> ``create_customers``, ``gh api repos/o/r/issues -f title=…`` ->
``create_issues``), so ``entity_results`` learns from it what it learns from an API tool's JSON
result. The clients and their flags are pack data (``results.json_clients`` in the entities
pack)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

_METHODS = {"GET": "list", "POST": "create", "PUT": "update", "PATCH": "update", "DELETE": "delete"}
MAX_SEGMENT = 40  # a longer path segment is an identifier, not a collection's name
MAX_TRIES = 4  # closing brackets tried from the end of a command's output


def _collection(path: str) -> str | None:
    """The last path segment that names a collection: not a version, not an identifier."""
    path = path.split("?", 1)[0].split("#", 1)[0]
    if "://" in path:
        path = path.split("://", 1)[1].partition("/")[2]
    for segment in reversed([s for s in path.split("/") if s]):
        word = segment.lower()
        if word in ("api", "rest") or (word[:1] == "v" and word[1:].isdigit()):
            continue
        if any(c.isdigit() for c in word) or len(word) > MAX_SEGMENT or not word.isascii():
            continue  # cus_123, a SHA, a UUID: an identifier
        return word.replace("-", "_")
    return None


def api_request(spec: Mapping[str, Any], argv: Sequence[str]) -> tuple[str, dict[str, str]] | None:
    """(a tool name, its arguments) for an API client's command, or None: ``spec`` is the pack's
    ``json_clients`` entry for ``argv[0]`` ({sub: words that must follow, method_flags,
    data_flags})."""
    sub = [str(w) for w in spec.get("sub") or ()]
    if [*argv[1 : 1 + len(sub)]] != sub:
        return None
    rest = list(argv[1 + len(sub) :])
    method_flags = set(spec.get("method_flags") or ())
    data_flags = set(spec.get("data_flags") or ())
    method, url, data = None, None, False
    i = 0
    while i < len(rest):
        word = rest[i]
        flag, eq, value = word.partition("=")
        if flag in method_flags:
            method = (value if eq else (rest[i + 1] if i + 1 < len(rest) else "")).upper()
            i += 1 if eq else 2
            continue
        if flag in data_flags:
            data = True
        elif word.upper() in _METHODS and url is None and method is None:
            method = word.upper()  # httpie: http POST url
        elif not word.startswith("-") and url is None and ("/" in word or "." in word):
            url = word
        i += 1
    if url is None:
        return None
    noun = _collection(url)
    verb = _METHODS.get(method or ("POST" if data else "GET"))
    if noun is None or verb is None:
        return None
    return f"{verb}_{noun}", {"url": url[:200]}


def printed_json(output: str) -> str | None:
    """The JSON document a command printed: from the first line opening an object or a list to
    the closing bracket after which it parses (curl's headers, a harness's exit-code footer left
    out); a few closing brackets from the end are tried, no more."""
    start = -1
    for opener in ("{", "["):
        at = 0 if output.startswith(opener) else output.find("\n" + opener) + 1
        if at > 0 or output.startswith(opener):
            start = at if start < 0 else min(start, at)
    if start < 0:
        return None
    end = len(output)
    for _ in range(MAX_TRIES):
        end = max(output.rfind("}", start, end), output.rfind("]", start, end))
        if end <= start:
            return None
        try:
            orjson.loads(output[start : end + 1])
        except orjson.JSONDecodeError:
            continue
        return output[start : end + 1]
    return None
