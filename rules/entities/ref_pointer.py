"""What a resolved reference says about its entity, in the model's terms: a self-contained
description ("git branch feat/x (created by git checkout -b feat/x)", "customer Acme Corp (id
cus_2; status flagged), item 2 of the result of search_customers(status=flagged)") and the
semantic pointer a sub-agent gets: that description, the identifier, the session it came from,
the sessions walked to find it and the confidence. Deterministic: no model writes it, unless the
optional resolver model was asked to (``with_model_description``: its line replaces the
description; the identifier, kind, session and confidence stay the rule's).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rules.activity.entity_pack import load_entity_pack
from rules.report import ChainStep, Pointer, Reference

_DONE = {"create": "created", "modify": "changed", "delete": "ended", "list": "shown"}
_QUIET = ("position", "url", "html_url")
_RUN = (
    "process",
    "container",
    "pod",
    "deployment",
)  # made by starting them  # said otherwise, or too long for a line


def describe(e: Mapping[str, Any]) -> str:
    """One line about an entity beyond files, from what its calls showed: "git branch feat/x
    (created by git checkout -b feat/x)"."""
    kind = str(e.get("type"))
    name, ident = str(e.get("name") or e.get("id")), str(e.get("id"))
    found = e.get("attrs")
    attrs: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    parts = [f"id {ident}"] if ident != name and not ident.startswith("/") else []
    parts += [f"{k} {v}" for k, v in attrs.items() if k not in _QUIET and str(v) != ident][:3]
    listed = next((r[1] for r in e.get("rel") or () if r[0] == "listed_in"), None)
    if listed and attrs.get("position"):
        parts.append(f"item {attrs['position']} of the result of {e.get('by')}")
    elif e.get("by"):
        done = _DONE.get(str(e.get("action")), str(e.get("action")))
        done = "started" if done == "created" and kind in _RUN else done
        parts.append(f"{done} by {e.get('by')}")
    text = named(e)
    return f"{text} ({'; '.join(parts)})" if parts else text


def named(e: Mapping[str, Any]) -> str:
    """An entity beyond files in a few words: "git branch feat/x", "customer Globex"."""
    return f"{load_entity_pack().label(str(e.get('type')))} {e.get('name') or e.get('id')}"


def with_age(description: str, age_s: int | None) -> str:
    """``description`` with how long before the question its call was: "(…, 2 min ago)"."""
    if age_s is None:
        return description
    age = (
        f"{age_s} s"
        if age_s < 60
        else f"{age_s // 60} min"
        if age_s < 3600
        else f"{age_s // 3600} h"
    )
    if description.endswith(")"):
        return f"{description[:-1]}, {age} ago)"
    return f"{description} ({age} ago)"


def pointer(
    e: Mapping[str, Any], ref: Reference, chain: Sequence[ChainStep], session: str
) -> Pointer:
    """The semantic pointer of a resolved reference."""
    entity: Mapping[str, Any] = ref.get("entity") or {}
    return {
        "description": str(entity.get("description") or f"the {e.get('type')} {e.get('path')}"),
        "id": str(e.get("id", e.get("path"))),
        "kind": str(e.get("type")),
        "session": session,
        "session_path": [str(c["session"]) for c in chain if "session" in c],
        "confidence": float(ref.get("confidence", 0.0)),
    }


MAX_MODEL_DESCRIPTION = 200  # characters of a description the resolver model wrote


def with_model_description(ref: Reference, said: Any) -> Reference:
    """``ref`` with its pointer described in the resolver model's words (``said``: {description,
    model}), when it wrote some: one line, at most MAX_MODEL_DESCRIPTION characters. The
    identifier is the rule's, and the block names it after the model's words."""
    pointer_ = ref.get("pointer")
    entity = ref.get("entity")
    if not isinstance(said, Mapping) or pointer_ is None or not isinstance(entity, Mapping):
        return ref
    text = " ".join(str(said.get("description") or "").split())[:MAX_MODEL_DESCRIPTION].strip()
    if not text:
        return ref
    described = ref.copy()
    described["pointer"] = {
        **pointer_,
        "description": text,
        "described_by": str(said.get("model") or "resolver"),
    }
    ident = pointer_["id"]
    described["entity"] = {**entity, "description": f"{text} (id {ident})"}
    return described
