"""lineage: a request resumes from the longest checkpoint its own history extends; a fork never
sees another branch's state, and the branch it leaves is kept (bounded) for its return."""

from __future__ import annotations

import orjson

from proxy.rewrite import lineage
from rules.base import SessionState


def hashes(*names: str) -> list[str]:
    return [f"h-{n}" for n in names]


def stored(history: list[str], data: dict, tips: list | None = None) -> SessionState:
    """A state saved after a request with this history."""
    state = lineage.record(SessionState(data), lineage.key_of(history))
    if tips is not None:
        state = state.with_value(lineage.NAMESPACE, {**state.get(lineage.NAMESPACE), "tips": tips})
    return state


LONE = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
TWO = [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]
BRANCH = {"entities": [{"path": "/a"}], "working_set": {"goal": "a"}, "inject": {"blocks": 1}}
SHARED = {"prune": {"edits": 1}, "prune_session": {"n": 1}, "_prefix": {"hashes": ["x"]}}


def test_a_history_that_extends_the_head_runs_on_the_state_as_stored() -> None:
    state = stored(hashes("s", "u", "a"), {**BRANCH, **SHARED})
    resumed, fork, _ = lineage.resume(state, hashes("s", "u", "a", "t", "u2"), messages=TWO)
    assert resumed is state and fork is None


def test_a_state_stored_without_a_lineage_is_taken_as_it_is() -> None:
    state = SessionState({**BRANCH})
    assert lineage.resume(state, hashes("x"), messages=TWO)[:2] == (state, None)


def test_a_fork_keeps_only_what_is_shared_and_leaves_the_branch_as_a_tip() -> None:
    state = stored(hashes("s", "u", "a", "t"), {**BRANCH, **SHARED})
    resumed, fork, _ = lineage.resume(state, hashes("s", "u", "b"), messages=TWO)
    assert fork == {"from": "none", "head_messages": 4}
    assert {k: resumed.data[k] for k in SHARED} == SHARED
    assert not set(BRANCH) & set(resumed.data)
    tips = resumed.get(lineage.NAMESPACE)["tips"]
    assert tips == [[4, lineage.chain(hashes("s", "u", "a", "t"), 4), BRANCH]]


def test_the_longest_matching_tip_is_resumed_and_leaves_the_tips() -> None:
    short = [2, lineage.chain(hashes("s", "u"), 2), {"entities": ["short"]}]
    long = [4, lineage.chain(hashes("s", "u", "a", "t"), 4), {"entities": ["long"]}]
    other = [3, lineage.chain(hashes("s", "u", "z"), 3), {"entities": ["other"]}]
    state = stored(hashes("s", "u", "b"), {"entities": ["head"]}, tips=[short, long, other])
    resumed, fork, _ = lineage.resume(state, hashes("s", "u", "a", "t", "u3"), messages=TWO)
    assert resumed.get("entities") == ["long"]
    assert fork == {"from": "tip", "head_messages": 3, "tip_messages": 4}
    tips = resumed.get(lineage.NAMESPACE)["tips"]
    assert [t[2]["entities"] for t in tips] == [["short"], ["other"], ["head"]]


def test_a_lone_turn_keeps_the_stored_turns_for_history_restore() -> None:
    state = stored(hashes("s", "u1"), {"history": [{"role": "user"}], **BRANCH})
    resumed, _, _ = lineage.resume(state, hashes("s", "u2"), messages=LONE)
    assert resumed.get("history") == [{"role": "user"}] and resumed.get("entities") is None
    resumed, _, _ = lineage.resume(state, hashes("s", "u2"), messages=TWO)
    assert resumed.get("history") is None


def test_tips_are_bounded_by_count_and_size() -> None:
    big = {"entities": ["x" * (lineage.MAX_TIP_BYTES + 1)]}
    state = stored(hashes("s", "big"), big)
    resumed, _, _ = lineage.resume(state, hashes("s", "other"), messages=TWO)
    assert resumed.get(lineage.NAMESPACE)["tips"] == []  # too big to keep
    for k in range(lineage.MAX_TIPS + 3):
        state = lineage.record(
            state.with_value("entities", [k]), lineage.key_of(hashes("s", f"b{k}"))
        )
        state, _, _ = lineage.resume(state, hashes("s", f"b{k + 1}"), messages=TWO)
    tips = state.get(lineage.NAMESPACE)["tips"]
    assert [t[2]["entities"] for t in tips] == [[k] for k in range(3, lineage.MAX_TIPS + 3)]
    assert len(orjson.dumps(tips)) < lineage.MAX_TIPS * lineage.MAX_TIP_BYTES


def test_record_keeps_the_same_state_when_nothing_changed() -> None:
    state = stored(hashes("s", "u"), BRANCH)
    assert lineage.record(state, lineage.key_of(hashes("s", "u"))) is state
    assert lineage.record(state, lineage.key_of(hashes("s", "u", "a"))) is not state


def test_resume_gives_the_key_record_stores() -> None:
    for history in (hashes("s", "u"), hashes("s", "u", "a", "t"), hashes("s"), hashes("x", "y")):
        state = stored(hashes("s", "u"), BRANCH)
        assert lineage.resume(state, history, messages=TWO)[2] == lineage.key_of(history, TWO)


def test_the_chain_depends_on_every_hash_and_its_order() -> None:
    base = lineage.chain(hashes("a", "b", "c"), 3)
    assert base != lineage.chain(hashes("a", "c", "b"), 3)
    assert base != lineage.chain(hashes("a", "b", "d"), 3)
    assert lineage.chain(hashes("a", "b", "c", "d"), 3) == base


def test_a_last_turn_resent_with_another_provenance_tag_is_the_same_branch() -> None:
    """Claude Code moves its cache mark off its last turn, and the turn comes back as a string
    instead of a one-block list: the Messages adapter tags the lowered message by where it came
    from ("3.0", then "3"). The history is the same: the state carries on. Another text in that
    turn is a fork."""
    tag = lineage.TAG
    answer = {"role": "assistant", "content": "c"}
    asked = {"role": "user", "content": "q", tag: "3.0"}
    before = [*TWO, {"role": "assistant", "content": "b"}, asked]
    again = [*before[:3], {"role": "user", "content": "q", tag: "3"}, answer]
    other = [*before[:3], {"role": "user", "content": "q2", tag: "3"}, answer]
    content = [lineage.content_hash(m) for m in before]
    state = lineage.record(SessionState({**BRANCH}), lineage.key_of(content, before))
    for grown, forked in ((again, False), (other, True)):
        history = [lineage.content_hash(m) for m in grown]
        resumed, fork, _ = lineage.resume(state, history, messages=grown)
        assert (fork is not None) is forked
        assert (resumed.get("entities") is None) is forked
