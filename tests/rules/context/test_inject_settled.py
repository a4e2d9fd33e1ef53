"""inject's placing kept for a resent quiet list (``inject.SETTLED_MEMO``) is keyed on the
anchors prune told of the very list: a view prune told none (a compaction tried and not kept, as
when the overflow rescue retries the same list under a lower budget) looks its blocks' hosts up
by its own anchors, and must not take a placing kept for the same messages told prune's."""

from __future__ import annotations

from typing import Any

import pytest

from rules.base import Context, ListMemo, Message
from rules.context import inject, overlay, sticky
from rules.messages import INJECT_CLOSE, INJECT_OPEN
from tests.support.factories import TOKENS, assistant, ctx, result, shell, system, user

TEXT = f"{INJECT_OPEN}\nsaid before\n{INJECT_CLOSE}"
CFG = inject.Config()  # one object: the kept placing is keyed on the options as the very object


def _lists() -> tuple[list[Message], list[Message], list[str]]:
    """The client's messages, prune's view of them (its one result capped) and the anchors prune
    tells of the view (each rendered message keeps its source's)."""
    call = shell("c1", "cat log.txt")
    source = [system(), user("fix it"), assistant("reading", call), result("c1", "x" * 4000)]
    source.append(user("go on"))
    view = [*source[:3], result("c1", "x [capped]"), source[4]]
    return source, view, overlay.anchors(source)


def _state(host: str) -> Any:
    stored = sticky.Stored([sticky.Block(host, "append", TEXT, TOKENS.count_text(TEXT))])
    return ctx([user("x")]).state.with_value(sticky.NAMESPACE, stored.to_json())


def _inject(view: list[Message], state: Any, memo: ListMemo, told: list[str] | None) -> Any:
    context: Context = ctx(view, now=1000.0, state=state, budget=100_000).evolve(memo=memo)
    if told is not None:
        context.share(overlay.MEMO, view, told)  # what prune's ``share_anchors`` does
    return inject.apply(context, CFG)


def test_a_view_told_no_anchors_does_not_take_the_placing_kept_for_a_told_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, view, told = _lists()
    state = _state(told[-1])  # a block after the last message, by prune's anchor
    assert overlay.anchors(view)[-1] != told[-1]  # the view's own anchor is another
    session: ListMemo = {}
    first = _inject(view, state, session, told)
    assert first.report["inject"] == {"sticky": 1}  # found where prune said
    assert first.messages[-1]["content"].endswith(TEXT)
    plans = []
    real = inject._Plan
    monkeypatch.setattr(inject, "_Plan", lambda *a: plans.append(1) or real(*a))

    again = _inject(list(view), state, session, told)  # resent, told again: the kept placing
    assert plans == [] and again.messages == first.messages and again.report == first.report

    untold = _inject(list(view), state, session, None)  # resent, told none
    fresh = _inject(list(view), state, {}, None)
    assert fresh.report["inject"] == {"lost": 1, "sticky": 0}
    assert untold.messages == fresh.messages
    assert untold.report == fresh.report
    assert untold.state.to_json() == fresh.state.to_json()
