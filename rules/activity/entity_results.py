"""Entities in structured tool results: a JSON object carrying an id and a name or type is an
entity (an issue a tracker tool opened, the customers a query returned, the pod a deploy tool
made). Learned from the result's shape and the tool's own words, never from a list of tool
names: the kind is the object's ``object``/``entity_type`` field, else the key its list sits
under (``{"customers": […]}``), else the noun of the tool's name or of its ``{kind}_id`` argument,
else its ``type``; the verb of the tool's name (``create``, ``close``, ``search`` …: the
``entities`` pack) says whether the call made, changed, ended or listed what it returned. Each
listed object keeps its position in the list (``listed_in`` the call).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import orjson

from rules.activity.entity_pack import MAX_BY_CHARS, EntityPack, Made

_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")  # create_issue, createIssue, HTTPGet
_KIND = re.compile(r"[a-z][a-z_]{1,30}")
MAX_NAME_CHARS = 120
MAX_ATTR_CHARS = 80
MAX_ID_CHARS = 100


def name_words(name: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(name[:200])]


def singular(word: str) -> str:
    """customers -> customer, companies -> company, addresses -> address (an approximation)."""
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "ches", "shes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")) and len(word) > 3:
        return word[:-1]
    return word


def _tool_terms(pack: EntityPack, name: str) -> tuple[str | None, str | None]:
    """(the action the tool's name says, the kind it names)."""
    words = name_words(name)
    verb = next((i for i, w in enumerate(words) if w in pack.result_verbs), None)
    action = pack.result_verbs[words[verb]] if verb is not None else None
    skip = set(pack.results.get("not_kinds") or ())
    # the verb's own word is no kind; any other may be ("create_issue", "file_issue")
    nouns = [w for i, w in enumerate(words) if i != verb and w not in skip and not w.isdigit()]
    return action, (singular(nouns[-1]) if nouns else None)


def _scalar(value: Any, limit: int) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        text = " ".join(str(value).split())
        return text if 0 < len(text) <= limit else None
    return None


def canonical(pack: EntityPack, kind: str) -> str:
    """A kind under its usual name: ``tickets`` -> ``issue`` (the pack's ``kind_aliases``)."""
    word = singular(kind.lower())
    return str((pack.results.get("kind_aliases") or {}).get(word, word))


def _object_kind(pack: EntityPack, obj: Mapping[str, Any], fallback: str | None) -> str | None:
    """The object's own kind field (``object``, ``entity_type``), else its ``type`` when that
    names a known kind, else ``fallback`` (its list's key, the tool's noun), else any ``type``."""
    keys = list(pack.results.get("kind_keys") or ())
    known = set(pack.results.get("known_kinds") or ())
    loose = [obj.get(k) for k in keys if k in ("type", "kind")]
    for key in keys:
        value = obj.get(key)
        if isinstance(value, str) and _KIND.fullmatch(value.lower()):
            word = singular(value.lower())
            if key not in ("type", "kind") or word in known:
                return canonical(pack, word)
    if fallback:
        return canonical(pack, fallback)
    for value in loose:
        if isinstance(value, str) and _KIND.fullmatch(value.lower()):
            return canonical(pack, value)
    return None


def _object_id(pack: EntityPack, obj: Mapping[str, Any], kind: str | None) -> str | None:
    for key in pack.results.get("id_keys") or ():
        key = str(key).replace("{kind}", kind or "\0")
        value = _scalar(obj.get(key), MAX_ID_CHARS)
        if value is not None and value not in ("true", "false"):
            return value
    return None


def _made(
    pack: EntityPack,
    obj: Mapping[str, Any],
    kind: str | None,
    action: str,
    by: str,
    listed: tuple[str, int] | None,
) -> Made | None:
    kind = _object_kind(pack, obj, kind)
    if kind is None:
        return None
    ident = _object_id(pack, obj, kind)
    if ident is None:
        return None
    name = next(
        (
            v
            for k in pack.results.get("name_keys") or ()
            if (v := _scalar(obj.get(k), MAX_NAME_CHARS))
        ),
        ident,
    )
    attrs = [
        (str(k), v)
        for k in pack.results.get("attr_keys") or ()
        if (v := _scalar(obj.get(k), MAX_ATTR_CHARS)) is not None
    ]
    rel: tuple[tuple[str, str], ...] = ()
    if listed is not None:
        attrs.append(("position", str(listed[1])))
        rel = (("listed_in", listed[0]),)
    return Made(kind, ident, action, name, tuple(attrs[:8]), rel, by)


def _lists(
    data: Any, kind: str | None
) -> Iterator[tuple[str | None, Sequence[Any] | Mapping[str, Any]]]:
    """(kind from its key, a list of objects or one object) within two levels of the result."""
    if isinstance(data, list):
        yield kind, data
        return
    if not isinstance(data, Mapping):
        return
    yield kind, data
    for key, value in list(data.items())[:50]:
        if (
            isinstance(value, (list, Mapping))
            and isinstance(key, str)
            and _KIND.fullmatch(key.lower())
        ):
            inner = None if key.lower() in ("data", "items", "results", "records", "rows") else key
            sub = singular(inner.lower()) if inner else kind
            if isinstance(value, list):
                yield sub, value
            elif isinstance(value, Mapping):
                yield sub, value
                for k2, v2 in list(value.items())[:50]:
                    if isinstance(v2, list) and isinstance(k2, str) and _KIND.fullmatch(k2.lower()):
                        yield singular(k2.lower()), v2


def result_entities(
    pack: EntityPack, tool: str, args: Mapping[str, Any], result: str, call: str
) -> list[Made]:
    """The entities a call of ``tool`` with ``args`` showed in its JSON ``result``."""
    text = result.strip()
    limit = int(pack.results.get("max_chars") or 200_000)
    action, kind = _tool_terms(pack, tool)
    by = _by(tool, args)
    out: list[Made] = []
    data: Any = None
    if text[:1] in ("{", "[") and len(text) <= limit:
        try:
            data = orjson.loads(text)
        except orjson.JSONDecodeError:
            data = None
    cap = int(pack.results.get("max_entities") or 20)
    for sub_kind, found in _lists(data, kind):
        if isinstance(found, Mapping):
            made = _made(pack, found, sub_kind, action or "list", by, None)
            if made is not None and action in (None, "list") and made.kind != sub_kind:
                made = None  # a wrapper object ({"type": "result"}) is no entity of its own
            if made is not None:
                out.append(made)
                break
            continue
        objects = [o for o in found if isinstance(o, Mapping)][:cap]
        listed = [
            _made(
                pack,
                o,
                sub_kind,
                "list" if action in (None, "list") else action,
                by,
                (f"call:{call}", i + 1),
            )
            for i, o in enumerate(objects)
        ]
        if any(m is not None for m in listed):
            out.extend(m for m in listed if m is not None)
            break
    if not out and action == "delete" and kind:
        ident = _object_id(pack, args, kind)  # delete_customer(customer_id=…) -> {"deleted": true}
        if ident is not None:
            out.append(Made(kind, ident, "delete", ident, (), (), by))
    return out


def _by(tool: str, args: Mapping[str, Any]) -> str:
    parts = [f"{k}={s}" for k in list(args)[:4] if (s := _scalar(args[k], 40))]
    text = f"{tool}({', '.join(parts)})"
    return text if len(text) <= MAX_BY_CHARS else text[: MAX_BY_CHARS - 1] + "…"
