"""Token counting: offline encodings per model family, counts cached per text; media parts at
the providers' estimates (``rules.media``), in the count and in measure's sections alike."""

from __future__ import annotations

import copy

import pytest

from proxy import tokens
from proxy.tokens import (
    PER_MESSAGE_OVERHEAD,
    RequestTokens,
    TiktokenCounter,
    TokenCounters,
    encoding_name_for,
)
from rules.context.measure import measure_sections
from rules.media import (
    AUDIO_TOKENS,
    DOCUMENT_TOKENS,
    IMAGE_LOW_DETAIL_TOKENS,
    IMAGE_TOKENS,
    media_tokens,
)


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


def test_a_tools_list_seen_again_is_counted_by_identity_within_a_byte_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The body memory hands a session's next request the tools list it parsed before: its count
    is then found without serialising it. An equal list parsed anew is found by its bytes; the
    lists held by identity stay within ``TOOL_LIST_BYTES``."""
    counter = TiktokenCounter("cl100k_base")
    tools = [{"type": "function", "function": {"name": f"tool_{i}", "parameters": {}}}
             for i in range(20)]  # fmt: skip
    n = counter.count_tools(tools)
    dumps = []
    real = tokens.orjson.dumps
    monkeypatch.setattr(tokens.orjson, "dumps", lambda v, *a: dumps.append(v) or real(v, *a))
    assert counter.count_tools(tools) == n and dumps == []
    assert counter.count_tools(copy.deepcopy(tools)) == n and len(dumps) == 1
    monkeypatch.setattr(tokens, "TOOL_LIST_BYTES", 5_000)
    for _ in range(20):
        counter.count_tools(copy.deepcopy(tools))
    assert counter._tool_bytes <= 5_000
    assert counter._tool_bytes == sum(size for _, _, size in counter._tool_lists.values())


def test_counters_are_shared_per_encoding() -> None:
    counters = TokenCounters()
    assert counters.for_model("gpt-4o") is counters.for_model("gpt-4.1")
    assert counters.for_model("gpt-4o") is not counters.for_model("gpt-4")


IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
LOW = {"type": "image_url", "image_url": {"url": "https://example.com/a.png", "detail": "low"}}
AUDIO = {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}
FILE = {"type": "file", "file": {"file_id": "file-abc"}}


def test_media_parts_count_the_providers_estimates() -> None:
    counter = TiktokenCounter("o200k_base")
    text_only = counter.count_message({"role": "user", "content": "look at these"})
    parts = [{"type": "text", "text": "look at these"}, IMAGE, LOW, AUDIO, FILE]
    message = {"role": "user", "content": parts}
    media = IMAGE_TOKENS + IMAGE_LOW_DETAIL_TOKENS + AUDIO_TOKENS + DOCUMENT_TOKENS
    assert counter.count_message(message) == text_only + media
    assert RequestTokens(counter).count_message(message) == text_only + media
    # the other protocols' chat views keep a part's type: Anthropic's and the Responses API's
    for kind, n in [("image", IMAGE_TOKENS), ("input_image", IMAGE_TOKENS),
                    ("document", DOCUMENT_TOKENS), ("input_file", DOCUMENT_TOKENS)]:  # fmt: skip
        lowered = {"role": "user", "content": [{"type": "text", "text": "look at these"},
                                               {"type": kind}]}  # fmt: skip
        assert counter.count_message(lowered) == text_only + n, kind
    low_responses = {"type": "input_image", "image_url": "https://e.com/a.png", "detail": "low"}
    assert media_tokens([low_responses]) == IMAGE_LOW_DETAIL_TOKENS
    assert media_tokens([{"type": "tool_result", "content": [IMAGE]}]) == IMAGE_TOKENS  # nested
    assert media_tokens("an image_url") == 0 and media_tokens([{"type": ["image"]}]) == 0


def test_measure_sections_hold_the_media_the_count_holds() -> None:
    counter = TiktokenCounter("o200k_base")
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "what is this?"}, IMAGE, IMAGE]},
        {"role": "assistant", "content": "A chart."},
    ]
    sizes = measure_sections(messages, None, counter)
    overheads = PER_MESSAGE_OVERHEAD * len(messages) + 3
    assert sum(sizes.values()) == counter.count_messages(messages) - overheads
    assert sizes["user"] == counter.count_text("what is this?") + 2 * IMAGE_TOKENS
