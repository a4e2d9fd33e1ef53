"""``needs_mending`` resumed past a previous request's prefix: a request is kept only when its
shapes needed no mending, so the next one checks from its shared prefix's last message on; the
answer is the whole check's for any shapes."""

from __future__ import annotations

import random

import pytest

from proxy.protocols.anthropic_mend import needs_mending

# each flag alone and the combinations that matter (an assistant turn of thinking only, empty)
FLAGS = [0, 0, 8, 8, 12, 12, 1, 9, 2, 10, 4, 16, 32, 40]


@pytest.mark.parametrize("seed", range(1000))
def test_resumed_check_is_the_whole_check(seed: int) -> None:
    rng = random.Random(seed)
    previous = [rng.choice(FLAGS) for _ in range(rng.randint(1, 12))]
    if needs_mending(previous):  # never kept: nothing resumes from it
        return
    shared = rng.choice([len(previous), rng.randint(0, len(previous))])  # all shared, often
    shapes = previous[:shared] + [rng.choice(FLAGS) for _ in range(rng.randint(0, 4))]
    assert needs_mending(shapes, max(shared - 1, 0)) == needs_mending(shapes)


def test_the_prefix_last_message_is_checked_again_with_its_new_successor() -> None:
    # a thinking-only assistant turn ending the previous request is sound (nothing follows it);
    # followed by another assistant turn, the turn was split
    thinking_only_assistant, assistant = 4 | 8, 8
    assert not needs_mending([0, thinking_only_assistant])
    assert needs_mending([0, thinking_only_assistant, assistant], 1)
    assert not needs_mending([0, thinking_only_assistant, assistant], 2)  # past it: not seen
