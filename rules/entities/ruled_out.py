"""A resolution the user's own words rule out: "delete the folder you created, not beta" read
the newest folder, beta, as meant. The entity's name said after a negation ("not beta", "no
beta", "nicht beta", "pas beta", "не beta", "不是beta", "betaじゃなくて", "beta 말고") turns the
resolution into an abstention (``ruled_out``), its entity a candidate. Linear: each pattern is one
name, escaped, between fixed words."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from typing import Any

from rules.entities.whole_words import occurrences, word_part
from rules.report import Reference

_NEGATION = r"(?:not|no|nicht|kein\w{0,3}|pas|não|nao|не|ни)"
_ARTICLE = r"(?:(?:the|la|le|el|los|las|die|der|das|den|o|a|os|as|l')\s*)?"


# What negates a name: said before it ("not the redis one", "不是 redis"), ending where it
# starts (searched over the few characters before it; a lookbehind sees the text before them),
# or after it ("redisじゃなく", "redis 말고")
_NEGATED_BEFORE = re.compile(rf"(?<![\w-]){_NEGATION}\s{{1,16}}{_ARTICLE}\Z|不是\s{{0,16}}\Z")
_BEFORE_REACH = 48
_NEGATED_AFTER = re.compile(
    r"\s{0,16}(?:じゃなく|ではなく|でなく|말고|가\s{0,4}아니라|이\s{0,4}아니라)"
)


def _negated(name: str, low: str) -> bool:
    """Whether ``low`` negates ``name`` (found without a pattern compiled for it:
    ``rules.entities.whole_words``)."""
    for start, end in occurrences(low, name, word_part, before=False, after=False):
        if not (end < len(low) and word_part(low[end])) and _NEGATED_BEFORE.search(
            low, max(0, start - _BEFORE_REACH), start
        ):
            return True
        if not (start and word_part(low[start - 1])) and _NEGATED_AFTER.match(low, end):
            return True
    return False


def ruled_out(ref: Reference, text: str) -> Reference:
    """``ref`` as an abstention when ``text`` negates its entity's name (or id), else itself."""
    entity = ref.get("entity")
    if not entity:
        return ref
    low = text.lower()
    path = str(entity.get("path") or "")
    for name in names_of(entity):
        name = name.strip().lower()
        if 2 <= len(name) <= 200 and name in low and _negated(name, low):
            return abstention(ref, "ruled_out", path)
    return ref


# abstentions the user's own words made: their one candidate is the thing ruled out, not a
# question for the resolver model (which sees neither the negation's sense nor the ages)
USERS_WORD = frozenset({"ruled_out", "too_recent"})


def names_of(entity: Mapping[str, Any]) -> set[str]:
    """What the user may call an entity: its name, its id, its path's last part."""
    path = str(entity.get("path") or "")
    return {str(entity.get("name") or ""), str(entity.get("id") or ""), posixpath.basename(path)}


def abstention(ref: Reference, why: str, path: str) -> Reference:
    """``ref`` turned into an abstention (``why``), its entity's ``path`` the one candidate."""
    dropped = ("pointer", "call_id", "age_s", "resolved_by")
    out: Reference = {k: v for k, v in ref.items() if k not in dropped}  # type: ignore[assignment]
    out["entity"] = None
    out["abstained"] = why
    out["candidates"] = [path] if path else []
    return out
