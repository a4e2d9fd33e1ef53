"""resolve_refs' kept answer (``ref_memo``): a tool loop's next request gets the answer already
given while nothing it came from changed, and exactly what a fresh resolution gives otherwise."""

from __future__ import annotations

from typing import Any

import pytest

from rules.base import Ancestor, SessionState
from rules.entities import cache as entity_cache
from rules.entities import ref_memo, ref_read, resolve_refs
from tests.support.factories import assistant, ctx, user

CFG = resolve_refs.Config()
QUESTION = "delete the folder you just created"


def ev(path: str, kind: str, action: str, seen: float, seq: int) -> dict[str, Any]:
    return {
        "type": kind,
        "name": path.rsplit("/", 1)[-1],
        "path": path,
        "action": action,
        "first_seen": seen,
        "call_id": f"c{seq}",
        "seq": seq,
        "tool": "bash",
    }


class Loop:
    """A session's requests: one question, then the agent's tool loop (the memos carried)."""

    def __init__(self, asked_at: float = 1000.0, text: str = QUESTION) -> None:
        self.messages = [user("start"), assistant("ok"), user(text)]
        self.memo: dict[str, Any] = {}
        first = ctx(self.messages, now=asked_at, session_id="me")
        self.asked = resolve_refs.apply(first, CFG).state.get(resolve_refs.NAMESPACE)
        assert self.asked["at"] == asked_at  # the question's time: its first sighting

    def request(self, events: list[dict[str, Any]], now: float, **fields: Any) -> Any:
        state = SessionState({"entities": events, resolve_refs.NAMESPACE: self.asked})
        context = ctx(
            self.messages, now=now, session_id="me", state=state, memo=self.memo, **fields
        )
        return resolve_refs.apply(context, CFG).report["references"]

    def fresh(self, events: list[dict[str, Any]], now: float, **fields: Any) -> Any:
        """The same request with nothing kept: what the answer must be."""
        state = SessionState({"entities": events, resolve_refs.NAMESPACE: self.asked})
        context = ctx(self.messages, now=now, session_id="me", state=state, **fields)
        return resolve_refs.apply(context, CFG).report["references"]


@pytest.fixture
def resolutions(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the resolutions worked out (not answered from the memo)."""
    calls: list[int] = []
    real = resolve_refs.resolve

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(resolve_refs, "resolve", counted)
    return calls


FOLDER = ev("/w/new", "folder", "create", 990.0, 1)
OTHER = ev("/w/other", "folder", "create", 995.0, 2)


def test_the_loop_s_next_request_is_answered_from_the_memo(resolutions: list[int]) -> None:
    loop = Loop()
    events = [FOLDER]
    first = loop.request(events, 1010.0)
    assert first[0]["entity"]["path"] == "/w/new"
    worked = len(resolutions)
    again = loop.request(events, 1020.0)
    assert len(resolutions) == worked  # nothing resolved again
    assert again == first == loop.fresh(events, 1020.0)
    assert again[0] is not first[0]  # a fresh object: a report never shares an earlier one's


def test_events_after_the_question_leave_the_answer(resolutions: list[int]) -> None:
    loop = Loop()
    first = loop.request([FOLDER], 1010.0)
    worked = len(resolutions)
    later = [FOLDER, ev("/w/late", "folder", "create", 1005.0, 3)]  # made after it was asked
    again = loop.request(later, 1020.0)
    assert len(resolutions) == worked
    assert again == first == loop.fresh(later, 1020.0)


@pytest.mark.parametrize(
    "change",
    [
        "earlier_event",  # one more entity from before the question: now two fit
        "replaced",  # the folder's event moved to the end (made again after the question)
        "dropped",  # the folder's event gone (the capacity)
        "aged_out",  # the clock passed its TTL
        "ancestor",  # a parent session's events changed
    ],
)
def test_any_other_change_is_worked_out_afresh(change: str, resolutions: list[int]) -> None:
    parent = Ancestor("lead", SessionState({"entities": [OTHER]}), 1)
    loop = Loop()
    events = [FOLDER]
    first = loop.request(events, 1010.0, ancestors=(parent,))
    worked = len(resolutions)
    now = 1020.0
    if change == "earlier_event":
        events = [FOLDER, ev("/w/twin", "folder", "create", 990.0, 1)]
    elif change == "replaced":
        events = [ev("/w/new", "folder", "create", 1015.0, 4)]
    elif change == "dropped":
        events = []
    elif change == "aged_out":
        now = 990.0 + CFG.ttl_seconds + 1
    else:
        parent = Ancestor("lead", SessionState({"entities": [OTHER, dict(OTHER, seq=9)]}), 1)
    answer = loop.request(events, now, ancestors=(parent,))
    assert len(resolutions) > worked
    assert answer == loop.fresh(events, now, ancestors=(parent,))
    if change != "ancestor":
        assert answer != first


def test_the_resolver_model_s_hints_are_never_answered_from_the_memo(
    resolutions: list[int],
) -> None:
    loop = Loop()
    loop.request([FOLDER], 1010.0)
    worked = len(resolutions)
    hints = {"resolver_descriptions": {"the folder you just created": {"description": "x"}}}
    loop.request([FOLDER], 1020.0, hints=hints)
    assert len(resolutions) > worked


def test_the_memo_holds_one_answer_per_session() -> None:
    loop = Loop()
    loop.request([FOLDER], 1010.0)
    loop.request([FOLDER, OTHER], 1020.0)
    kept = loop.memo[ref_memo.MEMO]
    assert len(kept) == 1 and kept[0][1].searched[0].events == (FOLDER, OTHER)


def test_still_fresh_agrees_with_fresh_at_the_boundary() -> None:
    ttl = 300.0
    events = [ev("/a", "file", "create", 0.1, 1), ev("/b", "file", "create", 100.3, 2)]
    kept, oldest, gone = entity_cache.fresh_window(events, 250.0, ttl)
    for now in (250.0, 300.1, 300.1000001, 400.3, 400.30000001, 0.0):
        same = entity_cache.fresh(events, now, ttl) == kept
        assert entity_cache.still_fresh(now, ttl, oldest, gone) == same, now


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts read for mentions (not taken from the session's question memo)."""
    read: list[str] = []
    real = resolve_refs._mentions

    def counted(text: str, *args: Any) -> Any:
        read.append(text)
        return real(text, *args)

    monkeypatch.setattr(resolve_refs, "_mentions", counted)
    return read


def test_the_same_question_object_is_not_read_again(scans: list[str]) -> None:
    memo: dict[str, Any] = {}
    messages = [user("start"), assistant("ok"), user(QUESTION)]
    state = SessionState({"entities": [FOLDER]})
    first = resolve_refs.apply(ctx(messages, now=1000.0, state=state, memo=memo), CFG)
    assert scans == [QUESTION]
    # the tool loop's next request: the same message objects, a call and its result after them
    loop = [*messages, assistant("checking"), user("ok then")]
    resolve_refs.apply(ctx(loop, now=1004.0, state=first.state, memo=memo), CFG)
    assert scans == [QUESTION, "ok then"]  # a new latest user message is read
    again = resolve_refs.apply(ctx(messages, now=1008.0, state=first.state, memo=memo), CFG)
    assert scans == [QUESTION, "ok then", QUESTION]  # the memo holds the latest one only
    same = resolve_refs.apply(ctx(list(messages), now=1012.0, state=first.state, memo=memo), CFG)
    assert len(scans) == 3  # the very message object again: its mentions are known
    assert same.report == again.report
    # an equal message that is another object, other options, or other sorts present: read
    copy = [*messages[:-1], user(QUESTION)]
    resolve_refs.apply(ctx(copy, now=1016.0, state=first.state, memo=memo), CFG)
    other = resolve_refs.Config(threshold=0.5)
    resolve_refs.apply(ctx(copy, now=1020.0, state=first.state, memo=memo), other)
    sorts = first.state.with_value(entity_cache.SUMMARY, {"kinds": ["branch"], "joined": "objects"})
    resolve_refs.apply(ctx(copy, now=1024.0, state=sorts, memo=memo), other)
    assert len(scans) == 6


def test_the_prepared_slot_serves_only_its_own_text() -> None:
    """The text last prepared is kept in one slot: another text, other languages or other packs
    are prepared afresh, never served the slot's."""
    langs = ("en", "zh", "ko", "ja")
    first = ref_read._prepared("stop the dev server", (), langs)
    assert first.original == "stop the dev server"
    assert ref_read._prepared("stop the dev server", (), langs) is first
    second = ref_read._prepared("删除刚创建的文件夹", (), langs)
    assert second.original == "删除刚创建的文件夹" and "zh" in [x.lang for x in second.lexicons]
    only_en = ref_read._prepared("删除刚创建的文件夹", (), ("en",))
    assert only_en is not second and [x.lang for x in only_en.lexicons] in ([], ["en"])
    assert ref_read._prepared("stop the dev server", (), langs) is not first
    assert ref_read._prepared("stop the dev server", (), langs).text == first.text
