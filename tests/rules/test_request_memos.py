"""Memos never answer for a message they were not computed from. Per request: a rule that
replaces a message (a new dict) gets it checked and measured afresh. (Across requests, the
runner's records: tests/proxy/rewrite/test_message_records.py.)"""

from __future__ import annotations

from typing import Any

from rules.chain.validator import find_violations
from rules.context import measure
from rules.context.working_set import _clip
from rules.messages import INJECT_CLOSE, INJECT_OPEN, with_content
from tests.support.factories import assistant, ctx, result, shell, system, user

S, U = system(), user("fix the build")
VALID = [
    S,
    U,
    assistant(None, shell("c1", "ls")),
    result("c1", "a.py"),
    assistant("checking", shell("c2", "pytest")),
    result("c2", "1 passed"),
]


def _broken_arguments(message: dict[str, Any]) -> dict[str, Any]:
    call = message["tool_calls"][0]
    bad = {**call, "function": {**call["function"], "arguments": '{"command": "ls'}}
    return {**message, "tool_calls": [bad]}


def test_validator_memo_rechecks_a_replaced_message() -> None:
    memo: dict[int, Any] = {}
    assert find_violations(VALID, memo) == []
    assert memo  # the assistant messages' own checks were kept
    replaced = list(VALID)
    replaced[2] = _broken_arguments(VALID[2])
    found = find_violations(replaced, memo)
    assert [(v["kind"], v["index"]) for v in found] == [("invalid_arguments", 2)]
    assert found == find_violations(replaced)  # the same answer as without a memo


def test_validator_memo_keeps_cross_message_checks() -> None:
    """What depends on the other messages (duplicate ids, unanswered calls, orphans) is checked on
    every pass, memo or not."""
    memo: dict[int, Any] = {}
    assert find_violations(VALID, memo) == []
    reordered = [VALID[0], VALID[1], VALID[2], VALID[4], VALID[3], VALID[5]]
    duplicated = [*VALID, VALID[2], VALID[3]]
    for messages in (reordered, duplicated, VALID[:3], [VALID[0], VALID[3]]):
        assert find_violations(messages, memo) == find_violations(messages)
        assert find_violations(messages, memo)


def test_context_tables_are_shared_by_evolved_contexts_and_kept_apart_by_name() -> None:
    context = ctx(U)
    table = context.table("a")
    table[1] = (U, "x")
    assert context.evolve(messages=[]).table("a") is table
    assert context.table("b") == {}


def test_measure_counts_replaced_and_added_messages_afresh() -> None:
    """measure sizes the run of messages both lists share (the very objects) once, and the rest
    per object: a replaced message counts with its new content, on the forwarded side only."""
    original = [*VALID, user("and the docs")]
    block = f"{INJECT_OPEN}\nWorking set:\n- Goal: x\n{INJECT_CLOSE}"
    variants = {
        "same": list(original),
        "tail": [*original[:-1], with_content(original[-1], f"and the docs\n\n{block}")],
        "middle": [*original[:3], with_content(original[3], "[ctxproxy: elided]"), *original[4:]],
        "shorter": original[:2],
        "longer": [*original, user(block)],
        "reordered": [original[1], original[0], *original[2:]],
    }
    for name, forwarded in variants.items():
        context = ctx(forwarded, original=original)
        got = measure.apply(context, measure.Config()).report["sections"]
        before = measure.measure_sections(original, None, context.tokens)
        after = measure.measure_sections(forwarded, None, context.tokens)
        assert got == {k: {"before": before[k], "after": after[k]} for k in measure.SECTIONS}, name


def _split_injected_reference(text: str) -> tuple[str, str]:
    """measure._split_injected as it was before it peeked at the tail first."""
    tail = text.rstrip()
    if not tail.endswith(INJECT_CLOSE):
        return text, ""
    start = tail.rfind(INJECT_OPEN, 0, len(tail) - len(INJECT_CLOSE))
    if (
        start < 0
        or (start > 0 and text[start - 1] != "\n")
        or tail[start + len(INJECT_OPEN)] != "\n"
    ):
        return text, ""
    return text[:start], text[start:]


def test_measure_tail_peek_agrees_with_a_full_strip() -> None:
    block = f"{INJECT_OPEN}\nRecent context:\n- x\n{INJECT_CLOSE}"
    texts = [
        "",
        " ",
        "plain",
        INJECT_CLOSE,
        block,
        "hi\n\n" + block,
        "hi\n\n" + block + "\n",
        "hi\n\n" + block + " \n\t" * 40,  # trailing whitespace longer than the peek
        "x" * 100 + "\n\n" + block + " " * 63,
        "x" * 100 + "\n\n" + block + " " * 64,
        "x" * 100 + "\n\n" + block + " " * 65,
        "log: " + block + "\nmore",
        "y" * 200 + INJECT_CLOSE[3:] + " " * 50,
        "y" * 200 + INJECT_CLOSE + "\u3000" * 70,  # Unicode whitespace is stripped too
        " " * 200,
    ]
    for text in texts:
        assert measure._split_injected(text) == _split_injected_reference(text), repr(text)


def test_clip_from_a_prefix_equals_clip_of_the_whole() -> None:
    def reference(text: str, limit: int) -> str:
        text = " ".join(text.split())
        return text if len(text) <= limit else text[: limit - 1] + "…"

    texts = [
        "",
        "word " * 1000,
        "a" * 5000,
        " " * 3000 + "tail words here",
        "x" * 1663 + " " * 2000 + "y",
        ("long-word" * 50 + " ") * 20,
        "\u3000".join(["全角"] * 2000),
        "a b\n\tc  " * 400,
    ]
    for text in texts:
        for limit in (40, 100, 400):
            for cut in (0, 1, 2, 3, 4 * limit + 63, 4 * limit + 64, 4 * limit + 65):
                sample = text[: len(text) - cut] if cut else text
                assert _clip(sample, limit) == reference(sample, limit), (sample[:40], limit)


def test_shared_tool_pairs_and_observations_follow_the_messages_list() -> None:
    """track_entities, working_set and prune share one pass over the tool pairs per messages
    list: a rule that changes the list (a new list object) gets its own."""
    from rules.activity.observations import observations, of_context

    context = ctx(VALID)
    assert of_context(context) == observations(VALID)
    fewer = [*VALID[:4], assistant("done")]
    later = context.evolve(messages=fewer)  # the same memo, another list
    assert of_context(later) == observations(fewer) != observations(VALID)
    assert of_context(context) == observations(VALID)


def test_an_observation_is_reused_only_for_the_same_call_result_and_places() -> None:
    from rules.activity.observations import observations

    seen: dict[int, Any] = {}
    assert observations(VALID, seen=seen) == observations(VALID)
    assert len(seen) == 2  # one per answered call
    again = observations(list(VALID), seen=seen)
    assert all(a is b for a, b in zip(again, observations(VALID, seen=seen), strict=True))
    failed = {**result("c2", "1 failed\nexit code 1"), "is_error": True}
    edited = [*VALID[:5], failed]  # the same call object, another result
    assert observations(edited, seen=seen) == observations(edited) != observations(VALID)
    moved = [S, U, user("and then"), *VALID[2:]]  # the same objects, at other indices
    assert observations(moved, seen=seen) == observations(moved)
    assert [o.result_index for o in observations(moved, seen=seen)] == [4, 6]


def test_a_list_of_the_very_same_messages_shares_a_derived_value() -> None:
    from rules.activity.observations import of_context

    context = ctx(VALID)
    first = of_context(context)
    assert of_context(context.evolve(messages=list(VALID))) is first  # same objects, new list
    copied = [*VALID[:-1], dict(VALID[-1])]  # one equal message, another object
    assert of_context(context.evolve(messages=copied)) is not first
    assert of_context(context.evolve(messages=VALID[:-1])) == of_context(ctx(VALID[:-1]))


def test_derived_values_of_a_few_lists_are_kept_at_once() -> None:
    """prune's view and the input alternate in a request: each keeps its value."""
    from rules.activity.observations import of_context

    context = ctx(VALID)
    shorter = context.evolve(messages=VALID[:4])
    first, other = of_context(context), of_context(shorter)
    assert of_context(context.evolve(messages=list(VALID))) is first
    assert of_context(shorter.evolve(messages=list(VALID[:4]))) is other
    assert other == of_context(ctx(VALID[:4])) != first


def test_hashes_of_a_resent_prefix_come_from_the_lists_hashed_last() -> None:
    """A session's next request resends its last one's messages: the client's list and the
    forwarded one (edited in place, a block before the tail) lend their hashes; each request
    hashes only what is new, and every hash is the message's own."""
    from rules.base import content_hash

    convo = [S, U]
    for k in range(20):
        convo += [assistant(f"step {k}", shell(f"c{k}", f"ls {k}")), result(f"c{k}", f"f{k}.py")]
    kept: dict[str, Any] = {}
    elided = with_content(convo[3], "[elided]")  # rendered once, the same object since
    for end in range(6, len(convo) + 1, 2):
        sent = convo[:end]
        forwarded = [*sent[:3], elided, *sent[4:-1], U, sent[-1]]
        # the forwarded list shares all but its last four with the last one (U moved on)
        for messages, new in ((sent, 6 if end == 6 else 2), (forwarded, 4)):
            request = ctx(list(messages), memo=kept)  # a request's own hashes: none known
            assert request.hashes_of(request.messages) == [content_hash(m) for m in messages]
            assert len(request.hashes) == new
    # a list sharing nothing is hashed whole; an edited earlier message from its place on
    changed = [*convo[:7], {**convo[7], "content": "other"}, *convo[8:]]
    request = ctx(changed, memo=kept)
    assert request.hashes_of(changed) == [content_hash(m) for m in changed]
    assert len(request.hashes) == len(changed) - 7


def test_unhashed_names_the_new_messages_and_a_replaced_one() -> None:
    kept: dict[str, Any] = {}
    first = ctx(list(VALID), memo=kept)
    first.hashes_of(first.messages)
    grown = [*VALID, assistant("done")]
    later = first.evolve(messages=grown)  # the session's hashes and lists, as the runner keeps
    assert later.unhashed(grown) == [len(VALID)]
    replaced = [*VALID[:2], dict(VALID[2]), *VALID[3:]]
    assert later.unhashed(replaced) == [2]
    assert ctx(grown, memo=kept).unhashed(grown) == list(range(len(grown)))  # hashes unknown
