"""Fenced blocks, quoted lines and quotations within a line of a user's message are not read for
references."""

from __future__ import annotations

import pytest

from rules.entities.ref_detect import detect, load_lexicons
from rules.entities.ref_quoted import quoted_spans
from tests.support.cpu_clock import cpu_timer


def _mentions(text: str) -> list[str]:
    kinds, lexicons = load_lexicons()
    return [m.text for m in detect(text, kinds, lexicons, ("en", "zh", "ko", "ja"))]


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        ("a\n```\nb\n```\nc", ["```\nb\n```"]),
        ("a\n~~~~\nb\n~~~\nc\n~~~~\nd", ["~~~~\nb\n~~~\nc\n~~~~"]),  # a shorter fence is text
        ("a\n```py\nb", ["```py\nb"]),  # never closed: to the end
        ("  > b\nc", ["  > b"]),
        ("    ```\nb", []),  # indented four: a fence's text, no fence
        ("a > b\nc", []),  # a `>` inside a line
        ("plain", []),
        ('the doc says "stop the server you started" ok', ['"stop the server you started"']),
        ('rename it to "final notes"', []),  # two words: a name in quotes
        (
            "the wiki: \u201cdelete the folder you made\u201d and \u00abmove it to tmp now\u00bb",
            ["\u201cdelete the folder you made\u201d", "\u00abmove it to tmp now\u00bb"],
        ),
        ("「さっき作ったフォルダを消して」と書いてある", ["「さっき作ったフォルダを消して」"]),
        ('an "unclosed quote of many words here', []),
        ('> "a b c d"\n"e f g"', ['> "a b c d"', '"e f g"']),  # a quoted line holds it whole
        ('```\n"a b c"\n```', ['```\n"a b c"\n```']),
    ],
)
def test_the_quoted_spans(text: str, quoted: list[str]) -> None:
    assert [text[a:b] for a, b in quoted_spans(text)] == quoted


def test_a_mention_in_a_fence_or_a_quote_is_not_looked_for() -> None:
    assert _mentions("```\ndelete the folder you just created\n```\nthoughts?") == []
    assert _mentions("> delete the folder you just created\nthoughts?") == []
    assert _mentions("日志：\n```\n删除你刚创建的文件\n```") == []


def test_a_mention_in_a_quotation_within_a_line_is_not_looked_for() -> None:
    assert (
        _mentions('the runbook says: "stop the container you started". does ci.yml do that?') == []
    )
    assert _mentions('rename the folder you just created to "q3 reports"') == [
        "the folder you just created"
    ]


def test_a_mention_outside_them_is() -> None:
    text = "```\nlog line\n```\n> quoted\ndelete the folder you just created"
    assert _mentions(text) == ["the folder you just created"]


@pytest.mark.parametrize(
    "unit",
    [
        "```\n",
        "> x\n",
        "~~~a\n",
        "`" * 50 + "\n",
        ">" * 80,
        '"a b c" ',
        "\u201c",
        '"',
        '\u201c"',
        "\u00ab\u201e",
    ],
)
def test_quoted_spans_take_linear_time(unit: str) -> None:
    text = unit * (200_000 // len(unit))
    with cpu_timer() as took:
        quoted_spans(text)
    assert took.seconds < 0.5
