"""inject, sticky: a forwarded block is history. Later requests replay it byte for byte in the
same place; a changed working set adds exactly one delta block at the tail; a compaction
collapses the stored blocks into one whole block; a host that left the conversation makes the
next block whole again; `sticky: false` keeps the old block-at-every-tail behaviour."""

from __future__ import annotations

from typing import Any

from rules.base import SessionState
from rules.context import inject
from rules.messages import INJECT_CLOSE, INJECT_OPEN, text_of
from tests.support.factories import assistant, ctx, result, shell, user

# the working set said whenever it changes: what this file checks is how blocks are replayed and
# added (when a block is worth adding is test_task_aware's)
CFG = inject.Config(working_set_when="always", say_visible=True)  # the blocks' mechanics alone


def ledger(changed: list[str], diags: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    runs = {"pytest": {"seq": 1, "diagnostics": diags}} if diags else {}
    return {"goal": "make the tests pass", "changed": changed, "runs": runs}


DIAG = {"tool": "pytest", "file": "t.py", "line": 3, "code": None, "message": "assert 1 == 2"}


def turn(n: int) -> list[dict[str, Any]]:
    return [assistant(None, shell(f"c{n}", f"echo step {n}")), result(f"c{n}", f"step {n}")]


def conversation(steps: int) -> list[dict[str, Any]]:
    msgs = [user("make the tests pass")]
    for n in range(steps):
        msgs += turn(n)
    return msgs


def run(messages: list[dict[str, Any]], state: dict[str, Any], cfg: inject.Config = CFG, **kw: Any):  # type: ignore[no-untyped-def]
    return inject.apply(ctx(messages, now=1010.0, state=SessionState(state), **kw), cfg)


def blocks_in(messages: list[dict[str, Any]]) -> list[str]:
    out = []
    for m in messages:
        text = text_of(m.get("content"))
        start = 0
        while (i := text.find(INJECT_OPEN, start)) >= 0:
            j = text.index(INJECT_CLOSE, i) + len(INJECT_CLOSE)
            out.append(text[i:j])
            start = j
    return out


def test_a_forwarded_block_is_replayed_byte_for_byte_and_nothing_new_is_added() -> None:
    first_msgs = conversation(3)
    first = run(first_msgs, {"working_set": ledger(["a.py"])})
    assert first.report["inject"]["added"] is True and not first.report["inject"]["delta"]
    (block,) = blocks_in(first.messages)
    later = first_msgs + turn(3) + turn(4)  # the client's transcript: no block in it
    second = run(later, first.state.to_json())
    n = len(first.messages)
    assert second.messages[:n] == first.messages  # the same bytes in the same place
    assert blocks_in(second.messages) == [block]
    assert second.messages[n:] == later[n:]  # the new tail as the client sent it
    assert second.report["inject"] == {"sticky": 1}
    assert second.state.get("inject") == first.state.get("inject")


def test_a_changed_working_set_adds_exactly_one_delta_block() -> None:
    msgs = conversation(3)
    first = run(msgs, {"working_set": ledger(["a.py"], [DIAG])})
    later = msgs + turn(3)
    second = run(later, {**first.state.to_json(), "working_set": ledger(["a.py", "b.py"])})
    report = second.report["inject"]
    assert report["added"] is True and report["delta"] is True and report["sticky"] == 1
    old, new = blocks_in(second.messages)
    assert old == blocks_in(first.messages)[0]
    assert "b.py" in new and "a.py" not in new and "make the tests pass" not in new
    assert "Closed: pytest t.py:3 assert 1 == 2" in new  # the failure is no longer open
    assert "Next repair target: none" in new
    assert second.messages[: len(first.messages)] == first.messages
    assert text_of(second.messages[-1]["content"]).endswith(new)


def test_a_compaction_collapses_the_blocks_into_one_whole_block() -> None:
    msgs = conversation(3)
    state = run(msgs, {"working_set": ledger(["a.py"])}).state.to_json()
    msgs += turn(3)
    state = run(msgs, {**state, "working_set": ledger(["a.py", "b.py"])}).state.to_json()
    assert len(state["inject"]["blocks"]) == 2
    msgs += turn(4)
    out = run(msgs, state, report={"prune": {"compacted": True}})
    report = out.report["inject"]
    assert report["collapsed"] == 2 and report["added"] is True and not report["delta"]
    (block,) = blocks_in(out.messages)
    assert "a.py" in block and "b.py" in block and "make the tests pass" in block
    assert len(out.state.get("inject")["blocks"]) == 1


def test_a_host_gone_from_the_conversation_makes_the_next_block_whole() -> None:
    msgs = conversation(3)
    state = run(msgs, {"working_set": ledger(["a.py"])}).state.to_json()
    trimmed = [msgs[0], *turn(7), *turn(8), *turn(9)]  # the agent trimmed its own history
    out = run(trimmed, state)
    assert out.report["inject"]["lost"] == 1 and out.report["inject"]["delta"] is False
    (block,) = blocks_in(out.messages)
    assert "make the tests pass" in block and "a.py" in block


def test_a_resent_request_with_news_keeps_its_block_and_adds_the_delta_after_it() -> None:
    msgs = conversation(3)
    first = run(msgs, {"working_set": ledger(["a.py"])})
    again = run(msgs, {**first.state.to_json(), "working_set": ledger(["a.py", "c.py"])})
    old, new = blocks_in(again.messages)
    assert old == blocks_in(first.messages)[0] and "c.py" in new
    assert len(again.messages) == len(msgs)
    assert text_of(again.messages[-1]["content"]).startswith(text_of(first.messages[-1]["content"]))


def test_message_position_replays_a_message_of_its_own() -> None:
    cfg = inject.Config(position="message", working_set_when="always")
    msgs = conversation(3)
    first = run(msgs, {"working_set": ledger(["a.py"])}, cfg)
    assert len(first.messages) == len(msgs) + 1
    second = run(msgs + turn(3), first.state.to_json(), cfg)
    assert second.messages[: len(first.messages)] == first.messages
    assert second.messages[len(first.messages) :] == turn(3)


def test_applied_to_its_own_output_with_its_own_state_nothing_changes() -> None:
    msgs = conversation(3)
    first = run(msgs, {"working_set": ledger(["a.py"])})
    second = run(msgs + turn(3), {**first.state.to_json(), "working_set": ledger(["a.py", "b.py"])})
    again = run(
        second.messages, {**second.state.to_json(), "working_set": ledger(["a.py", "b.py"])}
    )
    assert again.messages is second.messages


def test_not_sticky_puts_one_whole_block_at_every_tail_and_stores_nothing() -> None:
    cfg = inject.Config(sticky=False, working_set_when="always")
    msgs = conversation(3)
    first = run(msgs, {"working_set": ledger(["a.py"])}, cfg)
    assert first.state.get("inject") is None
    second = run(msgs + turn(3), {"working_set": ledger(["a.py"])}, cfg)
    assert second.messages[: len(msgs)] == msgs  # the earlier tail without its block
    (block,) = blocks_in(second.messages)
    assert block == blocks_in(first.messages)[0]


def test_a_reference_line_is_said_once_per_turn() -> None:
    ref = {
        "mention": "that file",
        "entity": {"type": "file", "name": "a.py", "path": "/w/a.py", "action": "create"},
        "confidence": 0.8,
        "chain": [{"session": "s", "depth": 0, "candidates": 1}],
    }
    msgs = [user("open that file")]
    first = run(msgs, {}, report={"references": [ref]})
    assert "means the file /w/a.py" in blocks_in(first.messages)[0]
    msgs = [*msgs, *turn(1)]  # the agent's loop goes on under the same user message
    second = run(msgs, first.state.to_json(), report={"references": [ref]})
    assert len(blocks_in(second.messages)) == 1 and "added" not in second.report["inject"]
