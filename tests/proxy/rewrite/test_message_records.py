"""The runner's records: what one request derived from a message's content (hash, token counts
per encoding, section sizes, validator checks), kept for the next request by the serialised
message. They answer only for the very same content, per encoding, give the outcome a fresh
runner gives, and stay bounded. And the final integrity check still sees a message a rule
replaced after repair_tool_chain had validated (and memoised) the client's."""

from __future__ import annotations

import copy
from types import SimpleNamespace
from typing import Any

import orjson

from proxy.rewrite.pipeline import Pipeline
from proxy.rewrite.recall import Recall
from proxy.rewrite.records import RECORD_OVERHEAD_BYTES, MessageRecords
from proxy.settings import ConfiguredRule
from proxy.tokens import RequestTokens, TokenCounters
from rules.base import Context, RuleConfig, RuleResult
from rules.chain import repair_tool_chain
from rules.chain import validator as chain_validator
from rules.chain.validator import find_violations
from rules.registry import load_rule
from tests.rules.test_request_memos import VALID, _broken_arguments
from tests.support.factories import assistant, result, user


def _replaces_a_call_with_a_broken_one(ctx: Context, cfg: object) -> RuleResult:
    """A buggy rule: swaps an assistant message for a copy whose arguments are not JSON."""
    out = list(ctx.messages)
    out[2] = _broken_arguments(out[2])
    return RuleResult(out, ctx.state, {})


def test_integrity_check_catches_a_message_replaced_after_repair() -> None:
    """repair_tool_chain validates (and memoises) the client's messages; a later rule replaces
    one with a broken copy: the final integrity check must still see and repair it."""
    rules = [
        ConfiguredRule(name="repair_tool_chain", config=repair_tool_chain.Config()),
        ConfiguredRule(name="buggy", config=RuleConfig()),
    ]
    buggy = SimpleNamespace(apply=_replaces_a_call_with_a_broken_one)
    pipeline = Pipeline(rules, "fail", modules={"buggy": buggy})
    messages = list(VALID)
    ctx = Context(
        messages=messages,
        original_messages=messages,
        model="gpt-4o",
        now=0.0,
        tokens=RequestTokens(TokenCounters().for_model("gpt-4o")),
    )
    out = pipeline.run(ctx)
    memos = pipeline.memos_of(ctx)
    assert memos is not None and memos.tables[chain_validator.MEMO]  # the memo was in use
    assert find_violations(out.messages) == []
    kinds = [(r["kind"], r.get("cause")) for r in out.report["repairs"]]
    assert ("integrity_repair", "invalid_arguments") in kinds
    args = out.messages[2]["tool_calls"][0]["function"]["arguments"]
    assert orjson.loads(args) == {"raw_arguments": '{"command": "ls'}
    assert out.report["warnings"][0]["kind"] == "integrity_repair"


# ----- the runner's records: what one request derived from a message's content, for the next


def _run(pipeline: Pipeline, messages: list[dict[str, Any]], model: str = "gpt-4o") -> Any:
    messages = copy.deepcopy(messages)  # new objects, as every request brings
    ctx = Context(
        messages=messages,
        original_messages=messages,
        model=model,
        now=0.0,
        tokens=RequestTokens(COUNTERS.for_model(model)),
    )
    return pipeline.run(ctx)


COUNTERS = TokenCounters()
DEFAULT_RULES = [
    "repair_tool_chain",
    "fix_encoding",
    "track_entities",
    "working_set",
    "resolve_refs",
    "prune",
    "inject",
    "measure",
]


def _pipeline(mode: str = "fail") -> Pipeline:
    rules = [ConfiguredRule(name=n, config=load_rule(n).Config()) for n in DEFAULT_RULES]
    return Pipeline(rules, mode)  # type: ignore[arg-type]


def _same(a: Any, b: Any) -> None:
    assert orjson.dumps(a.messages) == orjson.dumps(b.messages)
    ra, rb = dict(a.report), dict(b.report)
    ra.pop("timings_ms"), rb.pop("timings_ms")
    assert orjson.dumps(ra) == orjson.dumps(rb)
    assert orjson.dumps(a.state.to_json()) == orjson.dumps(b.state.to_json())


def test_records_give_the_same_outcome_as_a_fresh_runner() -> None:
    korean = [*VALID, user("방금 만든 폴더를 삭제해"), assistant("삭제했습니다")]  # counts differ
    warm = _pipeline()
    counts = set()
    for model in ("gpt-4o", "gpt-4", "gpt-4o"):  # two encodings: counts kept per encoding
        first = _run(warm, korean, model)
        assert len(warm.records) == len(korean)
        again = _run(warm, korean, model)  # every message known from the first request
        _same(again, first)
        _same(again, _run(_pipeline(), korean, model))
        counts.add((again.report["tokens"]["before"], again.report["sections"]["user"]["before"]))
    assert len(counts) == 2
    record = next(iter(warm.records._young.values()))
    assert {"tokens:o200k_base", "tokens:cl100k_base", "hash"} <= set(record)


def test_records_never_answer_for_changed_content() -> None:
    """The same message with one thing changed is another record: its checks, counts and hash
    are its own (a broken call after a valid one is still repaired, longer text counts more)."""
    warm = _pipeline()
    _run(warm, VALID)
    broken = [*VALID[:2], _broken_arguments(VALID[2]), *VALID[3:]]
    out = _run(warm, broken)
    _same(out, _run(_pipeline(), broken))
    assert ("invalid_arguments", "wrapped_raw_arguments") in [
        (r["kind"], r["action"]) for r in out.report["repairs"]
    ]
    longer = [*VALID[:3], result("c1", "a.py b.py c.py d.py"), *VALID[4:]]
    out = _run(warm, longer)
    _same(out, _run(_pipeline(), longer))
    assert out.report["tokens"]["before"] > _run(warm, VALID).report["tokens"]["before"]
    assert len({r["hash"] for r in warm.records._young.values()}) == len(warm.records)


def test_records_cope_with_lone_surrogates_and_stay_bounded() -> None:
    # orjson refuses lone surrogates (a parsed body never has them): such a message gets no
    # record, and the rules meet it as they would without records
    odd = [*VALID, user("bad \udcff text")]
    ctx = Context(
        messages=odd,
        original_messages=odd,
        model="gpt-4o",
        now=0.0,
        tokens=RequestTokens(COUNTERS.for_model("gpt-4o")),
    )
    recall = Recall(MessageRecords(), ctx)
    assert [m for m, _ in recall.pairs] == VALID
    recall.keep()
    records = MessageRecords(max_bytes=4_000)
    for i in range(500):
        records.lookup(orjson.dumps(user(f"message number {i}"), option=orjson.OPT_SORT_KEYS))
    assert len(records) < 120
    data = orjson.dumps(VALID[3], option=orjson.OPT_SORT_KEYS)
    assert records.lookup(data) is records.lookup(bytes(bytearray(data)))  # by content


def test_record_keys_hold_just_their_bytes() -> None:
    """orjson's output keeps its buffer's capacity: the records keep compact copies."""
    import tracemalloc

    messages = [user(f"message {i} " + "x" * (i % 50)) for i in range(400)]
    records = MessageRecords()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for m in messages:
            records.lookup(orjson.dumps(m, option=orjson.OPT_SORT_KEYS))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    keys = sum(len(orjson.dumps(m)) for m in messages)
    assert held < 4 * keys + 400 * 400  # keys plus a small record each, not 10 kB buffers


def test_arguments_in_another_key_order_count_the_same_in_every_session() -> None:
    """Records are shared by all sessions and keyed by sorted-keys JSON: what they hold must not
    depend on the key order a client happened to send (object arguments are counted sorted)."""

    def conversation(arguments: dict) -> list:
        call = {
            "id": "c1",
            "type": "function",
            "function": {"name": "edit", "arguments": arguments},
        }
        return [
            user("fix the path handling"),
            {"role": "assistant", "content": None, "tool_calls": [call]},
            result("c1", "done"),
        ]

    # as text, these two orders are 10 and 8 tokens (o200k)
    first = conversation({"path": "v", "file_path": ""})
    reordered = conversation({"file_path": "", "path": "v"})
    warm = _pipeline()
    _run(warm, first)  # another session taught the records first
    _same(_run(warm, reordered), _run(_pipeline(), reordered))


def test_records_charge_what_a_record_holds_not_only_its_key() -> None:
    records = MessageRecords(max_bytes=64_000)
    for i in range(2_000):
        records.lookup(orjson.dumps(user(f"m{i}"), option=orjson.OPT_SORT_KEYS))
    assert len(records) <= 64_000 // RECORD_OVERHEAD_BYTES
