"""The randomised warm threshold (prune's ``warm_threshold: randomised``): a cut is made once
carrying its tokens has cost a share ``z`` of its price, ``z`` drawn from the density
``e^z / (e^1 - e^g)`` on ``[g, 1]`` (``g``: prune's ``warm_threshold_floor``), instead of the
whole price (break-even, ``z = 1``). The draw is a stable hash of a key (the session and the
cut's first message), so the rule stays deterministic: same input and state, same bytes out.

**Bound** (Karlin, Manasse, McGeoch and Owicki, 1994, randomised ski rental). One cut of price
``P`` whose tokens cost ``c`` a request to carry; the session ends after carrying would have cost
``t`` (in units of ``P``); the best schedule pays ``min(t, 1)`` (carry to the end, or cut at
once). The rule pays ``z + 1`` when ``z < t`` (carried ``z``, then the cut), else ``t``. With
``D = e - e^g``, for ``g ≤ t ≤ 1``::

    E[cost] = ∫_g^t (z + 1) e^z dz / D + t (e - e^t) / D = (t e - g e^g) / D

(``∫ (z + 1) e^z dz = z e^z``), a ratio to ``t`` that never falls as ``t`` grows, up to
``(e - g e^g) / D`` at ``t = 1``; for ``t ≥ 1`` the cost is ``E[z] + 1 = (e - g e^g) / D``
against 1; for ``t < g``, ``t`` against ``t``. So whatever the session's length::

    E[online] ≤ (e - g e^g) / (e - e^g) × best      (``expected_ratio``)

``e / (e − 1) ≈ 1.58`` with ``g = 0`` (against break-even's 2), about 1.77 with ``g = 1/2``;
and for every draw (the worst case) at most ``(1 + g) / g`` (3 with ``g = 1/2``; unbounded
with ``g = 0``). The expectation is over the hash: it holds for any session not chosen after
seeing the draw (an oblivious adversary), as a distribution over keys, not for one session.
Requests come whole, so carrying grows in steps of ``c``: a cut is made at the first request
whose carrying reaches ``z P``, up to one request's carrying past it (the tests measure the
discrete figure). Like break-even's, the bound is that of one cut at a fixed price: the price
grows with the suffix behind the edit, so over a session it holds per cut, not for the
schedule. The bound is on cost; measured on saving against direct in the first 40 requests, the
rule saves less than break-even (docs/rules/prune.md: a cut whose session ends before it pays
costs nothing under break-even)."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence

DIGEST_BYTES = 8
_SPAN = float(1 << (8 * DIGEST_BYTES))


def uniform(key: str) -> float:
    """A number in ``[0, 1)`` from a stable hash of ``key`` (blake2b; the same on every run and
    machine)."""
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=DIGEST_BYTES).digest()
    return int.from_bytes(digest, "big") / _SPAN


def share(u: float, floor: float = 0.0) -> float:
    """The share of its price a cut waits for: ``u`` (uniform on ``[0, 1)``) through the inverse
    of the CDF of ``e^z / (e - e^g)`` on ``[g, 1]``: ``z = ln(e^g + u (e - e^g))``."""
    g = min(max(floor, 0.0), 1.0)
    low = math.exp(g)
    return min(max(math.log(low + u * (math.e - low)), g), 1.0)


def drawn(key: str, floor: float = 0.0) -> float:
    """The share of its price the cut keyed ``key`` waits for."""
    return share(uniform(key), floor)


def expected_ratio(floor: float = 0.0) -> float:
    """The bound on the expected cost over the best schedule's, whatever the session's length
    (see the module docstring): ``(e - g e^g) / (e - e^g)``."""
    g = min(max(floor, 0.0), 1.0)
    if g >= 1.0:
        return 2.0  # break-even
    return (math.e - g * math.exp(g)) / (math.e - math.exp(g))


def worst_ratio(floor: float = 0.0) -> float:
    """The bound for every draw: ``(1 + g) / g`` (infinite with ``g = 0``)."""
    g = min(max(floor, 0.0), 1.0)
    return (1 + g) / g if g > 0 else math.inf


def thresholds(
    mode: str, floor: float, session: str, anchors: Sequence[str]
) -> Callable[[int], float] | None:
    """The share of its price the cut from message ``i`` on waits for, by prune's
    ``warm_threshold``: None for ``break_even`` (the whole price); ``randomised``, drawn by the
    session and the anchor of the cut's first message (each cut its own draw);
    ``randomised_session``, one draw for the session."""
    if mode == "break_even":
        return None
    if mode == "randomised_session":
        z = drawn(f"{session}|", floor)
        return lambda i: z
    return lambda i: drawn(f"{session}|{anchors[i] if i < len(anchors) else i}", floor)
