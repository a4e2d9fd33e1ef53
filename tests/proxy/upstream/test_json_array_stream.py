"""The JSON-array stream cut into whole elements (``proxy.upstream.json_array_stream``): the bytes
come out as they went in, each piece ending where an element ends however the reads were cut
(strings holding brackets, quotes and escapes included); an element over the cap is relayed
as it comes; a stream broken off ends as a valid array with Gemini's error; the usage is read
from the pieces. Through the app: a break mid-stream, and an error element redacted."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest

from proxy.errors import UpstreamUnreachable
from proxy.upstream.json_array_stream import ArraySplitter, ElementUsageTap
from tests.conftest import in_process
from tests.proxy.server.test_gemini_routes import HEADERS, STREAM, USAGE, answer, body, settings
from tests.support.edge_upstream import EdgeUpstream, Reply

ELEMENTS = [
    {"candidates": [{"content": {"parts": [{"text": 'a } ] [ { " \\ "quoted" \\"'}]}}]},
    {"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "args": {"x": [1]}}}]}}]},
    {"text": "é ü 漢字 \u2028", "usageMetadata": {"promptTokenCount": 9}},
]


def array(indent: bool) -> bytes:
    option = orjson.OPT_INDENT_2 if indent else 0
    return b"[" + b",\r\n".join(orjson.dumps(e, option=option) for e in ELEMENTS) + b"\r\n]\n"


def split_randomly(data: bytes, splitter: ArraySplitter, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    pieces: list[bytes] = []
    i = 0
    while i < len(data):
        step = rng.randint(1, 9)
        pieces += splitter.feed(data[i : i + step])
        i += step
    return pieces


def test_pieces_end_where_elements_end_however_the_reads_are_cut() -> None:
    for indent in (False, True):
        data = array(indent)
        for seed in range(200):
            splitter = ArraySplitter()
            pieces = split_randomly(data, splitter, seed)
            assert b"".join(pieces) + splitter.rest() == data
            assert splitter.elements == 3 and splitter.closed
            for piece, element in zip(pieces, ELEMENTS, strict=False):
                assert orjson.loads(piece.lstrip(b"[, \r\n")) == element


def test_an_element_is_held_until_its_last_byte() -> None:
    data = array(False)
    first_end = data.index(b",\r\n")
    splitter = ArraySplitter()
    assert splitter.feed(data[: first_end - 1]) == []
    assert splitter.feed(data[first_end - 1 : first_end]) == [data[:first_end]]


def test_an_element_over_the_cap_is_relayed_as_it_comes() -> None:
    data = array(True)
    splitter = ArraySplitter(max_element=16)
    pieces = split_randomly(data, splitter, 1)
    assert b"".join(pieces) + splitter.rest() == data
    assert max(len(p) for p in pieces) <= 16 + 9  # held, and one read
    assert splitter.closed


def test_a_broken_stream_ends_as_a_valid_array_with_the_error() -> None:
    error = b'{"error":{"code":503,"message":"gone","status":"UNAVAILABLE"}}'
    data = array(False)
    splitter = ArraySplitter()
    relayed = splitter.feed(data[: data.index(b"usageMetadata")])  # cut inside the third
    got = orjson.loads(b"".join(relayed) + splitter.error_tail(error))
    assert got == [*ELEMENTS[:2], orjson.loads(error)]
    nothing_yet = ArraySplitter()
    assert nothing_yet.feed(b'[{"cand') == []
    assert orjson.loads(nothing_yet.error_tail(error)) == [orjson.loads(error)]
    done = ArraySplitter()
    done.feed(data)
    assert done.error_tail(error) == b""


def test_the_usage_is_read_from_the_pieces() -> None:
    tap = ElementUsageTap()
    splitter = ArraySplitter()
    for piece in split_randomly(array(True), splitter, 7):
        tap.feed(piece)
    assert tap.usage == {"promptTokenCount": 9}


async def _pieces(*chunks: bytes) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


async def test_an_array_the_body_ended_before_is_a_cut_stream() -> None:
    """A connection closed mid-answer reads as the end of a body without a length: what was
    whole goes, the half element does not, and the relay is told the stream was cut."""
    for cut in (b'[{"a": 1}, {"b"', b'[{"a": 1}', b""):
        splitter = ArraySplitter()
        got: list[bytes] = []
        with pytest.raises(UpstreamUnreachable):
            async for p in splitter.elements_of(_pieces(cut, b"")):
                got.append(p)
        assert got == ([b'[{"a": 1}'] if cut else [])
        tail = splitter.error_tail(b'{"error": {}}')
        assert orjson.loads(b"".join(got) + tail)[-1] == {"error": {}}


FIRST = b"[" + orjson.dumps(answer("Do", {"promptTokenCount": 30}))
SECOND = b",\r\n" + orjson.dumps(answer("ne.", USAGE))


@pytest.mark.parametrize(
    ("sent", "whole"),
    [(FIRST[:-5], 0), (FIRST + SECOND[:20], 1), (FIRST + SECOND, 2)],
    ids=["in-the-first", "in-the-second", "no-closing-bracket"],
)
async def test_a_stream_that_ends_before_its_array_reaches_the_client_as_a_valid_array(
    edge: EdgeUpstream, tmp_path: Path, sent: bytes, whole: int
) -> None:
    edge.reply = Reply(chunks=[sent])  # the body ends there, as a closed connection ends it
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        got = await client.post(STREAM, json=body(), headers=HEADERS)
    assert got.status_code == 200
    elements = orjson.loads(got.content)
    assert elements[-1]["error"]["status"] == "UNAVAILABLE"
    assert elements[:-1] == [answer("Do", {"promptTokenCount": 30}), answer("ne.", USAGE)][:whole]


async def test_a_stream_broken_off_upstream_reaches_the_client_as_a_valid_array(
    edge: EdgeUpstream, tmp_path: Path
) -> None:
    first = b"[" + orjson.dumps(answer("Do", {"promptTokenCount": 30}))
    second = b",\r\n" + orjson.dumps(answer("ne.", USAGE))
    edge.reply = Reply(chunks=[first + second[:20], second[20:]], after_first_chunk="break")
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        got = await client.post(STREAM, json=body(), headers=HEADERS)
    assert got.status_code == 200
    elements = orjson.loads(got.content)
    assert elements[0] == answer("Do", {"promptTokenCount": 30})
    assert elements[1]["error"]["status"] == "UNAVAILABLE" and len(elements) == 2


async def test_an_error_element_is_redacted(edge: EdgeUpstream, tmp_path: Path) -> None:
    secret = "sk-proj-" + "A1b2C3d4" * 6
    error = {"error": {"code": 500, "message": f"bad key {secret}", "status": "INTERNAL"}}
    data = b"[" + orjson.dumps(answer("Do")) + b",\r\n" + orjson.dumps(error) + b"]"
    edge.reply = Reply(chunks=[data])
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        got = await client.post(STREAM, json=body(), headers=HEADERS)
    assert secret not in got.text
    elements = orjson.loads(got.content)
    assert elements[0] == answer("Do") and elements[1]["error"]["code"] == 500


@pytest.mark.parametrize("where", ["data", "escape", "nested"])
def test_a_break_inside_an_element_too_large_to_hold_still_ends_a_valid_array(where: str) -> None:
    """Past ``max_element`` an element goes as it comes; a break inside it left the client a
    body that was no JSON (the error's element after a half-sent one)."""
    inline = "A" * 150 + "\\" + "B" * 60  # one backslash: written as an escape
    parts = [{"inlineData": {"data": inline}}, {"t": [1, 2]}]
    element = orjson.dumps({"candidates": [{"content": {"parts": parts}}]})
    cut = {
        "data": element.index(b"AAAA") + 5,
        "escape": element.index(b"\\\\") + 1,  # between the escape's two bytes
        "nested": element.index(b'{"t"') + 9,
    }[where]
    stream = b"[" + orjson.dumps({"candidates": []}) + b",\r\n" + element
    splitter = ArraySplitter(max_element=32)
    sent = b"".join(splitter.feed(stream[: len(stream) - len(element) + cut]))
    sent += splitter.error_tail(b'{"error":{"code":502}}')
    parsed = orjson.loads(sent)
    assert parsed[0] == {"candidates": []} and parsed[-1] == {"error": {"code": 502}}


async def test_a_stream_nesting_past_the_bound_is_broken_off_as_a_valid_array(
    edge: EdgeUpstream, tmp_path: Path
) -> None:
    """Brackets opened and never closed are held one by one, to close the element for the
    client: 20 MiB of them took 1.8 GiB and held the loop 1.8 s. Past ``MAX_DEPTH`` the stream
    is broken off, what went before ends as a valid array, and nothing deeper is held."""
    from proxy.upstream.json_array_stream import MAX_DEPTH

    first = b"[" + orjson.dumps(answer("Do", {"promptTokenCount": 30}))
    deep = b",\r\n" + b"[" * (4 * 1024 * 1024)
    edge.reply = Reply(chunks=[first, deep])
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        got = await client.post(STREAM, json=body(), headers=HEADERS)
    assert got.status_code == 200
    elements = orjson.loads(got.content)
    assert elements[0] == answer("Do", {"promptTokenCount": 30})
    assert elements[-1]["error"]["status"] == "UNAVAILABLE" and len(elements) == 2
    for first in (b'[{"a": ' + b"[" * 100, b'[{"a": "' + b"x" * 100):
        splitter = ArraySplitter(max_element=64)  # partly relayed, then too deep: still valid
        sent = b"".join(splitter.feed(first))
        sent += b"".join(splitter.feed(b'", "b": ' * (first[-1:] == b"x") + b"[" * 10 * MAX_DEPTH))
        assert splitter.too_deep and splitter.feed(b"]" * 100) == []
        whole = orjson.loads(sent + splitter.error_tail(b'{"error": {}}'))
        assert whole[-1] == {"error": {}}
