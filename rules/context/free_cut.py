"""prune's free-cut check between warm looks: the results among the newest that a later one
supersedes and the protected evidence does not hold, with the tokens eliding each frees and the
tokens before each message (what ``warm_cut.free_now`` weighs against the cached prompt).

A free cut is of a result at the end of the cached prompt, so among the newest: neither the whole
list's supersede pass nor the whole list's evidence is asked for (a look judges the rest). The
answer is a function of the messages, the stored overlay (the sizes are the view's) and the
options, so it is kept for a list of the very same messages with the same stored overlay and
options (``Context.recall``, as ``prune_settled`` keeps the view): a resent body asks again for
nothing, nor builds the ``Run`` that sizes the view."""

from __future__ import annotations

from dataclasses import dataclass

from rules.activity.observations import of_context
from rules.base import Context
from rules.context import evidence, prune_settled, prune_stages
from rules.context.prune_plan import PLACEHOLDER_TOKENS, Options, Run

MEMO = "prune_free_cut"  # ``Context.recall`` name: a list, a stored overlay, options


@dataclass(frozen=True)
class Tail:
    """The superseded results free-cut candidates (message index, tokens eliding it frees; an
    elided one frees none), and the tokens before each message of the view (one more entry: all
    of them); both empty when there is none."""

    freed: tuple[tuple[int, int], ...] = ()
    prefix: tuple[int, ...] = ()


def superseded(ctx: Context, recent: int, last_writes: int) -> list[int]:
    """Message indices of results among the last ``recent`` that a later one of them supersedes
    and the protected evidence does not hold. A result is protected for what comes after it (the
    latest failure of its kind, one of the last writes, the latest listing or plan), so the
    evidence found in the results from the first superseded one on is the whole list's for
    them."""
    obs = of_context(ctx)[-max(recent, 2) :]  # the Run's, which need not be built for this
    found = prune_stages.supersede(obs, set(), ctx.messages)
    if not found:
        return []
    first = next(k for k, o in enumerate(obs) if o.result_index == found[0][0])
    protected = evidence.find(ctx.messages, obs[first:], last_writes).protected
    return [i for i, _ in found if i not in protected]


def prefix_tokens(sizes: dict[int, int]) -> list[int]:
    """Tokens before each message (one more entry: all of them)."""
    prefix = [0]
    for i in range(len(sizes)):
        prefix.append(prefix[-1] + sizes[i])
    return prefix


def tail(
    ctx: Context, cfg: Options, namespace: str, run: Run | prune_settled.Kept
) -> tuple[Tail, Run | None]:
    """This list's ``Tail`` (kept, or worked out and kept), and the ``Run`` built to size the
    view when ``run`` was not one (None: none built)."""
    key = (ctx.state.get(namespace), cfg)
    found, kept = ctx.recall(MEMO, key)
    if found:
        return kept, None
    built = None
    indices = superseded(ctx, cfg.keep_last_observations, cfg.keep_last_writes)
    answer = Tail()
    if indices:
        if not isinstance(run, Run):  # the same view, rendered by a Run that sizes it
            run = built = prune_settled.run_of(ctx, cfg, namespace)[0]
        sizes = run.sizes()
        freed = tuple((i, sizes[i] - PLACEHOLDER_TOKENS) for i in indices)
        answer = Tail(freed, tuple(prefix_tokens(sizes)))
    ctx.keep(MEMO, key, answer)
    return answer, built
