"""A body holding a lone UTF-16 surrogate escape (a JavaScript client's string cut between the
halves of an emoji, which ``JSON.stringify`` writes as ``"\\ud83d"``) is mended before it is
read: each lone half becomes U+FFFD, the rest goes as it came. Before, the proxy answered 400
"not valid JSON", as the providers do ("no low surrogate in string"), on every retry while the
text stayed in the history."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from proxy.protocols import surrogates
from proxy.protocols.surrogates import mended_surrogates
from tests.conftest import in_process
from tests.support.edge_upstream import EdgeUpstream, Reply, protocol_settings
from tests.support.factories import anthropic_message

JSON = {"content-type": "application/json"}
MENDED = "\ufffd".encode()


@pytest.mark.parametrize(
    ("raw", "expected", "count"),
    [
        (rb'"cut \ud83d"', rb'"cut \ufffd"', 1),
        (rb'"\ude00 alone"', rb'"\ufffd alone"', 1),
        (rb'"\uDE00\uD83D"', rb'"\ufffd\ufffd"', 2),  # a low half, then a high half: no pair
        (rb'"\udc00\udc01"', rb'"\ufffd\ufffd"', 2),
        (rb'"\ud83d\ud83d\ude00"', rb'"\ufffd\ud83d\ude00"', 1),  # the second high half pairs
        (rb'"\\\ud83d"', rb'"\\\ufffd"', 1),  # an escaped backslash, then the escape
        # the text \ud83d (an escaped backslash), then a low half: lone, though it looks paired
        (rb'"\\ud83d\udc00"', rb'"\\ud83d\ufffd"', 1),
        (rb'"\\\\\\ud83d\uDC00 \ud83d\ude00"', rb'"\\\\\\ud83d\ufffd \ud83d\ude00"', 1),
    ],
)
def test_each_lone_half_becomes_the_replacement_character(
    raw: bytes, expected: bytes, count: int
) -> None:
    expected = expected.replace(rb"\ufffd", MENDED)
    assert mended_surrogates(raw) == (expected, count)
    orjson.loads(expected)


@pytest.mark.parametrize(
    "raw",
    [
        rb'"smile \ud83d\ude00"',  # a pair
        rb'"\uD83D\uDE00"',
        rb'"the text \\ud83d"',  # a backslash, then "ud83d": no escape
        rb'"\\\ud83d\udc00"',  # an escaped backslash, then a pair
        rb'"\u00e9 \u2603"',
    ],
)
def test_pairs_and_text_that_only_looks_like_an_escape_are_left_alone(raw: bytes) -> None:
    assert mended_surrogates(raw) == (raw, 0)
    assert mended_surrogates(raw)[0] is raw


def test_more_than_a_texts_few_are_not_mended() -> None:
    """A hostile body of lone halves (32 MiB cost 5 s and 1 GB to mend) or of backslashes before
    one is left as it came: its parse's 400 stands."""
    many = b'"' + b"\\ud800" * 5_000 + b'"'
    assert mended_surrogates(many) == (many, 0)
    run = b'"' + b"\\\\" * 5_000 + b"\\ud800" + b'"'
    assert mended_surrogates(run) == (run, 0)
    few = b'"' + b"\\ud800 " * 100 + b'"'
    assert mended_surrogates(few)[1] == 100


def test_the_window_a_scan_stops_at_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scan goes a window at a time: a match across a window's edge is found once, a pair
    across it is not split."""
    text = rb'"' + rb"\\" * 3 + rb"\ud83d\ude00 a \ud83d b \udc00\udc01 \\ud83d \ud83d"
    text += rb" \\ud83d\udc00 \\\ud83d\udc00" + rb'"'
    whole = mended_surrogates(text)
    assert whole[1] == 5
    for window in range(1, len(text) + 2):
        monkeypatch.setattr(surrogates, "_WINDOW", window)
        assert mended_surrogates(text) == whole, window


async def test_a_chat_body_with_a_lone_surrogate_goes_through_mended(
    edge: EdgeUpstream, tmp_path: Path
) -> None:
    raw = (
        b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "run it"},'
        b' {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type":'
        b' "function", "function": {"name": "bash", "arguments": "{\\"cmd\\": \\"ls\\"}"}}]},'
        b' {"role": "tool", "tool_call_id": "call_1", "content": "done \\ud83d\\ude00 then cut'
        b' \\ud83d"}]}'
    )
    async with in_process(protocol_settings(edge), str(tmp_path / "p.db")) as client:
        response = await client.post("/v1/chat/completions", content=raw, headers=JSON)
    assert response.status_code == 200, response.text
    sent = edge.last.body
    tool = orjson.loads(sent)["messages"][-1]
    assert tool["content"] == "done \U0001f600 then cut \ufffd"


async def test_a_claude_code_history_mends_alike_on_every_request(
    edge: EdgeUpstream, tmp_path: Path
) -> None:
    """A tool's output cut in an emoji stays in the history: each request mends it the same way,
    so the provider sees the same prefix again (its cache holds)."""
    edge.reply = Reply.json(anthropic_message())
    head = (
        b'{"model": "claude-sonnet-4-5", "max_tokens": 512, "messages": ['
        b'{"role": "user", "content": "read notes.md"},'
        b'{"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name":'
        b' "Read", "input": {"file_path": "/w/notes.md"}}]},'
        b'{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",'
        b' "content": "1\\tparty \\ud83c"}]}'
    )
    first = head + b"]}"
    second = (
        head + b',{"role": "assistant", "content": "The notes end mid-emoji."},'
        b'{"role": "user", "content": "fix it"}]}'
    )
    sent = []
    async with in_process(protocol_settings(edge), str(tmp_path / "p.db")) as client:
        for raw in (first, second):
            response = await client.post("/v1/messages", content=raw, headers=JSON)
            assert response.status_code == 200, response.text
            sent.append(edge.last.body)
    for body in sent:
        result = orjson.loads(body)["messages"][2]["content"][0]
        assert result["content"] == "1\tparty \ufffd"
    cut = sent[0].index(MENDED) + len(MENDED)
    assert sent[1][:cut] == sent[0][:cut]


async def test_a_token_count_of_such_a_body_is_answered(edge: EdgeUpstream, tmp_path: Path) -> None:
    raw = b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "cut \\ud83d here"}]}'
    async with in_process(protocol_settings(edge), str(tmp_path / "p.db")) as client:
        response = await client.post("/v1/messages/count_tokens", content=raw, headers=JSON)
        assert response.status_code == 200, response.text
        assert response.json()["input_tokens"] > 0
        broken = b'{"model": "gpt-4o", "messages": [}'  # not a surrogate: refused as before
        response = await client.post("/v1/messages/count_tokens", content=broken, headers=JSON)
        assert response.status_code == 400


async def test_the_common_body_is_not_scanned(edge: EdgeUpstream, tmp_path: Path) -> None:
    """Only a body that failed to parse is looked at for lone surrogates."""
    calls: list[bytes] = []
    real = surrogates.mended_surrogates

    def counted(raw: bytes) -> tuple[bytes, int]:
        calls.append(raw)
        return real(raw)

    raw = b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "smile \\ud83d\\ude00"}]}'
    async with in_process(protocol_settings(edge), str(tmp_path / "p.db")) as client:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("proxy.server.body_work.mended_surrogates", counted)
            response = await client.post("/v1/chat/completions", content=raw, headers=JSON)
    assert response.status_code == 200 and calls == []


def test_the_next_request_reuses_the_mended_prefix() -> None:
    """Mended as orjson writes U+FFFD (raw UTF-8), the kept body's items are proven by their
    bytes: the conversation's next request is read only where it is new (the escape form kept
    none past the mended message, and every later turn was parsed from there on)."""
    from proxy.protocols.body import validate_body
    from proxy.protocols.body_memory import BodyMemory

    history = [{"role": "user", "content": f"turn {k} " + "word " * 200} for k in range(40)]
    head = orjson.dumps({"model": "gpt-4o", "messages": history})
    cut = head.replace(b"turn 1 ", b"turn 1 \\ud83d ", 1)
    memory = BodyMemory("messages", validate_body)
    mended, count = mended_surrogates(cut)
    assert count == 1
    memory.parse(mended, "s")
    longer = cut[:-2] + b',{"role": "user", "content": "next"}]}'
    body, fresh = memory.read(mended_surrogates(longer)[0], "s", "")  # type: ignore[misc]
    assert body["messages"][1]["content"].startswith("turn 1 \ufffd")
    assert fresh < 200, fresh
