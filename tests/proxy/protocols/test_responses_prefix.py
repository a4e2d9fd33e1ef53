"""The Responses adapter's reuse of a session's previous request (``responses_prefix``): over a
session that grows as Codex's does (reasoning, calls, custom calls, outputs long enough to prune),
with an item rewritten in the middle, keys reordered in an old item, changed instructions, a run
of assistant items that goes on in the next request, another session sending the same start and
``previous_response_id`` bodies, the forwarded bytes and the report are exactly what an adapter
that keeps nothing gives; and the reuse does happen where the items are shared."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import orjson
import pytest

import proxy.protocols.responses as responses_module
from proxy.protocols.checks import responses_violations
from proxy.protocols.responses import ResponsesAdapter
from proxy.protocols.responses_prefix import Lowering
from proxy.rewrite.engine import Engine
from proxy.settings import default_rule_names
from tests.proxy.protocols.test_responses_adapter import body, call, msg, output, reasoning
from tests.support.twin_engines import fresh, through_both, twin_engines

# inject says the working set (every line, in view or not) on every request that changes it, so
# most requests are rewritten (at the tail) and the lifting's reuse is exercised on each
RULES = [
    {"name": n, **({"working_set_when": "always", "say_visible": True} if n == "inject" else {})}
    for n in default_rule_names()
]
SETTINGS = {"upstreams": [{"name": "o"}], "pipeline": {"budget_tokens": 16000}, "rules": RULES}
PATCH = "*** Begin Patch\n*** Update File: src/a.py\n@@\n-x = 1\n+x = 2\n*** End Patch"


def custom(cid: str) -> dict[str, Any]:
    return {"type": "custom_tool_call", "id": f"ctc_{cid}", "call_id": cid,
            "name": "apply_patch", "input": PATCH}  # fmt: skip


def step(i: int) -> list[dict[str, Any]]:
    """One agent step: a call (some after reasoning and a message, some a custom call) and its
    output (some long, to be pruned)."""
    cid = f"call_{i:03d}"
    if i % 5 == 4:
        return [custom(cid), {"type": "custom_tool_call_output", "call_id": cid, "output": "ok"}]
    lines = 120 if i % 3 == 0 else 3
    text = "".join(f"line {j} of file{i}.py: value = {i * j}\n" for j in range(lines))
    first = [summed(i), msg("assistant", f"Reading file{i}.", i)] if i % 4 == 1 else []
    return [*first, call(cid, f"cat src/file{i}.py"), output(cid, text)]


def summed(i: int) -> dict[str, Any]:
    """A reasoning item, with a summary every other time (measured as the reasoning section)."""
    item = reasoning(i)
    if i % 8 == 1:
        item["summary"] = [{"type": "summary_text", "text": f"**Reading file{i}**\nTo see why."}]
    return item


def conversation(steps: int, first: str = "Fix the failing tests in src/.") -> list[Any]:
    out = [msg("developer", "You are Codex."), msg("user", first)]
    for i in range(steps):
        out += step(i)
    return out


class Spy:
    """What the kept adapter reused at each request: the item lowering went on from, and the
    output messages whose lifting was reused."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.starts: list[int] = []
        self.lifted: list[int] = []
        real = responses_module.reuse_lifted
        starts = self.starts

        class Spied(Lowering):
            def __init__(self, st: Any, *args: Any) -> None:
                super().__init__(st, *args)
                if st.prefix is not None:
                    starts.append(self.start)

        def spy(st: Any, hashes: Any, base: int, out: Any) -> int:
            k = real(st, hashes, base, out)
            if st.prefix is not None:  # the kept adapter's (the fresh ones keep nothing)
                self.lifted.append(k - base)
            return k

        monkeypatch.setattr(responses_module, "reuse_lifted", spy)
        monkeypatch.setattr(responses_module, "Lowering", Spied)
        # the final check resumed only where the forwarded items start with the very JSON of
        # the items its state was kept for
        self.resumed = 0
        checked_on: dict[int, tuple[Any, list[bytes]]] = {}
        real_check = responses_module.responses_checked

        def check(b: dict[str, Any], resume: Any = None, keep: int = -1) -> Any:
            found, state = real_check(b, resume, keep)
            items = b.get("input")
            if resume is not None:
                self.resumed += 1
                kept, before = checked_on[id(resume)]
                n = resume.count + 1
                assert kept is resume and [orjson.dumps(x) for x in items[:n]] == before[:n]
            if state is not None:
                checked_on[id(state)] = (state, [orjson.dumps(x) for x in items])
            return found, state

        monkeypatch.setattr(responses_module, "responses_checked", check)


@pytest.fixture
async def engines(tmp_path: Path) -> Any:
    async with twin_engines(tmp_path, SETTINGS) as pair:
        yield pair


async def both(
    fast: Engine,
    slow: Engine,
    adapter: ResponsesAdapter,
    b: dict[str, Any],
    now: float,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    return await through_both(fast, slow, adapter, ResponsesAdapter, b, now, headers)


def upto(history: list[Any], steps: int) -> list[Any]:
    """The conversation's items up to the end of step ``steps`` (exclusive)."""
    n, seen = 2, 0
    while seen < steps:
        n += len(step(seen))
        seen += 1
    return history[:n]


@pytest.mark.parametrize("back", [4, 1])
async def test_a_growing_session_forwards_what_nothing_kept_forwards(
    engines: Any, monkeypatch: pytest.MonkeyPatch, back: int
) -> None:
    """(``back``: where the final check's state is kept; 1, next to what the next request
    changes.)"""
    monkeypatch.setattr(responses_module, "CHECK_BACK", back)
    fast, slow = engines
    spy = Spy(monkeypatch)
    adapter = ResponsesAdapter()
    history = conversation(40)
    now = 1000.0
    for n in range(20, 41):
        now += 5
        items = [*upto(history, n), msg("user", f"Now step {n}: mkdir build{n}.", 100 + n)]
        got = await both(fast, slow, adapter, body(*items), now)
        assert responses_violations(got) == []
    # from the second request on, most of the conversation is the previous request's
    assert len(spy.starts) == len(spy.lifted) == 20
    assert all(s > 40 for s in spy.starts), spy.starts
    # all but what follows a compaction (prune rewrote the middle), which is lifted again
    assert sum(g > 30 for g in spy.lifted) >= 15, spy.lifted
    assert spy.resumed >= (15 if back == 4 else 0)  # the final check too
    snapshot = next(adapter.prefixes.snapshots())
    assert snapshot.lift is not None and len(snapshot.datas) == len(items)


async def test_edits_in_the_history_keys_and_instructions(
    engines: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast, slow = engines
    spy = Spy(monkeypatch)
    adapter = ResponsesAdapter()
    history = conversation(30)
    now = 1000.0
    for n in range(10, 16):
        now += 5
        await both(fast, slow, adapter, body(*upto(history, n)), now)
    items = copy.deepcopy(upto(history, 16))

    # a call's output in the middle of the history rewritten
    k = next(i for i, it in enumerate(items) if it.get("call_id") == "call_003" and "output" in it)
    items[k] = output("call_003", "something else entirely\n" * 50)
    now += 5
    await both(fast, slow, adapter, body(*items), now)
    assert spy.starts[-1] <= k and 0 < spy.lifted[-1] < k

    # an old call's arguments with their keys in another order (equal as dicts, not as bytes)
    c = next(i for i, it in enumerate(items) if it.get("call_id") == "call_002")
    items[c] = {"name": items[c]["name"], **items[c]}
    now += 5
    await both(fast, slow, adapter, body(*items), now)
    reordered = copy.deepcopy(items)
    reordered[c] = dict(reversed(list(items[c].items())))
    assert reordered == items and orjson.dumps(reordered) != orjson.dumps(items)
    now += 5
    got = await both(fast, slow, adapter, body(*reordered), now)
    assert spy.starts[-1] <= c
    assert orjson.dumps(got["input"][c]) == orjson.dumps(reordered[c])

    # changed instructions: nothing of the output shared (they come first)
    now += 5
    await both(fast, slow, adapter, body(*reordered, instructions="Be careful."), now)
    other = body(*reordered, instructions="Be careless.")
    now += 5
    await both(fast, slow, adapter, other, now)
    assert spy.lifted[-1] <= 0 and spy.starts[-1] > c  # the items' lowering is still shared

    # and growing again from there
    for extra in range(1, 4):
        now += 5
        grown = reordered + [it for i in range(16, 16 + extra) for it in step(i)]
        await both(fast, slow, adapter, body(*grown, instructions="Be careless."), now)
    assert spy.lifted[-1] > 10


async def test_a_run_of_assistant_items_that_goes_on(
    engines: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request ending on assistant items (reasoning, a message, calls), then the next one
    carrying more items of the same run: the run is one assistant message, lowered again."""
    fast, slow = engines
    spy = Spy(monkeypatch)
    adapter = ResponsesAdapter()
    start = conversation(8)
    now = 1000.0
    tail = [summed(49), msg("assistant", "Two reads at once.", 50), call("call_a", "ls")]
    await both(fast, slow, adapter, body(*start, *tail), now)
    for more in (
        [{"type": "web_search_call", "id": "ws_1", "status": "completed"}],  # the same view
        [summed(57), call("call_b", "pwd")],
        [output("call_a", "a\nb"), output("call_b", "/w")],
        [reasoning(52), msg("assistant", "Done.", 52)],
        [msg("user", "thanks", 53)],
    ):
        tail = [*tail, *more]
        now += 5
        got = await both(fast, slow, adapter, body(*start, *tail), now)
        assert responses_violations(got) == []
    assert spy.starts[0] < len(start) + 1  # the open run was lowered again


async def test_a_cut_reasoning_item_at_the_shared_boundary(
    engines: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The item after a shared reasoning item changes into a user message: the reasoning item
    is mended away (a full mend: nothing reused or kept for that request), as without reuse."""
    fast, slow = engines
    Spy(monkeypatch)
    adapter = ResponsesAdapter()
    start = conversation(6)
    now = 1000.0
    await both(fast, slow, adapter, body(*start, reasoning(60), call("call_x", "make")), now)
    now += 5
    got = await both(fast, slow, adapter, body(*start, reasoning(60), msg("user", "stop")), now)
    assert not any(it.get("id") == "rs_60" for it in got["input"])
    now += 5
    items = [*start, reasoning(60), call("call_x", "make"), output("call_x", "done")]
    await both(fast, slow, adapter, body(*items), now)


async def test_another_session_with_the_same_start(
    engines: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast, slow = engines
    Spy(monkeypatch)
    adapter = ResponsesAdapter()
    history = conversation(24)
    now = 1000.0
    for n in (8, 9, 10):
        for sid in ("a", "b"):
            now += 5
            items = upto(history, n if sid == "a" else n + 2)
            b = body(*items, prompt_cache_key=f"thread-{sid}")
            await both(fast, slow, adapter, b, now)
    assert len(adapter.prefixes) == 2  # each session keeps its own previous request
    now += 5
    b = body(*conversation(6, "Another task."), prompt_cache_key="thread-c")
    await both(fast, slow, adapter, b, now)
    assert len(adapter.prefixes) == 3


async def test_previous_response_id_bodies(engines: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``previous_response_id`` a client sends only what is new; consecutive requests share
    little or nothing, and may start with the same item."""
    fast, slow = engines
    Spy(monkeypatch)
    adapter = ResponsesAdapter()
    now = 1000.0
    sent = [msg("user", "Fix the failing tests in src/.")]
    await both(fast, slow, adapter, body(*sent), now)
    for i in range(6):
        now += 5
        b = body(*step(i)[-1:], msg("user", "go on", i), previous_response_id=f"resp_{i}")
        await both(fast, slow, adapter, b, now)
        now += 5
        b = body(*step(i)[-1:], previous_response_id=f"resp_{i}b")
        await both(fast, slow, adapter, b, now)
    now += 5
    b = body(output("call_005", "x\n" * 2000), previous_response_id="resp_9")
    await both(fast, slow, adapter, b, now)


async def test_a_written_result_follows_its_call_s_kind(
    engines: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A result the rules wrote for an unanswered call is a ``custom_tool_call_output`` or a
    ``function_call_output`` by the kind of the last call with its id, which a later item can
    change while the written result stays the same."""
    fast, slow = engines
    spy = Spy(monkeypatch)
    adapter = ResponsesAdapter()
    start = conversation(6)
    now = 1000.0
    items = [*start, custom("call_dup"), msg("user", "go on", 70)]
    got = await both(fast, slow, adapter, body(*items), now)
    assert any(it.get("type") == "custom_tool_call_output" for it in got["input"][-3:])
    for more in (
        [call("call_dup", "ls"), output("call_dup", "a.py")],
        [msg("user", "and now?", 71)],
    ):
        items = [*items, *more]
        now += 5
        await both(fast, slow, adapter, body(*items), now)
    assert spy.lifted[0] > 10, spy.lifted


def test_a_shared_prefix_s_parts_are_its_own() -> None:
    """The snapshot's tag index names each lowered message's position, and a tag of the previous
    request's messages past the shared ones names nothing in this request."""
    adapter = ResponsesAdapter()
    history = conversation(8)
    n = len(history)
    tail = [reasoning(90), msg("assistant", "Looking.", 90), call("call_z", "ls")]
    first = adapter.lower(body(*history, msg("user", "a", 90), *tail), "s")
    assert [first.state.parts.get(str(i)) is not None for i in (n, n + 1)] == [True, True]
    for extra in ([msg("user", "b", 91)], [msg("user", "b", 91), msg("user", "c", 92)]):
        lowered = adapter.lower(body(*history, *extra), "s")
        snap = lowered.state.snapshot
        assert snap.index == {tag: pos for pos, tag in enumerate(snap.tags)}
        assert lowered.state.parts.get(str(n)).items == (n,)
        stale = lowered.state.parts.get(str(n + 1))  # the first request's run, gone
        assert stale is None if len(extra) == 1 else stale.items == (n + 1,)


def test_the_rules_are_given_the_kept_lowerings_themselves() -> None:
    """The next request's chat view is made of the very objects the last one's was (the runner's
    per-object memos of the session know them), and equals what an adapter that keeps nothing
    gives."""
    adapter = ResponsesAdapter()
    b = body(*conversation(8))
    first = adapter.lower(fresh(b), "s").messages
    again = adapter.lower(fresh(b), "s")
    assert again.state.parts.count == len(again.messages)  # all of it from the snapshot
    assert all(a is c for a, c in zip(first, again.messages, strict=True))
    assert again.messages == ResponsesAdapter().lower(fresh(b), "s").messages
