"""JSON an API client printed (``curl``, ``gh api``, ``http``): read as the structured result of a
tool named after the request, its method and the last named segment of its URL path
("curl -X POST …/v1/customers" -> ``create_customers``, ``gh api repos/o/r/issues -f title=…`` ->
``create_issues``), so ``entity_results`` learns from it what it learns from an API tool's JSON
result. The clients and their flags are pack data (``results.json_clients`` in the entities
pack)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

_METHODS = {"GET": "list", "POST": "create", "PUT": "update", "PATCH": "update", "DELETE": "delete"}
MAX_SEGMENT = 40  # a longer path segment is an identifier, not a collection's name
MAX_TRIES = 4  # closing brackets tried from the end of a command's output


def _collection(path: str) -> str | None:
    """The last path segment that names a collection: not a version, not an identifier."""
    found = _record(path)
    return found[0] if found is not None else None


def _record(path: str) -> tuple[str, str | None] | None:
    """(the collection, the record's identifier when the path ends in one after it:
    ``/api/users/1842``) of a URL's path, or None."""
    path = path.split("?", 1)[0].split("#", 1)[0]
    if "://" in path:
        path = path.split("://", 1)[1].partition("/")[2]
    segments = [s for s in path.split("/") if s]
    for at in range(len(segments) - 1, -1, -1):
        word = segments[at].lower()
        if word in ("api", "rest") or (word[:1] == "v" and word[1:].isdigit()):
            continue
        if any(c.isdigit() for c in word) or len(word) > MAX_SEGMENT or not word.isascii():
            continue  # cus_123, a SHA, a UUID: an identifier
        ident = segments[at + 1] if at + 2 == len(segments) else None
        return word.replace("-", "_"), ident
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
    # flags whose next word is their value, never the URL (``-H 'Accept: a/b'``, ``-o /dev/null``)
    value_flags = set(spec.get("value_flags") or ())
    method, url, data = None, None, False
    i = 0
    while i < len(rest):
        word = rest[i]
        flag, eq, value = word.partition("=")
        if flag in method_flags:
            method = (value if eq else (rest[i + 1] if i + 1 < len(rest) else "")).upper()
            i += 1 if eq else 2
            continue
        if flag in data_flags or flag in value_flags:
            data = data or flag in data_flags
            i += 1 if eq else 2  # its value: a body's ``.``, a path's ``/``
            continue
        if word.upper() in _METHODS and url is None and method is None:
            method = word.upper()  # httpie: http POST url
        elif not word.startswith("-") and url is None and ("/" in word or "." in word):
            url = word
        i += 1
    if url is None:
        return None
    found = _record(url)
    verb = _METHODS.get(method or ("POST" if data else "GET"))
    if found is None or verb is None:
        return None
    noun, ident = found
    args = {"url": url[:200]}
    if ident is not None and verb == "delete" and len(ident) <= MAX_SEGMENT:
        args["id"] = ident  # DELETE …/users/1842: that record
    return f"{verb}_{noun}", args


# what an API answers a request it refused with (FastAPI's ``detail``, most APIs' ``error``)
_REFUSED_KEYS = ("error", "errors", "detail", "fault")


# a refusal's status: a status line (``curl -i``), or a code alone on its line (``-w
# '%{http_code}'``); each line bounded
_REFUSED_STATUS = re.compile(
    r"^(?:HTTP/[\d.]{1,3}[ \t]{1,4}[45]\d\d(?!\d)|[ \t]{0,8}[45]\d\d[ \t]{0,8}\r?$)", re.M
)
_STATUS_SCAN = 4096  # characters of the output's head and tail read for a status


def refused(body: str | None, output: str) -> bool:
    """Whether what a request printed says it was refused: a JSON object holding an error,
    "not found", or a 4xx or 5xx status (curl exits 0 on a refusal unless told ``--fail``)."""
    if "not found" in output[:_STATUS_SCAN].lower():
        return True
    rest = output.replace(body, "", 1) if body else output  # a lone number of the body is data
    for part in (rest[:_STATUS_SCAN], rest[-_STATUS_SCAN:]):
        if _REFUSED_STATUS.search(part) is not None:
            return True
    if body is None:
        return False
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return False
    return isinstance(data, dict) and any(k in data for k in _REFUSED_KEYS)


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
