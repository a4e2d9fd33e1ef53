"""How much of what the agent copies next any pruning could keep under a budget: an upper bound
for ``bench.next_action``'s share configurations.

    .venv/bin/python -m bench.next_action_bound [--limit 0] [--max-requests 40] [--shares 50,30]

For each copied literal (``bench/copied_literals.py``) of a replayed request (``messages[:k]``),
the request's *floor* is what pruning must forward whatever it does: the system messages, the
protected evidence (``rules.context.evidence``: the task, the latest failure, the plan, the
latest tree, the last writes) and the current turn (``prune_stages.current_start`` on); every
other message counts 0 tokens (as if dropped without a trace, so the floor is a lower bound).
The budget is ``bench.next_action``'s: ``share`` of the largest replayed request of the
conversation (tiktoken), at most the model's window less the output reserve. A literal is:

- *in the floor* when its text is in the floor's messages (kept by any pruning);
- *result fits* when the floor plus its whole source result fits the budget (an oracle that
  knows the future keeps that result and drops everything else);
- *lines fit* when the floor plus only the source's lines holding it fit (an oracle that keeps
  single lines);
- *infeasible* otherwise: the floor alone, or with the line, is over the budget;
- *joint, no thrash*: the joint column with room for ``HEADROOM`` / 2 requests of the session's
  mean growth so far left free: a schedule compacting at most once per ``HEADROOM`` (5) requests
  holds a request that far under the budget on average (just after a compaction, 5 requests of
  growth; just before the next, none);
- *at depth*: in the floor, or the floor plus the whole source result fit half the budget, the
  depth a forced compaction goes down to (prune's ``target_ratio``) to leave room for growth.

Each literal is judged alone, so the shares are upper bounds (a request copying from several
results needs them all at once: the *joint* column keeps, per request, the sources needed by
most literals per token first while they fit, an achievable schedule for that request alone).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
from collections import Counter
from typing import Any

from bench.copied_literals import Copied, copied_literals
from bench.copied_literals import request_text as forwarded_text
from bench.cost import _counters, budget_of, model_of, spread
from rules.activity.observations import observations
from rules.base import Message
from rules.context import evidence, prune_stages
from rules.messages import role, text_of
from tests.support.traces import iter_conversations, request_prefixes

COLUMNS = ("in floor", "result fits", "lines fit", "infeasible")
DEPTH = 0.5  # prune's ``target_ratio``: a forced compaction goes down to this share of the budget
HEADROOM = 5  # requests of growth between compactions (the limit on thrash)


def _floor(prefix: list[Message]) -> list[int]:
    """Indices of the messages any pruning forwards (system, protected, the current turn)."""
    obs = observations(prefix)
    ev = evidence.find(prefix, obs)
    current = prune_stages.current_start(prefix, ev.first_user)
    keep = set(ev.protected) | set(range(current, len(prefix)))
    keep.update(i for i, m in enumerate(prefix) if role(m) == "system")
    return sorted(keep)


def _lines_with(text: str, literal: str) -> str:
    return "\n".join(line for line in text.split("\n") if literal in line) or literal


def judge(conv: dict[str, Any], max_requests: int, shares: tuple[float, ...]) -> Counter[str]:
    msgs = conv["messages"]
    prefixes = list(request_prefixes(msgs))[: max_requests or None]
    out: Counter[str] = Counter()
    if not prefixes:
        return out
    model = model_of(conv)
    counter = _counters().for_model(model)
    whole = [counter.count_messages(p) for p in prefixes]
    largest = max(whole)
    calls = {len(p): p for p in prefixes}
    request_of = {len(p): n for n, p in enumerate(prefixes)}
    by_call: dict[int, list[Copied]] = {}
    for c in copied_literals(msgs, until=len(prefixes[-1]) + 1):
        if c.call_index in calls:
            by_call.setdefault(c.call_index, []).append(c)
    for k, copied in by_call.items():
        prefix = calls[k]
        floor = _floor(prefix)
        floor_msgs = [prefix[i] for i in floor]
        floor_tokens = counter.count_messages(floor_msgs)
        floor_text = forwarded_text(floor_msgs)
        for share in shares:
            name = f"share{round(share * 100)}"
            budget = budget_of(model, max(256, int(largest * share)))
            out[f"{name} requests"] += 1
            out[f"{name} floor tokens"] += floor_tokens
            out[f"{name} budget tokens"] += budget
            out[f"{name} floor over budget"] += floor_tokens > budget
            needed: dict[int, int] = {}  # source -> literals it alone holds
            for c in copied:
                out[f"{name} literals"] += 1
                if c.literal in floor_text:
                    out[f"{name} in floor"] += 1
                    out[f"{name} joint"] += 1
                    out[f"{name} joint, no thrash"] += 1
                    out[f"{name} fits at depth"] += 1
                    continue
                source = text_of(prefix[c.source].get("content"))
                size = counter.count_message(prefix[c.source])
                if floor_tokens + size <= budget * DEPTH:
                    out[f"{name} fits at depth"] += 1
                if floor_tokens + size <= budget:
                    out[f"{name} result fits"] += 1
                    needed[c.source] = needed.get(c.source, 0) + 1
                elif floor_tokens + counter.count_text(_lines_with(source, c.literal)) <= budget:
                    out[f"{name} lines fit"] += 1
                else:
                    out[f"{name} infeasible"] += 1
            sizes = {s: counter.count_message(prefix[s]) for s in needed}
            out[f"{name} joint"] += _joint(needed, sizes, budget - floor_tokens)
            # no thrash: compacting at most once per HEADROOM requests, a request sits on
            # average HEADROOM / 2 requests of growth under the budget
            n = request_of[k]
            growth = (whole[n] - whole[0]) / n if n else 0.0
            out[f"{name} joint, no thrash"] += _joint(
                needed, sizes, budget - floor_tokens - int(HEADROOM / 2 * growth)
            )
    return out


def _joint(needed: dict[int, int], sizes: dict[int, int], room: int) -> int:
    """Literals kept when the sources holding most literals per token are kept first while
    they fit ``room``."""
    kept = 0
    for s in sorted(needed, key=lambda s: -needed[s] / max(sizes[s], 1)):
        if sizes[s] <= room:
            room -= sizes[s]
            kept += needed[s]
    return kept


def _job(args: tuple[dict[str, Any], int, tuple[float, ...]]) -> Counter[str]:
    return judge(*args)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--limit", type=int, default=0, help="conversations (0: all)")
    parser.add_argument("--max-requests", type=int, default=40, help="per conversation (0: all)")
    parser.add_argument("--shares", default="50,30", help="budget shares, percent")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    args = parser.parse_args(argv)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    shares = tuple(int(s) / 100 for s in args.shares.split(",") if s.strip())
    jobs = [(c, args.max_requests, shares) for c in spread(list(iter_conversations()), args.limit)]
    total: Counter[str] = Counter()
    if args.jobs > 1:
        with mp.get_context("fork").Pool(args.jobs) as pool:
            for part in pool.imap_unordered(_job, jobs, chunksize=1):
                total.update(part)
    else:
        for job in jobs:
            total.update(_job(job))
    reqs = f"the first {args.max_requests}" if args.max_requests else "all"
    print(f"\n{len(jobs)} conversations, {reqs} requests of each\n")
    heads = " | ".join(
        (*COLUMNS, "upper bound", "joint", "joint, no thrash", "at depth", "floor / budget")
    )
    print(f"| budget | literals | {heads} | floor over |")
    print("|---|---:|" + "---:|" * (len(COLUMNS) + 6))
    for share in shares:
        n = f"share{round(share * 100)}"
        lits = total[f"{n} literals"] or 1
        cells = " | ".join(f"{total[f'{n} {c}'] / lits:.1%}" for c in COLUMNS)
        bound = (total[f"{n} in floor"] + total[f"{n} result fits"]) / lits
        ratio = total[f"{n} floor tokens"] / max(total[f"{n} budget tokens"], 1)
        over = total[f"{n} floor over budget"] / max(total[f"{n} requests"], 1)
        print(
            f"| {n} | {total[f'{n} literals']:,} | {cells} | {bound:.1%} "
            f"| {total[f'{n} joint'] / lits:.1%} | {total[f'{n} joint, no thrash'] / lits:.1%} "
            f"| {total[f'{n} fits at depth'] / lits:.1%} "
            f"| {ratio:.2f} | {over:.1%} of requests |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
