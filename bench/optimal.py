"""The least-cost compaction schedule of one conversation with its future known: a lower bound
for an online scheduler (``prune``) making the same edits, under an analytic cache model.

**Inputs** (``Inputs``, gathered by ``bench/optimal_inputs.py`` from prune's own planner): the
size of each message in tokens (the rule's token counter, a tool result capped as prune caps it
when it first appears), the number of messages of each request (a conversation's requests are
growing prefixes of it), and for each request the items the planner could elide then (the
supersede, mask and shrink steps of ``Run.plan`` on that request with an empty state, under the
budget), each named by its message index (stable across requests) with the tokens it frees.

**Edits.** A compaction at request ``t`` elides every item eligible at ``t`` or at any earlier
request (eligibility is cumulative: an item once eligible stays so, and an overlay never
restores what it elided); later requests carry the compacted prompt. So the set elided after a
schedule is fixed by its last compaction alone, and the state of the dynamic programme is the
request of the last compaction (or none): O(n²) per conversation for n requests.

**Cost of a request** (warm cache every turn, in fresh-token units): the previous request's
prompt is read at ``r`` up to the first message that changed, the rest is written at ``w`` (1,
or 1.25 for Anthropic's writes). Without a compaction at ``t`` the previous prompt is a prefix
of this one; with one, the read stops at the earliest newly elided message (the bust). The first
request reads nothing.

**Budget.** A request whose prompt is over the budget must compact (when a compaction there
frees anything), as prune is forced to; drops are not modelled, so a prompt still over the
budget after every elision is left as it is.

**Simplifications.** No minimum cacheable prefix, no 128-token read granularity, no TTL (every
request warm), no inject blocks, a placeholder's tokens taken from the planner's estimate
(``freed``), no other rule's edits; the planner's eligibility is taken as it is with an empty
state. The replay's figures are measured on the emulated cache; these are the analytic model's,
so their ratio compares savings shares, not costs."""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Inputs:
    """One conversation, as the dynamic programme reads it (see the module docstring)."""

    sizes: Sequence[int]  # tokens of each message of the whole conversation
    lengths: Sequence[int]  # messages in each request
    eligible: Sequence[Mapping[int, int]]  # per request: message index -> tokens freed
    raw_sizes: Sequence[int] | None = None  # uncapped sizes (direct), None: ``sizes``


@dataclass(frozen=True)
class Schedule:
    cost: float
    compactions: tuple[int, ...]  # requests (0-based) that compact


def direct_cost(sizes: Sequence[int], lengths: Sequence[int], r: float, w: float) -> float:
    """Every request sent as it is: each reads its predecessor whole."""
    cum = _prefix_sums(sizes)
    cost, prev = 0.0, 0
    for n in lengths:
        prompt = cum[n]
        cached = min(prev, prompt)
        cost += r * cached + w * (prompt - cached)
        prev = prompt
    return cost


def _prefix_sums(values: Sequence[int]) -> list[int]:
    out = [0]
    for v in values:
        out.append(out[-1] + v)
    return out


def optimal_schedule(inputs: Inputs, r: float, w: float, budget: float = math.inf) -> Schedule:
    """The least-cost schedule (see the module docstring)."""
    n = len(inputs.lengths)
    if not n:
        return Schedule(0.0, ())
    cum = _prefix_sums(inputs.sizes)
    # state s = 0: no compaction yet; s = t + 1: the last compaction at request t
    elided: dict[int, int] = {}
    freed = [0]  # tokens freed by state s's elided set
    order: list[list[int]] = [[]]  # state s's elided indices, sorted
    before: list[list[int]] = [[0]]  # their prefix sums of freed tokens
    first_new = [math.inf]  # per state s > 0: the earliest index first eligible at its request
    for t in range(n):
        new = {i: f for i, f in inputs.eligible[t].items() if i not in elided}
        for i, f in new.items():
            elided[i] = min(f, inputs.sizes[i])
        first_new.append(min(new, default=math.inf))
        indices = sorted(elided)
        order.append(indices)
        before.append(_prefix_sums([elided[i] for i in indices]))
        freed.append(before[-1][-1])

    def prompt(t: int, s: int) -> int:
        return cum[inputs.lengths[t]] - freed[s]

    def kept_before(s: int, j: int) -> int:
        """Tokens of state ``s``'s prompt before message ``j``."""
        return cum[j] - before[s][bisect.bisect_left(order[s], j)]

    inf = math.inf
    best: dict[int, float] = {}  # state -> least cost so far
    back: list[int] = [0] * (n + 1)  # compaction state t + 1 -> the state it came from
    for t in range(n):
        current: dict[int, float] = {}
        # stay: no compaction at t
        if t == 0:
            current[0] = w * prompt(0, 0)
        else:
            for s, c in best.items():
                p, q = prompt(t, s), prompt(t - 1, s)
                if p > budget and freed[t + 1] > freed[s]:
                    continue  # over the budget while a compaction could free something
                current[s] = c + r * q + w * (p - q)
        # compact at t, from each state s; the earliest newly elided message busts the read
        target = t + 1
        if freed[target] > 0:
            top, came = inf, 0
            if t == 0:
                top = w * prompt(0, target)
            else:
                j = inf
                for s in range(t, -1, -1):  # s = t: the last compaction at t - 1
                    j = min(j, first_new[s + 1])
                    if s not in best or j == inf:
                        continue
                    c = best[s]
                    cached = min(prompt(t - 1, s), kept_before(s, int(j)))
                    total = c + r * cached + w * (prompt(t, target) - cached)
                    if total < top:
                        top, came = total, s
            if top < inf and top < current.get(target, inf):
                current[target] = top
                back[target] = came
        best = current
    final = min(best, key=lambda s: best[s])
    steps: list[int] = []
    s = final
    while s:
        steps.append(s - 1)
        s = back[s]
    return Schedule(best[final], tuple(reversed(steps)))
