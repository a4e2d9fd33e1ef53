"""How often a later call copies from an earlier tool result, by what prune can see of it: the
figures of ``rules/packs/reuse.yaml`` (``rules/context/need.py`` reads them).

For each replayed request ``q`` (a prefix ``messages[:q]``) and each tool result ``r`` before it,
one sample: the result's action kind as prune's observations classify it (read, write, list,
run, plan, other), whether ``need.judge`` calls it needed on that request, its age (assistant
turns from ``r`` to ``q``, bucketed as ``copied_literals.age_bucket``) and whether a call at or
after ``q`` copies a literal whose source is ``r`` (``copied_literals``: the ground truth).

The pack: P(copied later | kind, needed) for each kind with at least ``MIN_SAMPLES`` samples in
both cells (and ``any`` over all kinds), and the age factor: P(copied later | age bucket) over
P(copied later), keyed by the bucket's last turn."""

from __future__ import annotations

from collections import Counter
from typing import Any

from bench.copied_literals import AGE_BUCKETS, MIN_SAMPLES, Copied, age_bucket
from rules.activity.observations import observations
from rules.base import Message
from rules.context import need
from rules.messages import role

Sample = tuple[str, bool, str, bool]  # kind, needed, age bucket, copied later
AGE_BOUNDS = {"<=5": 5, "6-20": 20, ">20": 100_000}


def need_samples(
    messages: list[Message], requests: list[int], copied: list[Copied]
) -> Counter[Sample]:
    """The samples of one conversation's replayed requests (``requests``: each prefix's length,
    ascending; ``copied``: the literals of the calls they produced)."""
    last_copy: dict[int, int] = {}  # result -> the last call copying a literal it is source of
    for c in copied:
        last_copy[c.source] = max(last_copy.get(c.source, -1), c.call_index)
    assistants = [0]
    for m in messages:
        assistants.append(assistants[-1] + (role(m) == "assistant"))
    out: Counter[Sample] = Counter()
    for q in requests:
        prefix = messages[:q]
        obs = observations(prefix)
        judged = need.judge(prefix, obs, [o.result_index for o in obs])
        for o in obs:
            r = o.result_index
            age = max(1, assistants[min(q + 1, len(messages))] - assistants[r + 1])
            needed = judged[r].needed
            out[(o.action.kind, needed, age_bucket(age), last_copy.get(r, -1) >= q)] += 1
    return out


def _rate(cells: Counter[Sample], keep: Any) -> tuple[int, int]:
    samples = sum(n for key, n in cells.items() if keep(key))
    hits = sum(n for key, n in cells.items() if keep(key) and key[3])
    return samples, hits


def reuse_pack(cells: Counter[Sample], source: str, conversations: int) -> dict[str, Any]:
    """The pack's content (see the module docstring)."""
    samples, hits = _rate(cells, lambda k: True)
    base = hits / samples if samples else 0.0
    reuse: dict[str, dict[str, float]] = {}
    kinds = [*sorted({k[0] for k in cells}), "any"]
    for kind in kinds:
        row = {}
        for needed, label in ((True, "needed"), (False, "other")):
            n, k = _rate(cells, lambda key: (kind in ("any", key[0])) and key[1] == needed)  # noqa: B023
            if n >= MIN_SAMPLES:
                row[label] = round(k / n, 4)
        if len(row) == 2:
            reuse[kind] = row
    age_factor = {}
    for bucket in AGE_BUCKETS:
        n, k = _rate(cells, lambda key: key[2] == bucket)  # noqa: B023
        if n >= MIN_SAMPLES and base > 0:
            age_factor[AGE_BOUNDS[bucket]] = round(k / n / base, 3)
    return {
        "source": source,
        "conversations": conversations,
        "samples": samples,
        "reuse": reuse,
        "age_factor": age_factor,
    }
