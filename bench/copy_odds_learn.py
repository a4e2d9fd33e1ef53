"""Learn ``rules/packs/copy_odds.yaml``: P(a later call copies from an old tool result) by the
features ``rules/context/copy_odds.py`` names, fitted on one half of the corpus and checked on
the other.

    .venv/bin/python -m bench.copy_odds_learn [--max-requests 0] [--jobs 2] [--write]

**Samples** (as ``bench/reuse_learn.py``): for each replayed request ``q`` (the prefix
``messages[:q]``, the first ``--max-requests`` of each conversation; 0: all) and each tool result
``r`` before it, the result's features as ``need.judge`` gives them on that request, and the
label: a call at or after ``q`` copies a literal whose source is ``r`` (``copied_literals``, the
ground truth), and how many such literals (each call's copy of a literal once, as
``bench.next_action`` counts a lost one; a literal an earlier call's arguments hold is no copy).
Later results' names are counted as every configuration forwards them: a result
over prune's ``max_result_tokens`` by its cap's head and tail (``capped``; the compactions a
budget forces on top differ by configuration and are not replayed here).

**The split**: a conversation is in the fitting half when it is in ``bench.split``'s train half
(the first byte of the SHA-256 of its id even), else in the held-out half. The table is fitted
on the first; the held-out half reports the Brier score and the log loss of the table, of the
same table without what a run does and the new names (``plain``: ``copy_odds.BASE_LEVELS``), of
the older ``reuse`` table (kind, needed, age) and of the base rate, and the share of later copies
that come from the tenth of samples each table ranks most likely per character (what a forced
compaction keeps first), and the share of the literals copied later in that tenth; and the same
share in the tenth a table of the mean literals copied later ranks first (``literals``, by the
same keys, smoothed by one sample at the mean of all; a comparison: measured on the support
bench, ranking by it kept fewer literals on the held-out half, docs/rules/prune.md).

**The pack**: the rate of each key of every ``copy_odds.BACKOFF`` level with at least
``MIN_SAMPLES`` fitting samples from at least ``MIN_CONVERSATIONS`` conversations (add-one
smoothed), and the base rate. ``--write`` writes it. The samples of one conversation are far
from independent (each result is a sample at every later request), so a key's samples can be
many and still come from one or two conversations: its rate is then that conversation's.
"""

from __future__ import annotations

import argparse
import bisect
import math
import multiprocessing as mp
import os
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from bench.copied_literals import copied_literals
from bench.cost_config import model_of
from bench.cost_lanes import _counters
from bench.split import half_of
from proxy.tokens import ensure_offline_tiktoken
from rules.activity.observations import observations
from rules.base import Message
from rules.context import copy_odds, need, prune
from rules.context.capped import capped_text
from rules.messages import role, text_of
from tests.support.traces import iter_conversations, request_prefixes

MIN_SAMPLES = 200
# a key's rate stands for agents in general, not for the few conversations that filled it;
# 5, not 10: at 10 a kind few agents produce (a plan) loses every key and falls back to its
# age's rate (docs/rules/prune.md)
MIN_CONVERSATIONS = 5
PACK_PATH = "rules/packs/copy_odds.yaml"
HEADER = (
    "# P(a later tool call copies a literal from an old tool result), by the features\n"
    "# rules/context/copy_odds.py names (full key, then coarser keys). Made by the command in\n"
    "# ``source`` (bench/copy_odds_learn.py says how), fitted on half of the corpus.\n"
)

# full key, old reuse figure, characters, copied later, literals copied later (each call's copy of
# a literal once, as ``bench.next_action`` counts a lost one)
Sample = tuple[str, float, int, bool, int]


def fitting(conv_id: str) -> bool:
    return half_of(conv_id) == "train"


def samples(conv: dict[str, Any], max_requests: int) -> tuple[bool, Counter[Sample]]:
    msgs = conv["messages"]
    prefixes = list(request_prefixes(msgs))[: max_requests or None]
    out: Counter[Sample] = Counter()
    if not prefixes:
        return fitting(str(conv["id"])), out
    copies: dict[int, list[int]] = {}  # source result -> the call index of each copy, ascending
    for c in copied_literals(msgs, until=len(prefixes[-1]) + 1):
        copies.setdefault(c.source, []).append(c.call_index)
    forwarded = capped(msgs[: len(prefixes[-1])], model_of(conv))
    for prefix in prefixes:
        q = len(prefix)
        obs = observations(prefix)
        judged = need.judge(prefix, obs, [o.result_index for o in obs], forwarded=forwarded)
        for o in obs:
            n = judged[o.result_index]
            chars = len(text_of(prefix[o.result_index].get("content")))
            k = copy_odds.key(dict(n.features))
            at = copies.get(o.result_index, [])
            later = len(at) - bisect.bisect_left(at, q)
            out[(k, n.reuse, chars, later > 0, later)] += 1
    return fitting(str(conv["id"])), out


def capped(messages: list[Message], model: str) -> dict[int, str]:
    """The text of each tool result prune caps when it first appears (over the default
    ``max_result_tokens``), as it forwards it: head and tail (``rules.context.capped``)."""
    ensure_offline_tiktoken()
    tokens, limit = _counters().for_model(model), prune.Config().max_result_tokens
    out: dict[int, str] = {}
    for i, m in enumerate(messages):
        if role(m) == "tool" and tokens.count_message(m) > limit:
            text = text_of(m.get("content"))
            out[i] = capped_text(text, tokens.count_text(text), limit)
    return out


def _job(args: tuple[dict[str, Any], int]) -> tuple[str, bool, Counter[Sample]]:
    return str(args[0]["id"]), *samples(*args)


def _coarse(full: str, fields: tuple[str, ...]) -> str:
    values = dict(part.split("=", 1) for part in full.split("|"))
    return copy_odds.key(values, fields)


def fit(
    conversations: Mapping[str, Counter[Sample]],
    levels: tuple[tuple[str, ...], ...] = copy_odds.BACKOFF,
) -> dict[str, Any]:
    """The pack of the samples of each conversation (by id): every key of ``levels`` with
    enough samples from enough conversations (``copy_odds.BASE_LEVELS``: the table without what
    a run does and the new names, the held-out comparison): the rate of a later copy (``odds``,
    add-one smoothed) and the mean of the literals copied later (``literals``, smoothed by one
    sample at the mean of all)."""
    counts: dict[str, list[int]] = {}
    sources: dict[str, set[str]] = {}  # key -> the conversations its samples come from
    total = hits = copies = 0
    for conv_id, cells in conversations.items():
        for (full, _, _, copied, literals), n in cells.items():
            total, hits, copies = total + n, hits + n * copied, copies + n * literals
            for fields in levels:
                if "|new=-" in full and "new" in fields:
                    continue  # as copy_odds._odds: no names shown, the levels without them
                k = _coarse(full, fields)
                c = counts.setdefault(k, [0, 0, 0])
                c[0] += n
                c[1] += n * copied
                c[2] += n * literals
                sources.setdefault(k, set()).add(conv_id)
    mean = copies / max(total, 1)
    kept = {
        k: c
        for k, c in sorted(counts.items())
        if c[0] >= MIN_SAMPLES and len(sources[k]) >= MIN_CONVERSATIONS
    }
    return {
        "base": round(hits / max(total, 1), 4),
        "base_literals": round(mean, 4),
        "samples": total,
        "odds": {k: round((h + 1) / (n + 2), 4) for k, (n, h, _) in kept.items()},
        "literals": {k: round((c + mean) / (n + 1), 4) for k, (n, _, c) in kept.items()},
    }


def _predict(pack: dict[str, Any], full: str, table: str = "odds") -> float:
    """A key's figure of ``table`` (``odds`` or ``literals``) by ``copy_odds``'s backoff."""
    for fields in copy_odds.BACKOFF:
        if "|new=-" in full and "new" in fields:
            continue
        p = pack[table].get(_coarse(full, fields))
        if p is not None:
            return float(p)
    return float(pack["base" if table == "odds" else "base_literals"])


def evaluate(
    pack: dict[str, Any], cells: Counter[Sample], plain: dict[str, Any] | None = None
) -> dict[str, float]:
    """Brier and log loss of the table (and of ``plain``, a table without some features), the
    older reuse figures and the base rate; the share of later copies in the tenth of samples
    each table ranks most likely per character; and the share of the literals copied later in
    the tenth each ranks first per character, by its odds or (``literals``) by its expected
    literals (what a forced compaction keeps: the bench loses one literal per literal)."""
    tables = {"table": pack, **({"plain": plain} if plain else {})}
    scores: dict[str, float] = {}
    n_all = sum(cells.values())
    ranked: dict[str, list[tuple[float, int, int]]] = {name: [] for name in tables}
    by_literals: dict[str, list[tuple[float, int, int]]] = {}
    for (full, old, chars, copied, literals), n in cells.items():
        chances = {name: _predict(t, full) for name, t in tables.items()}
        for name, p in (*chances.items(), ("reuse", old), ("base", pack["base"])):
            p = min(max(p, 1e-4), 1 - 1e-4)
            brier, logloss = f"brier {name}", f"logloss {name}"
            scores[brier] = scores.get(brier, 0.0) + n * (p - copied) ** 2
            scores[logloss] = scores.get(logloss, 0.0) - n * math.log(p if copied else 1 - p)
        for name, p in chances.items():
            ranked[name].append((p / max(chars, 1), n, literals))
        for name, t in tables.items():
            expected = _predict(t, full, "literals")
            by_literals.setdefault(name, []).append((expected / max(chars, 1), n, literals))
    out = {k: v / max(n_all, 1) for k, v in scores.items()}
    for name, scored in ranked.items():
        out[f"top tenth per char {name}"] = _top_tenth(
            [(r, n, lit > 0) for r, n, lit in scored], n_all
        )
        out[f"literals in top tenth, by odds, {name}"] = _top_tenth(scored, n_all)
    for name, scored in by_literals.items():
        out[f"literals in top tenth, by literals, {name}"] = _top_tenth(scored, n_all)
    out["samples"] = n_all
    return out


def _top_tenth(scored: Sequence[tuple[float, int, int | bool]], n_all: int) -> float:
    """The share of the weight (copied: 1 or 0; or the literals copied later) of all samples
    among the tenth of them ranked first."""
    ordered = sorted(scored, key=lambda x: -x[0])
    top, kept, positives = n_all / 10, 0.0, sum(n * w for _, n, w in ordered)
    seen = 0.0
    for _, n, weight in ordered:
        if seen >= top:
            break
        take = min(n, top - seen)
        seen += take
        kept += take * weight
    return kept / max(positives, 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--max-requests", type=int, default=0, help="per conversation (0: all)")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--write", action="store_true", help=f"write {PACK_PATH}")
    args = parser.parse_args(argv)
    jobs = [(c, args.max_requests) for c in iter_conversations()]
    halves: dict[bool, Counter[Sample]] = {True: Counter(), False: Counter()}
    fitting_convs: dict[str, Counter[Sample]] = {}
    convs = Counter[bool]()
    with mp.get_context("fork").Pool(args.jobs) as pool:
        for conv_id, fit_half, cells in pool.imap_unordered(_job, jobs, chunksize=1):
            halves[fit_half].update(cells)
            convs[fit_half] += 1
            if fit_half:
                fitting_convs.setdefault(conv_id, Counter()).update(cells)
    pack = fit(fitting_convs)
    plain = fit(fitting_convs, copy_odds.BASE_LEVELS)
    print(f"fitting half: {convs[True]} conversations, {pack['samples']:,} samples")
    for name, cells in (("fitting", halves[True]), ("held-out", halves[False])):
        scores = evaluate(pack, cells, plain)
        print(f"\n{name} half:")
        for k, v in scores.items():
            print(f"  {k}: {v:.4f}" if k != "samples" else f"  samples: {int(v):,}")
    print("\nper feature, fitting half (P copied later, samples):")
    marginals = (
        ("kind", "fresh"), ("kind", "size"), ("age",), ("used",), ("kind", "does"), ("new",),
    )  # fmt: skip
    for fields in marginals:
        marg = fit_marginal(halves[True], fields)
        for k, (n, h) in sorted(marg.items()):
            print(f"  {k}: {h / max(n, 1):.3f} of {n:,}")
    if args.write:
        source = "python -m bench.copy_odds_learn " + " ".join(argv or sys.argv[1:])
        shipped = {k: v for k, v in pack.items() if k not in ("literals", "base_literals")}
        body = {"source": source.strip(), "conversations": convs[True], **shipped}
        with open(PACK_PATH, "w", encoding="utf-8") as f:
            f.write(HEADER + yaml.safe_dump(body, sort_keys=False, width=100))
    return 0


def fit_marginal(cells: Counter[Sample], fields: tuple[str, ...]) -> dict[str, tuple[int, int]]:
    out: dict[str, list[int]] = {}
    for (full, _, _, copied, _), n in cells.items():
        c = out.setdefault(_coarse(full, fields), [0, 0])
        c[0] += n
        c[1] += n * copied
    return {k: (v[0], v[1]) for k, v in out.items()}


if __name__ == "__main__":
    sys.exit(main())
