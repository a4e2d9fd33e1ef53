"""What carrying each reclaimable step has cost, kept in prune's memory of the session: the
hindsight the warm break-even rule (``warm_cut``) weighs a cut's price against, and when the
next look at it is due.

Carrying a token costs ``r`` each request it is read from the cache. The memory keeps it step by
step (each planned edit by its stage and its message's anchor): at a look, a step's carried cost
grows by ``r`` times what it freed at the previous look, for each request since; a step new to
the offer starts at nothing, and a step no longer offered (a result needed again, a message the
client dropped) leaves with its figure. A cut is credited with its own steps' carrying: what the
stale results it removes have really cost, not a share of the session's sum by size (which
credited a fresh result at the tail with what an old one had cost, and kept crediting a result
that had become needed again).

**Between looks** nothing is planned: the next look's ``carry`` adds the requests since at the
figures kept. That equals looking every request for each step offered at both looks whose size
did not change between them (a result's size does not; its cap comes when it first appears).
It differs, and is stated so, for a step first offered between two looks (counted from the look
that sees it: less than it has cost, so a cut comes later, never sooner) and for one that left
the offer and came back between two looks (counted as if it had stayed; a result needed again
stays needed while a call among the last 20 names it, far longer than the span between looks).
A look is due (``due``) by the first request at which some cut of the last look could have paid
at the price it had then: a cut's price only rises while it waits (the prompt behind its edit
grows; its loss weighs the whole prompt), so no cut of that look pays sooner. A new step at the
tail can lower a deeper cut's bust, and a result's chance of reuse falls with age: the look every
``prune.WARM_LOOK_EVERY``-th request catches those. One cut is free only on the request it
appears: a result at the end of the cached prompt superseded by this request's run of the same
command (``warm_cut.free_now``); prune asks for it on every warm request between looks, of the
supersede stage over the last results alone."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeVar


class Planned(Protocol):
    """A planned step as this module reads it (``cut_price.Step``, a frozen dataclass)."""

    @property
    def stage(self) -> str: ...
    @property
    def freed(self) -> int: ...
    @property
    def first(self) -> int: ...


S = TypeVar("S", bound=Planned)


def step_key(stage: str, anchor: str) -> str:
    """A planned step's identity across requests: its stage and its first message's anchor."""
    return f"{stage}:{anchor}"


def carry(
    stale: Mapping[str, tuple[float, int]], offered: Iterable[tuple[str, int]], requests: int,
    read_ratio: float,
) -> dict[str, tuple[float, int]]:  # fmt: skip
    """Each offered step's (carried, freed) now: what it had carried at the last look plus ``r``
    times what it freed then, for each of the ``requests`` since; a step new to the offer starts
    at nothing (it has cost nothing yet). Steps not offered are left out."""
    out: dict[str, tuple[float, int]] = {}
    for key, freed in offered:
        carried, before = stale.get(key, (0.0, 0))
        out[key] = (carried + read_ratio * before * max(requests, 0), freed)
    return out


def seed(carried: float, offered: Iterable[tuple[str, int]]) -> dict[str, tuple[float, int]]:
    """Per-step figures from a session's sum alone (a memory kept without them): each step its
    share by the tokens it frees."""
    pairs = list(offered)
    total = sum(freed for _, freed in pairs)
    return {key: (carried * freed / total if total else 0.0, freed) for key, freed in pairs}


def load(value: Any) -> dict[str, tuple[float, int]]:
    """The stored per-step figures (an object of [carried, freed]); anything else: none."""
    out: dict[str, tuple[float, int]] = {}
    if isinstance(value, Mapping):
        for key, v in value.items():
            if (
                isinstance(v, (list, tuple))
                and len(v) == 2
                and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)
            ):
                out[str(key)] = (float(v[0]), int(v[1]))
    return out


def dump(stale: Mapping[str, tuple[float, int]]) -> dict[str, list[float | int]]:
    return {k: [round(c, 1), f] for k, (c, f) in stale.items()}


def own(
    steps: Sequence[S],
    anchors: Sequence[str],
    kept: Mapping[str, tuple[float, int]],
    since: int,
    carried: float,
    read_ratio: float,
) -> tuple[list[S], dict[str, tuple[float, int]]]:
    """The planned steps with what carrying each has cost (``Step.carried``), and the figures to
    keep: ``kept`` from the last look, ``since`` requests ago; none kept, the session's
    ``carried`` shared by size (``seed``). Steps on one message in one stage are one (their
    tokens added, its figure shared by them). Drops (never taken warm) are left as they are."""
    offered: dict[str, int] = {}
    keys = [step_key(s.stage, anchors[s.first]) if s.stage != "drop" else "" for s in steps]
    for s, key in zip(steps, keys, strict=True):
        if key:
            offered[key] = offered.get(key, 0) + s.freed
    if kept or carried <= 0:
        stale = carry(kept, offered.items(), since, read_ratio)
    else:  # kept before per-step figures
        stale = seed(carried, offered.items())
    out = []
    for s, key in zip(steps, keys, strict=True):
        if key:
            share = s.freed / offered[key] if offered[key] > 0 else 0.0
            s = dataclasses.replace(s, carried=stale[key][0] * share)  # type: ignore[type-var]
        out.append(s)
    return out, stale


def due(share: float, freed: int, price: float, read_ratio: float) -> int:
    """Requests until a cut that has carried ``share`` of its ``price`` and frees ``freed``
    tokens pays at that price (at least 1); a cut that carries nothing: never (a large number)."""
    rate = read_ratio * freed
    if share >= price:
        return 1
    if rate <= 0:
        return 1 << 30
    return max(math.ceil((price - share) / rate), 1)
