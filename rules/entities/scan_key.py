"""What a question's second scan layer looks for, from what the sessions in reach hold
(``resolve_refs``): the sorts of entities beyond files and the object verbs their kinds take, as
one key ("objects|related#drop,push,revert"); a pattern that needs what none holds is not run."""

from __future__ import annotations

import functools
from collections.abc import Mapping

from rules.base import Context
from rules.entities import cache as entity_cache
from rules.entities.ref_lexicon import load_lexicons
from rules.entities.ref_scan import verb_groups


def held_sorts(ctx: Context, use_ancestors: bool) -> tuple[set[str], str]:
    """(kinds, sorts as "a|b") the sessions in reach hold beyond files, from the summary
    track_entities keeps: a pattern that needs what none holds is not run, a mention of a kind
    none holds is not resolved. Read on every request: no events are walked."""
    kinds: set[str] = set()
    sorts: set[str] = set()
    ancestors = ctx.ancestors if use_ancestors else ()
    for found in (
        ctx.state.get(entity_cache.SUMMARY),
        *(a.state.get(entity_cache.SUMMARY) for a in ancestors),
    ):
        if found:
            kinds.update(found.get("kinds") or ())
            sorts.update(found.get("sorts") or ())
    return kinds, "|".join(sorted(sorts))


@functools.lru_cache(maxsize=256)
def _with_verbs(sorts: str, kinds: tuple[str, ...], extra_packs: tuple[str, ...]) -> str:
    """The scan's key: the sorts present and the object verb groups the kinds held take
    ("objects|related#drop,push,revert"): a verb of no held kind is not looked for."""
    _, lexicons = load_lexicons(extra_packs)
    groups = verb_groups(lexicons[0].object_kinds, kinds) if lexicons else frozenset()
    return f"{sorts}#{','.join(sorted(groups))}"


# the last session summary's scan key: a session's next request holds the same summary object
_last_key: tuple[object, tuple[str, ...], str] = (None, (), "")


def scan_key(held: object, kinds: set[str] | None, sorts: str, extra_packs: tuple[str, ...]) -> str:
    """``_with_verbs`` of the kinds held (``kinds``, else the session summary ``held``'s)."""
    global _last_key
    if kinds is not None:
        return _with_verbs(sorts, tuple(sorted(kinds)), extra_packs)
    last, packs, key = _last_key  # one tuple, swapped whole: safe across threads
    if last is held and packs is extra_packs:
        return key
    found = held.get("kinds") if isinstance(held, Mapping) else None
    key = _with_verbs(sorts, tuple(sorted(found or ())), extra_packs)
    _last_key = (held, extra_packs, key)
    return key
