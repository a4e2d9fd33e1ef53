"""Gemini's pairing rule, as its API enforces it on ``contents``: a ``model`` turn with N
``functionCall`` parts is followed by a ``user`` turn with N ``functionResponse`` parts, in
order, with the calls' names (and ids, where both have one); no response answers nothing. The
adapter's final check of the forwarded body (``GeminiAdapter.violations``)."""

from __future__ import annotations

from typing import Any

from proxy.protocols.gemini_parts import call_of, parts_of, response_of


def pairing_violations(contents: Any, limit: int = 20, start: int = 0) -> list[str]:
    """What Gemini would refuse in ``contents`` (empty: nothing), at most ``limit`` findings.
    ``start``: the contents before it are known to hold nothing (a check of the same objects)."""
    found: list[str] = []
    items = contents if isinstance(contents, list) else []
    start = min(start, len(items))
    pending: list[dict[str, Any]] = []  # the calls of the model turn just before
    if start:
        before = items[start - 1]
        if isinstance(before, dict) and before.get("role") == "model":
            pending = [c for c in map(call_of, parts_of(before)) if c is not None]
    for i in range(start, len(items)):
        content = items[i]
        if len(found) >= limit:
            break
        parts = parts_of(content)
        responses = [r for r in map(response_of, parts) if r is not None]
        model = isinstance(content, dict) and content.get("role") == "model"
        if pending:
            if model:
                found.append(f"contents[{i}]: the calls of contents[{i - 1}] are not answered")
            elif len(responses) != len(pending):
                found.append(
                    f"contents[{i}]: {len(responses)} function responses for {len(pending)} calls"
                )
            else:
                for k, (call, response) in enumerate(zip(pending, responses, strict=True)):
                    if call.get("name") != response.get("name"):
                        found.append(f"contents[{i}]: response {k} does not name its call")
                    cid, rid = call.get("id"), response.get("id")
                    if cid and rid and cid != rid:
                        found.append(f"contents[{i}]: response {k} has another id than its call")
        elif responses:
            found.append(f"contents[{i}]: function responses answering no call")
        calls = [c for c in map(call_of, parts) if c is not None]
        pending = calls if model else []
        if responses and model:
            found.append(f"contents[{i}]: function responses in a model turn")
    if pending and len(found) < limit:
        found.append(f"contents[{len(items) - 1}]: the last model turn's calls are not answered")
    return found[:limit]
