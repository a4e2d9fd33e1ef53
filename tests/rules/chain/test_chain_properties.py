"""Properties of repair_tool_chain over generated histories: valid chains, then random drops,
duplications, reorders, id mutations and malformed fields. Whatever comes in, the output passes
the validator, every piece of input text is still readable, repairs are idempotent, and valid
input comes out as the same list (same bytes)."""

from __future__ import annotations

import copy
import functools
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rules.chain.repairs import repair_messages
from rules.chain.text import flatten
from rules.chain.validator import find_violations
from rules.messages import call_arguments_text, text_of, tool_calls
from tests.support.factories import assistant, result, shell, system, user
from tests.support.traces import CORPUS, iter_conversations

TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=0, max_size=12)
FULLWIDTH = {chr(c): chr(c + 0xFEE0) for c in range(0x21, 0x7F)}  # ASCII -> fullwidth forms


@st.composite
def valid_chains(draw: st.DrawFn) -> list[dict[str, Any]]:
    counter = iter(range(10_000))
    messages: list[dict[str, Any]] = [system("sys " + draw(TEXT))]
    for _ in range(draw(st.integers(1, 3))):
        messages.append(user(f"u{next(counter)} " + draw(TEXT)))
        for _ in range(draw(st.integers(0, 3))):
            n_calls = draw(st.integers(0, 4))
            if n_calls == 0:
                messages.append(assistant(f"a{next(counter)} " + draw(TEXT)))
                continue
            ids = [
                f"call_{next(counter)}{draw(st.sampled_from(['', 'x', 'Ab']))}"
                for _ in range(n_calls)
            ]
            calls = [shell(cid, f"cmd{next(counter)} " + draw(TEXT)) for cid in ids]
            text = draw(st.one_of(st.none(), st.just(""), TEXT.map(lambda t: "say " + t)))
            messages.append(assistant(text, *calls))
            for cid in draw(st.permutations(ids)):
                messages.append(result(cid, f"r{next(counter)} " + draw(TEXT)))
    return messages


def _drift(cid: str, how: str) -> str:
    if how == "upper":
        return cid.upper()
    if how == "space":
        return f" {cid}\n"
    return "".join(FULLWIDTH.get(c, c) for c in cid)


@st.composite
def mutated_chains(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
    original = draw(valid_chains())
    messages = copy.deepcopy(original)
    n_ops = draw(st.integers(0, 6))
    _mutate(draw, messages, n_ops)
    return original, messages, n_ops


@functools.cache
def _real_histories() -> list[list[dict[str, Any]]]:
    """The first 60 messages of real corpus conversations that use tools (a fixed, small set)."""
    if not CORPUS.exists():
        return []
    out = []
    for conv in iter_conversations(CORPUS):
        head = conv["messages"][:60]
        if any(tool_calls(m) for m in head):
            out.append(head)
    return out[::6]


@st.composite
def damaged_real_histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    messages = copy.deepcopy(draw(st.sampled_from(_real_histories())))
    _mutate(draw, messages, draw(st.integers(1, 8)))
    return messages


def _mutate(draw: st.DrawFn, messages: list[dict[str, Any]], n_ops: int) -> None:
    for _ in range(n_ops):
        op = draw(
            st.sampled_from(
                ["drop", "dup", "move", "drift", "reuse", "truncate", "empty", "null", "bad_id"]
            )
        )
        i = draw(st.integers(0, len(messages) - 1))
        m = messages[i]
        if op == "drop" and len(messages) > 1:
            messages.pop(i)
        elif op == "dup":
            messages.insert(draw(st.integers(0, len(messages))), copy.deepcopy(m))
        elif op == "move":
            messages.insert(draw(st.integers(0, len(messages) - 1)), messages.pop(i))
        elif op == "drift" and m["role"] == "tool":
            how = draw(st.sampled_from(["upper", "space", "fullwidth"]))
            m["tool_call_id"] = _drift(m["tool_call_id"], how)
        elif op == "reuse" and tool_calls(m):
            others = [c["id"] for x in messages for c in tool_calls(x)]
            tool_calls(m)[0]["id"] = draw(st.sampled_from(others))
        elif op == "truncate" and tool_calls(m) and tool_calls(m)[0]["function"]["arguments"]:
            fn = tool_calls(m)[0]["function"]
            fn["arguments"] = fn["arguments"][: draw(st.integers(0, len(fn["arguments"]) - 1))]
        elif op == "empty" and m["role"] == "assistant":
            m["tool_calls"] = []
        elif op == "null" and m["role"] == "tool":
            m["content"] = None
        elif op == "bad_id" and tool_calls(m):
            tool_calls(m)[0]["id"] = "id with spaces." + draw(TEXT)


def _readable(messages: list[dict[str, Any]]) -> str:
    """All text a model can read: contents, call arguments, and raw text kept in wrappers."""
    parts = []
    for m in messages:
        parts.append(text_of(m.get("content")))
        for c in tool_calls(m):
            raw = call_arguments_text(c)
            parts.append(raw)
            try:
                parsed = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            if isinstance(parsed, dict) and isinstance(parsed.get("raw_arguments"), str):
                parts.append(parsed["raw_arguments"])
    return "\n\x00".join(parts)


def _pieces(messages: list[dict[str, Any]]) -> list[str]:
    pieces = [text_of(m.get("content")) for m in messages]
    pieces += [call_arguments_text(c) for m in messages for c in tool_calls(m)]
    return [p for p in pieces if p.strip()]


COMMON = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@COMMON
@given(valid_chains())
def test_valid_chains_pass_unchanged(messages: list[dict[str, Any]]) -> None:
    before = orjson.dumps(messages)
    assert find_violations(messages) == []
    out, reps = repair_messages(messages)
    assert out is messages and reps == []
    assert orjson.dumps(out) == before


@COMMON
@given(mutated_chains())
def test_any_history_is_repaired_without_losing_text(case: tuple) -> None:
    _original, messages, _ops = case
    snapshot = orjson.dumps(messages)
    out, reps = repair_messages(messages)
    assert orjson.dumps(messages) == snapshot  # the input is never mutated
    assert find_violations(out) == []
    assert "fallback_flatten" not in {r["kind"] for r in reps}, reps
    blob = _readable(out)
    for piece in _pieces(messages):
        assert piece in blob, piece
    again, more = repair_messages(out)
    assert again is out and more == []
    if not find_violations(messages):
        assert out is messages


@COMMON
@given(mutated_chains())
def test_repair_is_deterministic(case: tuple) -> None:
    _original, messages, _ops = case
    first, r1 = repair_messages(copy.deepcopy(messages))
    second, r2 = repair_messages(copy.deepcopy(messages))
    assert orjson.dumps(first) == orjson.dumps(second) and r1 == r2


@COMMON
@given(mutated_chains())
def test_last_resort_flattening_always_passes_the_validator(case: tuple) -> None:
    """The guarantee behind "never forward a chain the validator rejects": should a repair ever
    fail the validator (a bug), repair_messages falls back to this, which cannot fail."""
    _original, messages, _ops = case
    flat = flatten(messages)
    assert find_violations(flat) == []
    blob = _readable(flat)
    assert all(text_of(m.get("content")) in blob for m in messages)


@pytest.mark.needs_shared
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged_real_histories())
def test_damaged_real_histories_are_repaired_without_losing_text(messages: list) -> None:
    """The same invariants on real agent histories (mini-swe-agent, OpenHands, SWE-agent …)
    after random damage, so the repair meets real shapes: reasoning_content, long outputs."""
    out, reps = repair_messages(messages)
    assert find_violations(out) == []
    assert "fallback_flatten" not in {r["kind"] for r in reps}
    blob = _readable(out)
    assert all(piece in blob for piece in _pieces(messages))
    assert repair_messages(out)[0] is out
