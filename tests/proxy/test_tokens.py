"""Token counting: offline encodings per model family, counts cached per text."""

from __future__ import annotations

from proxy.tokens import TiktokenCounter, TokenCounters, encoding_name_for


def test_encoding_per_family() -> None:
    assert encoding_name_for("gpt-4o-mini") == "o200k_base"
    assert encoding_name_for("openai/gpt-5") == "o200k_base"
    assert encoding_name_for("gpt-4") == "cl100k_base"
    assert encoding_name_for("anthropic/claude-3-5-sonnet") == "cl100k_base"


def test_counts_are_real_and_cached() -> None:
    counter = TiktokenCounter("cl100k_base")
    assert counter.count_text("hello world") == 2
    calls = []
    encode = counter._encode
    counter._encode = lambda t: calls.append(t) or encode(t)  # count real encodes
    msgs = [{"role": "user", "content": f"message number {i}"} for i in range(50)]
    first = counter.count_messages(msgs)
    assert len(calls) == 50
    grown = [*msgs, {"role": "assistant", "content": "x y"}, {"role": "user", "content": "z"}]
    assert counter.count_messages(grown) > first
    assert len(calls) == 52  # growing by two messages cost two messages of counting


def test_counters_are_shared_per_encoding() -> None:
    counters = TokenCounters()
    assert counters.for_model("gpt-4o") is counters.for_model("gpt-4.1")
    assert counters.for_model("gpt-4o") is not counters.for_model("gpt-4")
