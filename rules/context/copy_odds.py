"""The probability that the agent copies something from an old tool result later: a small table
model over what prune can see of the result, learned on the trace corpus
(``bench/copy_odds_learn.py`` writes ``rules/packs/copy_odds.yaml``; docs/rules/prune.md states
the figures and the command).

Features (``key``), each measured to matter:
- the action kind (read, run, list, write, plan, other);
- for a read, whether its file was changed since (an unchanged read still shows the file as it
  is: the agent copies ``old_str`` lines from it; a changed one mostly not);
- its size (characters: under 500, under 4,000, more): a long output holds more to copy;
- its age in assistant turns (up to 5, 6 to 20, 21 to 50, more: most results of a long
  session are over 20 turns old, and those over 50 are copied from five times less often);
- how recently a later call used it: one of the agent's last ``need.LATE_CALLS`` calls uses a
  name it showed or names the file it read (``lately``), else ``need``'s judgement (a recent
  call among the last 20 does, or it is a read of a file being edited: ``used``), else not;
- for a run, what it does (``rules/activity/run_class.py``: shows files, searches, builds or
  tests, other);
- how many of the names it shows (paths, identifiers, ids: ``digest.names``) no later result
  shows (none, 1 to 4, more): a literal is copied from the latest result that shows it, so a
  result whose names all came back later (a re-run, a re-read, a narrower search) has given up
  what it held.

The table holds P(copied later) for the full key and for coarser keys (a feature left out, in
``BACKOFF`` order); a lookup takes the most specific key the pack holds (one with enough
samples), else the base rate."""

from __future__ import annotations

import functools
from collections.abc import Mapping

from rules.packs import load_pack

PACK = "copy_odds"
SIZES = ((500, "s"), (4_000, "m"))  # characters: under each bound, that bucket; else "l"
AGES = ((5, "<=5"), (20, "6-20"), (50, "21-50"))  # turns: up to each bound; else ">50"
NEW_NAMES = ((1, "0"), (5, "1-4"))  # names no later result shows: under each bound; else "5+"
FIELDS = ("kind", "fresh", "size", "age", "used", "does", "new")
# Coarser keys tried in turn when the pack has no figure for the full one: the features whose
# effect is smallest go first. Each level that knows a read's freshness with what a run does and
# the new names, then the kind, freshness and new names alone (a read's freshness matters more
# than its age), then the levels without them.
BASE_LEVELS = (
    ("kind", "fresh", "size", "age", "used"),
    ("kind", "fresh", "size", "age"),
    ("kind", "fresh", "age", "used"),
    ("kind", "fresh", "age"),
    ("kind", "age"),
    ("age",),
)
BACKOFF = (
    *((*level, "does", "new") for level in BASE_LEVELS[:4]),
    ("kind", "fresh", "new"),
    *BASE_LEVELS,
)
DEFAULT = 0.05  # no pack at all


def size_bucket(chars: int) -> str:
    return next((name for bound, name in SIZES if chars < bound), "l")


def age_bucket(turns: int) -> str:
    return next((name for bound, name in AGES if turns <= bound), ">50")


def new_names_bucket(count: int) -> str:
    return next((name for bound, name in NEW_NAMES if count < bound), "5+")


def features(
    kind: str,
    changed: bool | None,
    chars: int,
    turns: int,
    used: bool,
    does: str,
    new_names: int | None,
    lately: bool = False,
) -> dict[str, str]:
    """A result's features; ``changed``: None when it is not a read; ``used``: need's
    judgement; ``does``: a run's ``run_class``; ``new_names``: how many names it shows that no
    later result shows; ``lately``: one of the agent's last few calls uses a name it shows or
    names the file it read."""
    fresh = "-" if changed is None else ("changed" if changed else "unchanged")
    return {
        "kind": kind,
        "fresh": fresh,
        "size": size_bucket(chars),
        "age": age_bucket(turns),
        "used": "lately" if lately else ("used" if used else "-"),
        "does": does if kind == "run" else "-",
        "new": "-" if new_names is None else new_names_bucket(new_names),
    }


def key(values: Mapping[str, str], fields: tuple[str, ...] = FIELDS) -> str:
    return "|".join(f"{f}={values[f]}" for f in fields)


def _probability(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ValueError(f"{PACK} pack: {what} is {value!r}, not a probability")
    return float(value)


@functools.lru_cache(maxsize=1)
def _table() -> tuple[dict[str, float], float]:
    """The shipped table, checked: a bad entry fails loudly (tests) instead of reading as 0.05."""
    pack = load_pack(PACK)
    rows = pack.get("odds") if isinstance(pack, Mapping) else None
    if not isinstance(rows, Mapping):
        raise ValueError(f"{PACK} pack: no 'odds' table")
    table = {str(k): _probability(p, f"odds[{k!r}]") for k, p in rows.items()}
    base = pack.get("base", DEFAULT)
    return table, _probability(base, "base")


@functools.lru_cache(maxsize=4096)
def _odds(values: tuple[str, ...]) -> float:
    table, base = _table()
    named = dict(zip(FIELDS, values, strict=True))
    for fields in BACKOFF:
        if named["new"] == "-" and "new" in fields:
            continue  # no names shown: the levels without the new names
        hit = table.get(key(named, fields))
        if hit is not None:
            return hit
    return base


def odds(values: Mapping[str, str]) -> float:
    """P(a later call copies from a result with these features)."""
    return _odds(tuple(values[f] for f in FIELDS))
