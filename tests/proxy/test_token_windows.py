"""A long text is counted in windows (``proxy.tokens.windows``): the tokenizer never sees more than
two windows' worth of characters at once, which bounds its time and memory on a run without
whitespace (one such piece of 2 MB took tiktoken 1.1 s and ~45x its size in memory). The cuts fall
where tiktoken's pre-tokenizer splits anyway, so ordinary text counts what it counts whole."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy import token_windows, tokens
from proxy.token_windows import WINDOW_CHARS, windows
from proxy.tokens import TiktokenCounter


def whole_count(encoding: str, text: str) -> int:
    return len(tokens._encoding(encoding).encode_ordinary(text))


def ordinary_text(seed: int, chars: int) -> str:
    """Tool output as agents see it: indented code, prose, CRLF listings, paths without spaces."""
    rng = random.Random(seed)
    words = ["def", "self", "return", "the", "value", "import", "os", "x", "==", "None", "):",
             "'item_guid'", "42", "3.14", "#", "raise", "TypeError(", "é", "数据", "→"]  # fmt: skip
    lines: list[str] = []
    while sum(map(len, lines)) < chars:
        kind = rng.randrange(4)
        if kind == 0:  # indented code
            lines.append(
                " " * rng.choice((0, 4, 8, 12, 16, 19)) + " ".join(rng.choices(words, k=6))
            )
        elif kind == 1:  # a listing with CRLF, no spaces at all
            lines.append("/testbed/moto/" + "/".join(rng.choices(words[:6], k=4)) + ".py\r")
        elif kind == 2:  # prose
            lines.append(" ".join(rng.choices(words, k=rng.randrange(1, 30))) + ".")
        else:  # grep output with line numbers and runs of spaces
            lines.append(f"{rng.randrange(9999)}:" + " " * rng.randrange(1, 40) + "))")
    return "\n".join(lines)


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
@pytest.mark.parametrize("seed", range(4))
def test_ordinary_text_counts_what_it_counts_whole(encoding: str, seed: int) -> None:
    text = ordinary_text(seed, 60_000)
    assert len(list(windows(text))) > 10
    assert TiktokenCounter(encoding).count_text(text) == whole_count(encoding, text)


RUNS = {
    "a million spaces": " " * 1_000_000,  # tiktoken panicked on it whole
    "2 MB of $(": "$(" * 1_000_000,
    "one long line of letters": "a" * 500_000,
    "paths without a space or line break": "/src/pkg/module_name" * 30_000,
    "long lines of hex": "\n".join(("0123456789abcdef" * 600) for _ in range(60)),
}


@pytest.mark.parametrize("text", RUNS.values(), ids=RUNS.keys())
def test_the_tokenizer_never_sees_more_than_two_windows(text: str) -> None:
    counter = TiktokenCounter("o200k_base", cache_chars=0)
    seen: list[int] = []
    encode = counter._encode

    def recorded(piece: str) -> Any:
        seen.append(len(piece))
        return encode(piece)

    counter._encode = recorded
    n = counter.count_text(text)
    assert max(seen) <= 2 * WINDOW_CHARS and sum(seen) == len(text)
    assert n > 0 and n != tokens.estimate_tokens(text)  # counted, not estimated after a failure


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab  \n\r\t.$(/é")), max_size=400))
def test_windows_are_consecutive_slices_within_the_bound(text: str) -> None:
    window = 16
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(token_windows, "WINDOW_CHARS", window)
        parts = list(windows(text))
    assert "".join(parts) == text
    if len(text) <= 2 * window:
        assert parts == [text]
    else:
        assert all(0 < len(part) <= window for part in parts)


def windowed_equals_whole(text: str) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(token_windows, "WINDOW_CHARS", 24)  # every text is cut many times
        for encoding in ("o200k_base", "cl100k_base"):
            encode = tokens._encoding(encoding).encode_ordinary
            windowed = sum(len(encode(part)) for part in windows(text))
            assert windowed == whole_count(encoding, text), (encoding, list(windows(text)))


WORD = st.text(alphabet=st.sampled_from(list("abcXY12_.,()/'é数")), min_size=1, max_size=6)
ALNUM = st.text(alphabet=st.sampled_from(list("abcXY12é数")), min_size=1, max_size=6)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from([" ", "   ", "\n ", ".\n ", ":\n    ", "\r\n\t "]), WORD))
)
def test_cuts_before_a_spaced_word_keep_the_count(pieces: list[tuple[str, str]]) -> None:
    """Words of any characters, each after a gap that ends in a space: cut before that space."""
    windowed_equals_whole("".join(gap + word for gap, word in pieces))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["\n", "\r\n", "\n\n"]), st.sampled_from(["", "/"]), ALNUM))
)
def test_cuts_after_a_line_break_keep_the_count(pieces: list[tuple[str, str, str]]) -> None:
    """Lines without a space (a listing of paths): cut after the line break before a letter, a
    digit, or a slash after one."""
    windowed_equals_whole("".join(gap + slash + word for gap, slash, word in pieces))
