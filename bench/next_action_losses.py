"""What the literals a budget loses are, and what lost them: the analysis behind a forced
compaction's choices (``bench.next_action``'s replay, every lost literal classified).

    .venv/bin/python -m bench.next_action_losses [--limit 0] [--max-requests 40]
        [--variants share50,share30] [--oracle] [--half all|train|held-out]
        [--restore off|lately|all]

Each literal a call copies (``bench/copied_literals.py``) that the forwarded request lost is
counted by

- its **kind**: a whole ``line`` (an ``old_str`` line, a heredoc's line: it has a space), else
  the kind ``rules.context.digest`` gives the word (``path``, ``ident``, ``id``), else ``code``
  (a word the digest does not take for a name: ``__repr__``, ``self.clear()``);
- **what removed** its source result (as ``bench.next_action``: ``drop``, ``mask``, ...);
- the **source's action** (``read``, ``run``, ...) and the literal's **age** bucket;
- for a name lost to a drop, whether the digest **could have named it**: among the names the
  source showed (``digest``'s scan) at position < 12, < 48 or further; or not a name at all;
- for a literal lost to a drop, whether the session made a compaction **since** its source was
  first dropped (up to the copying request): only then could a forced compaction have brought
  the source back (``rules/context/restore.py``).

``--oracle`` replaces the copy model's chances in a forced compaction's order (``forced.order``)
by the truth: 1 for a result some later call of the session copies from, else almost 0 (a turn:
the sum over the results it still shows, plus ``forced.DROP_TEXT_ODDS``). The rest (depth, goal,
what is dropped last, the digests) is as shipped, so the row says how much of the loss a perfect
ranking would save.

``--oracle literals`` ranks them instead by the literals later calls of the session copy from
each result (in copies: over the literals a result copied from gives in that conversation), as
the copy model would were it to predict the literals a result gives and predict them exactly.

``--restore`` turns prune's ``restore_elided`` on and sets which elided results a forced
compaction re-judges (``restore``): ``off`` (as shipped), ``lately`` (those the agent's last
calls point at again), ``all`` (every masked or dropped result past the rewrite's start: with
``--oracle``, what a way back at forced compactions could reach).
"""

from __future__ import annotations

import argparse
import bisect
import functools
import sys
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import bench.next_action as na
from bench.copied_literals import AGE_BUCKETS, Copied, copied_literals
from bench.copied_literals import request_text as forwarded_text
from bench.split import half_of
from rules.activity.observations import observations
from rules.base import Message
from rules.context import digest, forced, prune, restore
from rules.context.need import Need
from rules.context.schedule import Step
from rules.messages import role, text_of
from tests.support.traces import iter_conversations

ORACLE: dict[str, Any] = {}  # the replayed conversation's truth: {"id", "last", "request"}
UNUSED = 1e-6  # the oracle's chance of a result no later call copies from
# kept on each lane: the requests seen, when each result's call id was first missing (dropped),
# the requests that compacted
SINCE = "losses_since"


def literal_kind(literal: str) -> str:
    if any(c.isspace() for c in literal):
        return "line"
    return digest._classify(literal) or "code"


def digest_position(literal: str, source: str) -> str:
    """Where the literal stands among the names ``source`` showed, in the order seen."""
    scan = [w for _, w in digest._scan(source)]
    if literal not in scan:
        return "in names()" if literal in digest.names(source) else "not a name"
    at = scan.index(literal)
    return "< 12" if at < 12 else "< 48" if at < 48 else "48 or more"


def classify(
    tally: Counter[str], copied: list[Copied], msgs: list[Message], forwarded: list[Message],
    actions: dict[str, str], since: tuple[list[int], dict[str, int], list[int]] | None = None,
) -> None:  # fmt: skip
    """Count each lost literal of ``copied`` by kind, cause, source action, age, position, and
    (``since``: the lane's requests, drops and compactions) a compaction since its drop."""
    text = forwarded_text(forwarded)
    present = {m.get("tool_call_id") for m in forwarded if role(m) == "tool"}
    lost = [c for c in copied if c.literal not in text]
    if not lost:
        return
    kinds = {o.result_index: o.action.kind for o in observations(msgs[: lost[0].call_index])}
    for c in lost:
        cid = msgs[c.source].get("tool_call_id")
        cause = "drop" if cid not in present else actions.get(str(cid), "other")
        kind = literal_kind(c.literal)
        tally[f"kind\t{cause}\t{kind}"] += 1
        tally[f"source\t{cause}\t{kinds.get(c.source, '?')}"] += 1
        tally[f"age\t{cause}\t{na.age_bucket(c.age)}"] += 1
        if cause == "drop" and since is not None:
            seen, gone, compactions = since
            at = gone.get(str(cid), seen[0])
            later = any(at < r <= seen[0] for r in compactions)
            tally[f"since\t{cause}\t{'a compaction' if later else 'none'}"] += 1
        if cause == "drop" and kind != "line":
            source = text_of(msgs[c.source].get("content"))
            tally[f"digest\t{cause}\t{digest_position(c.literal, source)}"] += 1


def _account(original: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(original)
    def account(out: na.Outcome, lane: na.Lane, copied: list[Copied], msgs: list[Message],
                forwarded: list[Message]) -> None:  # fmt: skip
        original(out, lane, copied, msgs, forwarded)
        since = vars(lane).get(SINCE)
        classify(out.tally[lane.variant.name], copied, msgs, forwarded, lane.actions, since)

    return account


def _forward_tracked(original: Callable[..., Any]) -> Callable[..., Any]:
    """``_forward`` noting, per lane, when each result was first dropped and which requests
    compacted (``SINCE``, kept on the lane)."""

    @functools.wraps(original)
    def forward(lane: na.Lane, job: na.Job, model: str, prefix: list[Message], now: float) -> Any:
        out = original(lane, job, model, prefix, now)
        seen, gone, compactions = vars(lane).setdefault(SINCE, ([-1], {}, []))
        seen[0] += 1
        if lane.compacted:
            compactions.append(seen[0])
        shown = {m.get("tool_call_id") for m in out if role(m) == "tool"}
        for m in prefix:
            cid = m.get("tool_call_id")
            if role(m) == "tool" and cid not in shown:
                gone.setdefault(str(cid), seen[0])
        return out

    return forward


def _oracle_order(original: Callable[..., list[Step]]) -> Callable[..., list[Step]]:
    """``forced.order`` with each result's chance (``Need.odds``) the truth (``ORACLE``)."""

    @functools.wraps(original)
    def order(masks: Sequence[tuple[int, str]], turns: Sequence[Sequence[int]],
              needs: Mapping[int, Need], *args: Any, **kwargs: Any) -> list[Step]:  # fmt: skip
        last, request = ORACLE.get("last", {}), ORACLE.get("request", 0)
        truth = {
            i: replace(n, odds=1.0 if last.get(i, -1) >= request else UNUSED)
            for i, n in needs.items()
        }
        return original(masks, turns, truth, *args, **kwargs)

    return order


def _literal_order(
    masks: Sequence[tuple[int, str]],
    turns: Sequence[Sequence[int]],
    needs: Mapping[int, Need],
    sizes: Mapping[int, int],
    whole: set[int],
    before: Sequence[Step] = (),
    late_turns: Collection[int] = frozenset(),
) -> list[Step]:
    """``forced.order`` (the same steps and rules) ranked by the literals later calls copy from
    each result (the truth, ``ORACLE``), in copies' units (over the literals a result copied
    from gives in that conversation, ``ORACLE["per_copy"]``) so a turn's own words weigh what
    they weigh in the shipped order: the order by expected literals, were the expectation
    exact."""
    copies, request = ORACLE.get("copies", {}), ORACLE.get("request", 0)
    per_copy = ORACLE.get("per_copy", 1.0)

    def truth(i: int) -> float:
        at = copies.get(i, [])
        later = len(at) - bisect.bisect_left(at, request)
        return later / per_copy if later else UNUSED

    steps = [
        Step("mask", sizes[i] - forced.DIGEST_TOKENS, i, (i,), reason, needs[i].reuse, truth(i))
        for i, reason in masks
    ]
    for turn in turns:
        live = [i for i in turn if i in whole and i in needs]
        reuse = min(1.0, sum(needs[i].reuse for i in live) + forced.DROP_TEXT_ODDS)
        lost = sum(truth(i) for i in live) + forced.DROP_TEXT_ODDS
        steps.append(
            Step("drop", sum(sizes[i] for i in turn), turn[0], tuple(turn), "", reuse, lost)
        )
    late = {s.first for s in steps[len(masks) :] if s.first in late_turns}
    steps = [replace(s, reason=forced.LAST_RESORT) if s.first in late else s for s in steps]
    return forced.net(sorted(steps, key=lambda s: (s.first in late, s.loss_per_token())), before)


def _forward_knowing(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def forward(lane: na.Lane, job: na.Job, model: str, prefix: list[Message], now: float) -> Any:
        if ORACLE.get("id") != job.conv["id"]:
            last: dict[int, int] = {}
            copies: dict[int, list[int]] = {}  # source -> each copy's call index, ascending
            for c in copied_literals(job.conv["messages"]):
                last[c.source] = max(last.get(c.source, -1), c.call_index)
                copies.setdefault(c.source, []).append(c.call_index)
            per_copy = sum(map(len, copies.values())) / max(len(copies), 1)
            ORACLE.update(id=job.conv["id"], last=last, copies=copies, per_copy=per_copy)
        ORACLE["request"] = len(prefix)
        return original(lane, job, model, prefix, now)

    return forward


def _restore_all(
    messages: list[Message], observations: Sequence[Any], candidates: Any, calls: int = 0
) -> list[int]:
    """``restore.named_lately`` for ``--restore all``: every elided result is re-judged."""
    return sorted(candidates)


def _restoring(original: Callable[..., Any]) -> Callable[..., Any]:
    """``prune.apply`` with ``restore_elided`` on."""

    @functools.wraps(original)
    def apply(ctx: Any, cfg: prune.Config) -> Any:
        return original(ctx, cfg.model_copy(update={"restore_elided": True}))

    return apply


@contextmanager
def patched(oracle: bool | str, restoring: str = "off") -> Iterator[None]:
    """The replay with each loss classified (and the oracle's order, the way back at forced
    compactions): set before the workers fork, undone after."""
    saved = na._account, na._forward, forced.order, restore.named_lately, prune.apply
    na._account = _account(na._account)
    na._forward = _forward_tracked(na._forward)
    if oracle:
        na._forward = _forward_knowing(na._forward)
        if oracle == "literals":
            forced.order = _literal_order
        else:
            forced.order = _oracle_order(forced.order)  # type: ignore[assignment]
    if restoring != "off":
        prune.apply = _restoring(prune.apply)
    if restoring == "all":
        restore.named_lately = _restore_all
    try:
        yield
    finally:
        na._account, na._forward, forced.order, restore.named_lately, prune.apply = saved  # type: ignore[assignment]


def print_table(name: str, tally: Counter[str]) -> None:
    n = sum(tally[f"n {b}"] for b in AGE_BUCKETS)
    kept = sum(tally[f"kept {b}"] for b in AGE_BUCKETS)
    print(
        f"\n## {name}: kept {kept:,} of {n:,} ({100 * kept / max(n, 1):.1f}%), "
        f"{tally['compactions']} compactions, {tally['compactions: thrash']} thrash\n"
    )
    print("| by | cause | value | lost |\n|---|---|---|---:|")
    rows = [[*k.split("\t"), str(v)] for k, v in tally.items() if k.count("\t") == 2 and v]
    for row in sorted(rows, key=lambda r: (r[0], r[1], -int(r[3]))):
        print("| " + " | ".join(row) + " |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--limit", type=int, default=0, help="conversations (0: all)")
    parser.add_argument("--max-requests", type=int, default=40, help="per conversation (0: all)")
    parser.add_argument("--variants", default="share50,share30")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--oracle", nargs="?", const="copied", choices=("copied", "literals"), default=None,
        help="rank forced cuts by the truth: copied later or not, or the literals copied later",
    )  # fmt: skip
    parser.add_argument("--half", choices=("all", "train", "held-out"), default="all")
    parser.add_argument(
        "--restore", choices=("off", "lately", "all"), default="off",
        help="prune's restore_elided on, and which elided results a forced compaction re-judges",
    )  # fmt: skip
    args = parser.parse_args(argv)
    variants = tuple(na.parse_variant(v.strip()) for v in args.variants.split(",") if v.strip())
    convs = [c for c in iter_conversations() if args.half in ("all", half_of(str(c["id"])))]
    chosen = na.spread(convs, args.limit)
    jobs = [na.Job(c, variants, 0, args.max_requests, 0.1, False) for c in chosen]
    total = na.Outcome()
    with patched(args.oracle, args.restore):
        for outcome in na.run_jobs(jobs, args.jobs):
            total.merge(outcome)
    oracle = f", oracle order ({args.oracle})" if args.oracle else ""
    print(
        f"{len(chosen)} conversations ({args.half}), {total.requests:,} requests (the first "
        f"{args.max_requests or 'all'} of each){oracle}, "
        f"restore: {args.restore}"
    )
    for v in variants:
        print_table(v.name, total.tally.get(v.name, Counter()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
