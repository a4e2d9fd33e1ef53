"""A compaction the budget forces frees its tokens where the fewest later copies are lost: among
results judged alike, the least chance of being copied from per token freed goes first (a large
result before a small one as likely to be needed), and what the task still needs goes last."""

from __future__ import annotations

from typing import Any

from rules.context import need, prune
from rules.context.prune_plan import Run
from rules.context.schedule import Step
from tests.support.factories import assistant, ctx, result, shell, user


def _runs(sizes: list[int]) -> list[dict[str, Any]]:
    """A task, then one shell run per size, its output that many lines of distinct words."""
    out: list[dict[str, Any]] = [user("Find why the release build is slow")]
    for k, lines in enumerate(sizes):
        body = "\n".join(f"stage_{k}_timer_{i} took {i * 7 % 13} ms" for i in range(lines))
        out += [assistant(None, shell(f"c{k}", f"./measure --stage {k}")), result(f"c{k}", body)]
    return out


def test_the_rate_is_the_chance_per_token_freed() -> None:
    small, large = Step("mask", 100, 1, (1,), reuse=0.05), Step("mask", 5_000, 3, (3,), reuse=0.2)
    assert large.loss_per_token() < small.loss_per_token()
    assert Step("mask", 0, 5, (5,), reuse=0.1).loss_per_token() == 0.1  # never divides by 0


def test_a_large_result_goes_before_a_small_one_as_likely_to_be_needed() -> None:
    # the fifth run's output is large, every other one small; all of them old and of one kind
    sizes = [20] * 4 + [600] + [20] * 20
    messages = _runs(sizes)
    run = Run(ctx(messages), prune.Config(), prune.NAMESPACE)
    steps = [s for s in run.plan(run.sizes(), drops=True) if s.stage == "mask"]
    large = next(o.result_index for o in run.obs if o.call_id == "c4")
    assert steps[0].first == large  # by age alone it would come fifth
    rates = [s.loss_per_token() for s in steps]
    judged = need.judge(messages, run.obs, [s.first for s in steps])
    needed = [judged[s.first].needed for s in steps]
    assert needed == sorted(needed)  # what the task still needs comes last
    for flag in (False, True):
        group = [r for r, n in zip(rates, needed, strict=True) if n is flag]
        assert group == sorted(group)


def test_a_result_the_task_still_needs_goes_after_larger_ones_it_does_not() -> None:
    sizes = [40] * 4 + [600] + [40] * 20
    messages = _runs(sizes)
    # a recent call names what the second run printed: that result is still needed
    messages += [assistant(None, shell("s", "grep -n stage_1_timer_3 log")), result("s", "hit")]
    run = Run(ctx(messages), prune.Config(), prune.NAMESPACE)
    order = [s.first for s in run.plan(run.sizes(), drops=True) if s.stage == "mask"]
    wanted = next(o.result_index for o in run.obs if o.call_id == "c1")
    large = next(o.result_index for o in run.obs if o.call_id == "c4")
    assert order.index(large) < order.index(wanted)
    judged = need.judge(messages, run.obs, order)
    assert judged[wanted].needed
    assert all(order.index(i) < order.index(wanted) for i in order if not judged[i].needed)
