"""The rules' per-session shortcuts over the messages a request shares with the session's last one
(``Context.memo``): each answer equals the same function computed on the whole list with nothing
kept, over growing sessions with edits, resends of changed earlier messages, compactions (older
messages replaced or dropped) and lists that are not the session's next one."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest

from rules.base import ListMemo, Message, frozen
from rules.context import sticky, working_set
from rules.entities import ref_question, resolve_refs
from rules.messages import (
    INJECT_CLOSE,
    INJECT_OPEN,
    PLACEHOLDER_PREFIX,
    last_of_role,
    last_where,
    shared_prefix,
)
from rules.workspace import workspace_map

BLOCK = f"{INJECT_OPEN}\nRecent: a.py\n{INJECT_CLOSE}"


def message(rng: random.Random, n: int) -> Message:
    kind = rng.choice(["call", "result", "result", "user", "host", "host_parts", "placeholder"])
    if kind == "call":
        return {"role": "assistant", "content": "", "tool_calls": [{"id": f"c{n}"}]}
    if kind == "result":
        return {"role": "tool", "tool_call_id": f"c{n}", "content": f"out {n}"}
    if kind == "user":
        return {"role": "user", "content": f"do thing {n}"}
    if kind == "host":  # a message a block was placed on (the rules' own output sent again)
        return {"role": "user", "content": f"text {n}\n\n{BLOCK}"}
    if kind == "host_parts":
        return {"role": "user", "content": [{"type": "text", "text": f"t {n}"},
                                            {"type": "text", "text": BLOCK}]}  # fmt: skip
    return {"role": "user", "content": f"{PLACEHOLDER_PREFIX} result {n}"}


def sessions(seed: int, steps: int = 400) -> list[list[Message]]:
    """A session's successive message lists: mostly its next request (the same objects and one
    to three more), sometimes an earlier message resent changed, a compaction (the oldest
    replaced by one summary, or dropped), a resend of the same list or another session's list."""
    rng = random.Random(seed)
    history: list[Message] = [{"role": "system", "content": "sys"}]
    out = []
    for n in range(steps):
        op = rng.random()
        if op < 0.6:
            history = [*history, *(message(rng, n * 10 + k) for k in range(rng.randint(1, 3)))]
        elif op < 0.75 and len(history) > 2:
            i = rng.randrange(1, len(history))
            history = [*history[:i], message(rng, n * 10), *history[i + 1 :]]
        elif op < 0.85 and len(history) > 6:
            cut = rng.randrange(2, len(history) - 2)
            summary = [{"role": "user", "content": f"summary {n}"}] if rng.random() < 0.5 else []
            history = [history[0], *summary, *history[cut:]]
        elif op < 0.9:
            history = list(history)  # the same objects, a list of its own
        elif op < 0.95:
            out.append([message(rng, n * 10 + k) for k in range(rng.randint(1, 8))])  # another
            continue
        out.append(history)
    return out


def test_first_host_is_the_whole_lists() -> None:
    for seed in range(6):
        memo: ListMemo = {}
        found = 0
        for messages in sessions(seed):
            want = sticky._first_host(messages)
            assert sticky.first_host(messages, memo) == want
            found += want is not None
        assert found  # hosts were there to be found


def test_strip_with_the_memo_is_strip_without() -> None:
    for seed in range(3):
        memo: ListMemo = {}
        for messages in sessions(seed, 200):
            assert sticky.strip(messages, {BLOCK}, memo) == sticky.strip(messages, {BLOCK})


def test_last_users_turn_is_the_whole_lists() -> None:
    for seed in range(6):
        memo: ListMemo = {}
        moved = 0
        for messages in sessions(seed):
            want = working_set.last_users_turn(messages)
            got = working_set.last_users_turn(messages, memo)
            assert got == want
            moved += want is not None and want < len(messages) - 3
        assert moved  # answers far from the end, taken over from the last list


def test_latest_user_text_is_the_whole_lists() -> None:
    for seed in range(6):
        memo: ListMemo = {}
        for messages in sessions(seed):
            own = ref_question._users_own
            want = max((i for i, m in enumerate(messages) if own(m)), default=None)
            assert last_where(messages, own, memo, ref_question.LATEST_MEMO) == want


class Recorded(Sequence[Message]):
    """A message list that notes the index of every message read one by one."""

    def __init__(self, items: list[Message]) -> None:
        self.items = items
        self.reads: set[int] = set()

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, int):
            self.reads.add(index % len(self.items))
        return self.items[index]


@pytest.mark.parametrize("near", [0, 3])
def test_last_of_role_is_the_whole_lists(near: int) -> None:
    """The last user-role message: among the last ``near``, else looked for only past the tail
    of an earlier list that the list still holds at the same place (changed, dropped or moved
    messages are looked at again). Answered from the memo, the answer's message is not read
    (a search that ignores the memo reads it)."""
    far = taken = 0
    for seed in range(6):
        memo: ListMemo = {}
        for messages in sessions(seed):
            want = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=None)
            recorded = Recorded(messages)
            assert last_of_role(recorded, "user", near, memo, "last_user") == want
            if want is not None and want < len(messages) - near - 3:  # far from the end
                far += 1
                taken += want not in recorded.reads  # taken from the memo
    assert taken > far // 2 > 0


@pytest.mark.parametrize("near", [0, 4])
def test_last_of_role_looks_again_at_a_tail_changed_in_place_of_a_message(near: int) -> None:
    """A message of the kept tail replaced by a user-role one (another object, same place), or
    the tail moved by a compaction: never answered from the memo."""
    loop = [{"role": "user", "content": "go"}] + [
        {"role": "assistant" if i % 2 else "tool", "content": f"step {i}"} for i in range(200)
    ]
    memo: ListMemo = {}
    assert last_of_role(loop, "user", near, memo, "u") == 0
    edited = [*loop[:150], {"role": "user", "content": "wait"}, *loop[151:], loop[-1]]
    assert last_of_role(edited, "user", near, memo, "u") == 150
    equal = [dict(m) for m in edited]  # equal messages, other objects: the same answer
    assert last_of_role(equal, "user", near, memo, "u") == 150
    moved = [{"role": "system", "content": "s"}, *equal[140:]]  # the question now at 11
    assert last_of_role(moved, "user", near, memo, "u") == 11
    assert last_of_role([m for m in moved if m["role"] != "user"], "user", near, memo, "u") is None
    assert last_of_role(moved[:5], "user", near, memo, "u") is None


def test_latest_own_is_the_whole_lists_near_the_end_or_far() -> None:
    """resolve_refs' search for the question: among the last messages first, else past the
    messages the list shares with the last one; long tool loops put it far from the end."""
    own = ref_question._users_own
    near = far = 0
    for seed in range(4):
        rng = random.Random(seed)
        memo: ListMemo = {}
        history: list[Message] = [{"role": "system", "content": "sys"}]
        for n in range(300):
            loop = rng.random() < 0.98  # mostly a tool loop: calls and results
            kinds = ["call", "result"] if loop else ["user", "host", "placeholder", "result"]
            history = [*history, message(rng, n) if not loop else _loop_step(rng, n, kinds)]
            if rng.random() < 0.01:  # a compaction
                history = list(history[:1]) + history[rng.randrange(1, len(history)) :]
            want = max((i for i, m in enumerate(history) if own(m)), default=None)
            last_user = last_of_role(
                history, "user", ref_question.NEAR_END, memo, resolve_refs.LAST_USER_MEMO
            )
            assert ref_question.latest_own(history, memo, last_user) == want
            if want is not None:
                near += want >= len(history) - ref_question.NEAR_END
                far += want < len(history) - ref_question.NEAR_END
    assert near and far


def _loop_step(rng: random.Random, n: int, kinds: list[str]) -> Message:
    if rng.choice(kinds) == "call":
        return {"role": "assistant", "content": "", "tool_calls": [{"id": f"c{n}"}]}
    return {"role": "tool", "tool_call_id": f"c{n}", "content": f"out {n}"}


def test_the_maps_figures_are_the_whole_maps() -> None:
    """Maps that change (a new nodes object, as ``build`` makes), stay the very same object, or
    keep their nodes under another working directory."""
    rng = random.Random(5)
    memo: ListMemo = {}
    nodes: dict[str, list[Any]] = {}
    cwd: str | None = None
    for n in range(300):
        op = rng.random()
        if op < 0.4:
            nodes = {**nodes, f"/repo/src/m{n}.py": ["f", rng.choice(["r", "w", "c", "l"]), n]}
        elif op < 0.5 and nodes:
            nodes = {p: v for p, v in nodes.items() if p != rng.choice(list(nodes))}
        elif op < 0.6:
            cwd = rng.choice([None, "/repo", "/repo/src", "/elsewhere"])
        elif op < 0.65:
            nodes = {**nodes, f"/repo/lib{n}": ["d", "l", n]}
        want = workspace_map._figures(nodes, cwd, None)
        assert workspace_map._figures(nodes, cwd, memo) == want


def twin(m: Message, longer: dict[int, tuple[Message, Message]]) -> Message:
    """A user turn longer than a clip, harness text first (one twin for each object)."""
    if id(m) not in longer:
        text = m.get("content")
        if m.get("role") == "user" and isinstance(text, str):
            wrapped = f"<system-reminder>x</system-reminder>{text} " + "word " * 20
            longer[id(m)] = (m, {**m, "content": wrapped})
        else:
            longer[id(m)] = (m, m)
    return longer[id(m)][1]


def test_the_ledger_with_kept_turn_texts_is_the_ledger_without() -> None:
    """working_set's user turns read once per object (``TASK_TEXT_MEMO``), under the limit they
    were read with: the ledger is the one built from every turn read afresh."""
    wide, narrow = working_set.Config(), working_set.Config(max_goal_chars=40)
    for seed in range(4):
        rng = random.Random(seed)
        longer: dict[int, tuple[Message, Message]] = {}  # each object's longer twin, once
        memo: ListMemo = {}
        texts: dict[int, tuple[Any, Any]] = {}
        kept: dict[str, Any] = {}
        fresh: dict[str, Any] = {}
        changed = 0
        for listed in sessions(seed, 200):
            messages = [twin(m, longer) for m in listed]
            cfg = narrow if rng.random() < 0.3 else wide  # the options may change between requests
            got = working_set.build(messages, kept, cfg, memo=memo, texts=texts)
            want = working_set.build(messages, fresh, cfg)
            assert got == want
            changed += got.get("instruction") != kept.get("instruction")
            kept, fresh = got, want
        assert changed > 20 and texts  # turns came and went, read through the table


def walked(before: Sequence[Message], now: Sequence[Message]) -> int:
    """``shared_prefix`` without its memory: the leading messages that are the same objects."""
    k = 0
    for a, b in zip(before, now, strict=False):
        if a is not b:
            break
        k += 1
    return k


def test_shared_prefix_answered_again_is_the_walk() -> None:
    """The rules keep the session's last list as one tuple (``frozen``) and ask of it with each
    list of the next request: an answer given again is the walk's, for lists that grew since,
    other lists of the same objects, and other kept tuples."""
    for seed in range(6):
        kept: list[tuple[Message, ...]] = []
        again = 0
        for messages in sessions(seed):
            grown = list(messages)  # grows between the questions below (a list of its own)
            for before in kept[-3:]:
                assert frozen(messages) is frozen(messages)  # one tuple for the list
                for now in (messages, grown, messages):
                    assert shared_prefix(before, now) == walked(before, now)
                grown.append({"role": "user", "content": "more"})
                assert shared_prefix(before, grown) == walked(before, grown)
                # a list taking the kept one's messages one by one: its answer grows with it
                taking = list(before[: len(before) // 2])
                for m in before[len(before) // 2 :][:4]:
                    assert shared_prefix(before, taking) == walked(before, taking)
                    taking.append(m)
                    assert shared_prefix(before, taking) == walked(before, taking)
                again += 1
            kept.append(frozen(messages))
        assert again > 100
