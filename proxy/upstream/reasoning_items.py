"""Reasoning items OpenAI cannot resolve, left out of what goes to OpenAI's own Responses API.

OpenAI reads a reasoning item sent back as input either from its ``encrypted_content`` or, with
``store`` on, by its id from what it stored. A Responses client bridged to another provider
(``proxy.upstream.bridge``) is answered with reasoning items litellm made, with an id of
litellm's and no encrypted content. When the user switches to an OpenAI model (Codex's
``/model``) those items go to OpenAI, which answers 404 "Item with id 'rs_…' not found" to the
whole history, on every retry; so does any reasoning item without encrypted content once
``store`` is false (nothing was stored to find it by).

So the bridge's reasoning items reach the client with their id marked as the bridge's
(``MARK`` after ``rs_``; and with the ``summary`` a reasoning item must have, which litellm's
lack), and a request to OpenAI's own API goes without the reasoning items it
cannot resolve: marked ones, and with ``store: false`` those without encrypted content. OpenAI
lets earlier reasoning go; the request is otherwise forwarded byte for byte, and one without such
items is not parsed (a scan of its bytes)."""

from __future__ import annotations

import logging
from typing import Any

import orjson

from proxy.upstream.json_scan import count_pairs, values_of

log = logging.getLogger("ctxproxy.upstream")

MARK = "ctxproxy-bridged-"
_PREFIX = "rs_"
_MARKED = (_PREFIX + MARK).encode()


# ----- the bridge's answers -----


def marked_event(event: dict[str, Any]) -> dict[str, Any]:
    """A bridged Responses stream event (litellm's own dict), its reasoning ids marked."""
    item_id = event.get("item_id")
    if isinstance(item_id, str):
        event["item_id"] = _marked(item_id)
    item = event.get("item")
    if isinstance(item, dict) and item.get("type") == "reasoning":
        _mark_item(item)
    response = event.get("response")
    if isinstance(response, dict):
        marked_answer(response)
    return event


def marked_answer(answer: dict[str, Any]) -> dict[str, Any]:
    """A bridged Responses answer (litellm's own dict), its reasoning items' ids marked."""
    output = answer.get("output")
    for item in output if isinstance(output, list) else ():
        if isinstance(item, dict) and item.get("type") == "reasoning":
            _mark_item(item)
    return answer


def _mark_item(item: dict[str, Any]) -> None:
    item.setdefault("summary", [])  # required in a reasoning item; litellm leaves it out
    item_id = item.get("id")
    if isinstance(item_id, str):
        item["id"] = _marked(item_id)


def _marked(item_id: str) -> str:
    if item_id.startswith(_PREFIX) and not item_id.startswith(_PREFIX + MARK):
        return _PREFIX + MARK + item_id[len(_PREFIX) :]
    return item_id


# ----- on the way to OpenAI -----


def resolvable(body: bytes) -> bytes:
    """``body`` (a Responses request to OpenAI's own API) without the reasoning items OpenAI
    cannot resolve; the same bytes when it holds none."""
    if _MARKED not in body:
        if not count_pairs(body, b"store", b"false"):
            return body
        reasoning = count_pairs(body, b"type", b'"reasoning"')
        # encrypted contents with a value, less the compactions' own
        encrypted = sum(v[:1] == b'"' and v != b'""' for v in values_of(body, b"encrypted_content"))
        if reasoning <= encrypted - count_pairs(body, b"type", b'"compaction"'):
            return body  # as many encrypted contents as items that need one
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body  # the upstream's to refuse, in its words
    items = data.get("input") if isinstance(data, dict) else None
    if not isinstance(items, list):
        return body
    stored = data.get("store") is not False
    kept = [item for item in items if not _unresolvable(item, stored)]
    if len(kept) == len(items):
        return body
    data["input"] = kept
    log.info("dropped %d reasoning item(s) OpenAI cannot resolve", len(items) - len(kept))
    return orjson.dumps(data)


def is_bridged(item: dict[str, Any]) -> bool:
    """Whether a reasoning item is one a bridge made (its id marked)."""
    item_id = item.get("id")
    return isinstance(item_id, str) and item_id.startswith(_PREFIX + MARK)


def _unresolvable(item: Any, stored: bool) -> bool:
    if not isinstance(item, dict) or item.get("type") != "reasoning":
        return False
    if is_bridged(item):
        return True
    encrypted = item.get("encrypted_content")
    return not stored and not (isinstance(encrypted, str) and encrypted)
