"""inject's stored blocks in the warm cut's price: those placed at or after a cut's first edit
leave the prompt with it (inject collapses them), so the cut does not re-bill them; those placed
before it stay, cached (``sticky.tokens_from``, ``warm_cut.break_even``'s ``collapsed``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rules.base import SessionState
from rules.context import schedule, sticky
from tests.rules.context.test_warm_cut import FACTS, PREFIX
from tests.support.factories import ctx, user

BLOCKS = 300  # tokens of stored blocks, counted in the request's total as prune counts them
TOTAL = PREFIX[-1] + BLOCKS


def _choose(carried: float, collapsed: Sequence[int] | None) -> dict[str, Any]:
    """The figures of a warm look at one step: the result of message 8 (900 tokens)."""
    step = schedule.Step("mask", 900, 8, (8,), carried=carried)
    memory = schedule.Memory(requests=20, last_tokens=TOTAL)
    choice = schedule.choose(
        [step], PREFIX, TOTAL, 200_000, 150_000, FACTS, memory, "warm", {"mask": 1.0}, 0,
        collapsed=collapsed,
    )  # fmt: skip
    return choice.figures


def _hosted_at(i: int) -> list[int]:
    """``tokens_from``'s answer with the blocks placed on message ``i``."""
    return [BLOCKS if k <= i else 0 for k in range(len(PREFIX))]


def test_blocks_after_the_first_edit_are_not_rebilled() -> None:
    plain = _choose(0.0, None)["bust_cost"]
    assert _choose(0.0, _hosted_at(9))["bust_cost"] == plain - BLOCKS  # they leave with the cut
    assert _choose(0.0, _hosted_at(8))["bust_cost"] == plain - BLOCKS  # on the edited message
    # before the edit: still cached, read at the cache's price where the plain count re-bills
    kept = BLOCKS * (max(FACTS.write_ratio, FACTS.read_ratio) - FACTS.read_ratio)
    assert _choose(0.0, _hosted_at(7))["bust_cost"] == round(plain - kept)


def test_a_cut_pays_once_carrying_covers_the_price_without_the_blocks() -> None:
    dear = _choose(0.0, None)
    cheap = _choose(0.0, _hosted_at(9))
    between = cheap["bust_cost"] + cheap["expected_loss"] + BLOCKS // 2
    assert between < dear["bust_cost"] + dear["expected_loss"]
    assert _choose(between, None)["decision"] == "none"  # control: priced with the blocks
    assert _choose(between, _hosted_at(9))["decision"] == "paid"


def _stored(*blocks: tuple[str, int]) -> Any:
    """A context whose state holds inject's blocks, as ``sticky.Stored`` saves them."""
    stored = sticky.Stored([sticky.Block(at, "append", f"b{at}", n) for at, n in blocks])
    return ctx([user("x")], state=SessionState({sticky.NAMESPACE: stored.to_json()}))


def test_tokens_from_sums_the_blocks_placed_on_each_message_or_after() -> None:
    anchors = ["a0", "a1", "a2", "a3"]
    context = _stored(("a1", 40), ("a3", 60), ("gone", 500))  # "gone": its host is not here
    assert sticky.tokens_from(context, anchors) == [100, 100, 60, 60, 0]
    assert sticky.tokens_from(_stored(), anchors) is None  # no block stored
    assert sticky.tokens_from(ctx([user("x")]), anchors) is None


def test_blocks_before_the_first_edit_add_nothing_to_the_bust() -> None:
    """They stay in the cached prefix: the bust is that of the same request without them."""
    step = schedule.Step("mask", 900, 8, (8,), carried=0.0)

    def bust(total: int, collapsed: Sequence[int] | None) -> Any:
        memory = schedule.Memory(requests=20, last_tokens=total)
        choice = schedule.choose(
            [step], PREFIX, total, 200_000, 150_000, FACTS, memory, "warm", {"mask": 1.0}, 0,
            collapsed=collapsed,
        )  # fmt: skip
        return choice.figures["bust_cost"]

    on_three = [BLOCKS if k <= 3 else 0 for k in range(len(PREFIX))]
    assert bust(PREFIX[-1] + BLOCKS, on_three) == bust(PREFIX[-1], None)
