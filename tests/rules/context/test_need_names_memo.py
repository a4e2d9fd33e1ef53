"""need.judge's names memos (``NAMES_MEMO``, ``SENT_NAMES_MEMO``, kept across a session's
requests): judged with them as without, on varied sessions, a message whose content changed (a
new object) and a forwarded text that changed; a warm look scans no result again; one entry per
result message, charged to the session's memos by its names' bytes."""

from __future__ import annotations

import random
from typing import Any

import pytest

from proxy.rewrite.session_memos import ObjectMemos, SessionMemos
from rules.activity.observations import observations
from rules.context import digest, need
from rules.context.overlay import PLACEHOLDER_PREFIX
from tests.support.factories import assistant, call, result, shell, user

Table = dict[int, tuple[Any, Any]]


def _session(seed: int, results: int = 24) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    msgs: list[dict[str, Any]] = [user("Fix the handlers")]
    for k in range(results):
        shared = rng.randrange(6)  # names later results show again
        lines = [f"src/mod_{shared}.py:{i}: def handler_{shared}_{i}()" for i in range(4)]
        lines += [f"src/own_{k}.py:{i}: value_{k}_{i}" for i in range(rng.randrange(0, 40))]
        kind = rng.randrange(4)
        if kind == 0:
            c = shell(f"c{k}", f"grep -rn handler_{shared} src")
        elif kind == 1:
            c = call(f"c{k}", "Read", file_path=f"src/mod_{shared}.py")
        elif kind == 2:
            path = f"src/mod_{shared}.py"
            c = call(f"c{k}", "Edit", file_path=path, old_string="a", new_string="b")
        else:
            c = shell(f"c{k}", "python -m pytest -q")
            lines = ["prose with no names at all " * rng.randrange(1, 40)]
        msgs += [assistant(None, c), result(f"c{k}", "\n".join(lines))]
    return msgs


def _forwarded(msgs: list[dict[str, Any]], seed: int) -> dict[int, str]:
    """Some results capped (head and tail), elided (a placeholder) or dropped."""
    rng = random.Random(seed)
    out: dict[int, str] = {}
    for o in observations(msgs):
        text = msgs[o.result_index]["content"]
        pick = rng.randrange(4)
        if pick == 0:
            out[o.result_index] = f"{text[:60]}\n{PLACEHOLDER_PREFIX} capped]\n{text[-60:]}"
        elif pick == 1:
            out[o.result_index] = f"{PLACEHOLDER_PREFIX} elided; it showed: src/mod_{seed}.py]"
        elif pick == 2:
            out[o.result_index] = ""
    return out


def _judge(
    msgs: list[dict[str, Any]], sent: dict[int, str] | None, memos: dict[str, Table] | None
) -> dict[int, need.Need]:
    obs = observations(msgs)
    candidates = [o.result_index for o in obs][: len(obs) - 3]
    return need.judge(msgs, obs, candidates, ("src/mod_1.py",), sent, True, memos)


def _tables() -> dict[str, Table]:
    return {need.NAMES_MEMO: {}, need.SENT_NAMES_MEMO: {}}


@pytest.mark.parametrize("seed", range(8))
def test_judged_with_the_memos_as_without(seed: int) -> None:
    msgs = _session(seed)
    sent = _forwarded(msgs, seed)
    memos = _tables()
    # cold, then warm, then the same messages forwarded otherwise (other caps and elisions)
    for forwarded in (None, sent, sent, None, _forwarded(msgs, seed + 100), sent):
        assert _judge(msgs, forwarded, memos) == _judge(msgs, forwarded, None)
    # a message whose content changed (a new object at the same index) and a forwarded text
    # that changed (the same message elided now): judged as without the memos
    later = next(i for i in sorted(sent, reverse=True) if sent[i])
    changed = list(msgs)
    changed[later] = {**msgs[later], "content": "src/brand_new.py:1: def fresh_handler()"}
    resent = {**sent, later: f"{PLACEHOLDER_PREFIX} elided; it showed: src/other_{seed}.py]"}
    assert _judge(changed, resent, memos) == _judge(changed, resent, None)
    assert _judge(changed, None, memos) == _judge(changed, None, None)
    assert _judge(msgs, sent, memos) == _judge(msgs, sent, None)  # the old object again


def test_a_warm_look_scans_no_result_again(monkeypatch: pytest.MonkeyPatch) -> None:
    msgs = _session(3)
    sent = _forwarded(msgs, 3)
    changed = "src/changed_now.py:1: x"
    texts = {m["content"] for m in msgs if m.get("role") == "tool"} | {*sent.values(), changed}
    scanned: list[str] = []
    real = digest.names

    def counting(text: str) -> frozenset[str]:
        if text in texts:
            scanned.append(text)
        return real(text)

    monkeypatch.setattr(digest, "names", counting)
    memos = _tables()
    _judge(msgs, sent, memos)
    assert scanned  # the control: a cold look scans them
    scanned.clear()
    _judge(msgs, sent, memos)
    assert scanned == []
    _judge(msgs, {**sent, max(sent): changed}, memos)
    assert scanned == [changed]  # only the forwarded text that changed


def test_one_entry_per_result_message_charged_by_its_names() -> None:
    msgs = _session(5)
    sent = _forwarded(msgs, 5)
    memos = _tables()
    for forwarded in (sent, _forwarded(msgs, 6), sent):  # forwarded texts replaced, not added
        _judge(msgs, forwarded, memos)
    results = sum(1 for m in msgs if m.get("role") == "tool")
    assert 0 < len(memos[need.NAMES_MEMO]) <= results
    assert 0 < len(memos[need.SENT_NAMES_MEMO]) <= results
    held = need.names_held(memos)
    names = [v[1][0] for v in memos[need.NAMES_MEMO].values()]
    assert held >= sum(need.NAME_BYTES * len(n) + sum(map(len, n)) for n in names)
    kept = ObjectMemos()
    kept.tables.update(memos)
    assert kept.charge() == 160 * kept.entries() + held  # ENTRY_BYTES each, and the names
    # a session whose names alone are over the bound is let go
    pool = SessionMemos(max_bytes=held // 2)
    taken = pool.take("s", None)
    taken.tables.update(memos)
    pool.settle("s", None, taken, objects=len(msgs))
    assert len(pool) == 0 and pool.held_bytes == 0


def test_a_later_result_forwarded_otherwise_is_counted_as_now_forwarded() -> None:
    hits = "\n".join(f"src/mod_{i}.py:{i}: def handler_{i}()" for i in range(12))
    msgs = [
        user("Find the handlers"),
        assistant(None, shell("g", "grep -rn handler src")),
        result("g", hits),
        assistant(None, shell("p", "grep -rn handler src/")),
        result("p", hits + "\n"),  # shows every name again
    ]
    for k in range(3):
        msgs += [assistant(None, shell(f"s{k}", "git status")), result(f"s{k}", f"M f{k}")]
    memos = _tables()

    def new(sent: dict[int, str]) -> str:
        judged = need.judge(msgs, observations(msgs), [2], forwarded=sent, memos=memos)
        return dict(judged[2].features)["new"]

    assert new({4: hits}) == "0"  # forwarded whole: every name is shown later
    assert new({4: f"{PLACEHOLDER_PREFIX} elided]"}) == "5+"  # the same message elided now
    assert new({4: hits}) == "0"
