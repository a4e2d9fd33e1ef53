"""prune's free-cut check between warm looks (``free_cut.superseded``, ``warm_cut.free_now``): a
full look happens only when a superseded result at the end of the cached prompt can be cut: not
when the protected evidence holds it, not within ``HEADROOM`` requests of the last compaction,
not when the cut would leave the request within ``HEADROOM`` requests of growth of the budget's
compaction; and a look within ``HEADROOM`` requests of a compaction schedules the next one no
sooner than a cut is allowed."""

from __future__ import annotations

from typing import Any

import pytest

from rules.activity.observations import of_context
from rules.base import Message
from rules.context import evidence, prune
from rules.context.prune_plan import Run
from tests.rules.context.test_schedule import NOW, conversation, decide, memory
from tests.support.factories import TOKENS, assistant, ctx, result, shell

# break-even alone: the default's wait for the risk budget is test_warm_risk's
BREAK_EVEN = prune.Config(warm_risk_share=None)

FAILED = "\n".join(
    f"FAILED tests/test_{i}.py::test_case - assert {i} == {i + 1}" for i in range(60)
)
PASSED = "\n".join(f"tests/test_{i}.py::test_case PASSED" for i in range(60)) + "\n60 passed"


def _messages(first: str, second: str) -> tuple[list[Message], list[Message]]:
    """The previous request (ending with a run's result) and this one: the same command run
    again, so that result is superseded at the end of the cached prompt."""
    before = [*conversation(12), assistant(None, shell("t1", "pytest -x")), result("t1", first)]
    return before, [*before, assistant(None, shell("t2", "pytest -x")), result("t2", second)]


def _request(
    first: str, second: str, monkeypatch: pytest.MonkeyPatch, **kept: Any
) -> tuple[Any, int]:
    """Request 21 (no look due by the count, the last at 20); the result, and how many times
    prune planned (a look: the plan over every message)."""
    built = [0]
    real = Run.plan

    def counted(*args: Any, **kwargs: Any) -> Any:
        built[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(Run, "plan", counted)
    before, messages = _messages(first, second)
    state = memory(21, NOW - 5.0, TOKENS.count_messages(before), looked=20, **kept)
    out = prune.apply(ctx(messages, now=NOW, state=state, budget=200_000), BREAK_EVEN)
    return out, built[0]


def _looked(out: Any) -> int:
    return int(out.state.get(prune.SESSION)["looked"])


def test_a_free_superseded_result_is_looked_at_and_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    out, built = _request(FAILED, FAILED + "\nagain", monkeypatch)
    assert built == 1 and _looked(out) == 21
    assert [d["action"] for d in out.report["pruning"]] == ["supersede"]


def test_no_look_when_the_superseded_result_is_protected(monkeypatch: pytest.MonkeyPatch) -> None:
    """The earlier run failed, the run again passed: the failure is the latest failing test
    output, which prune never elides, so no free cut is there and no look is made."""
    _, messages = _messages(FAILED, PASSED)
    found = evidence.find(messages, of_context(ctx(messages)), 3).protected
    assert found.get(len(messages) - 3) == "latest failing test output"
    out, built = _request(FAILED, PASSED, monkeypatch)
    assert built == 0 and _looked(out) == 20
    assert not out.report["prune"]["compacted"] and not out.report["pruning"]
    # the other way round, the earlier (passing) run is not evidence: cut
    out, built = _request(PASSED, FAILED, monkeypatch)
    assert built == 1 and out.report["prune"]["compacted"]


def test_no_look_within_five_requests_of_the_last_compaction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Within ``HEADROOM`` requests of the last compaction no warm cut is made, free or not: no
    look for one, and no look scheduled for the next request."""
    out, built = _request(FAILED, FAILED + "\nagain", monkeypatch, last_cut=18)
    session = out.state.get(prune.SESSION)
    assert built == 0 and session["looked"] == 20 and "due" not in session
    assert not out.report["prune"]["compacted"]
    out, built = _request(FAILED, FAILED + "\nagain", monkeypatch, last_cut=16)
    assert built == 1 and out.report["prune"]["compacted"]


def test_a_look_within_five_requests_of_a_compaction_is_next_due_when_a_cut_is_allowed() -> None:
    """Request 20 looks (every 4th); a cut has paid, but the last compaction was at 17: the
    next look is due at request 22, the first a cut may come, not at once."""
    paid_for = {"carried": 1e9, "looked": 16, "due": 20, "last_cut": 17}
    out = decide(conversation(120), 200_000, 5.0, carried=paid_for)
    figures = out.report["prune"]["schedule"]
    assert figures["decision"] == "none" and figures["look_in"] == 2
    assert out.state.get(prune.SESSION)["due"] == 22
    later = decide(conversation(120), 200_000, 5.0, carried={**paid_for, "last_cut": 12})
    assert later.report["prune"]["compacted"]


def test_no_look_when_the_cut_would_leave_the_budget_s_compaction_near(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A session growing so fast that even after the free cut the budget forces a compaction
    within ``HEADROOM`` requests: the look would make no cut, so none is made."""
    out, built = _request(FAILED, FAILED + "\nagain", monkeypatch, growth=40_000.0)
    assert built == 0 and _looked(out) == 20 and not out.report["prune"]["compacted"]
    out, built = _request(FAILED, FAILED + "\nagain", monkeypatch, growth=10_000.0)
    assert built == 1 and out.report["prune"]["compacted"]
