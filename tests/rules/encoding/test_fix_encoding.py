"""fix_encoding: UTF-8 read as cp1252 / latin-1 / cp949 is repaired; correct text is untouched."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rules.encoding import fix_encoding
from rules.encoding.mojibake import fix_text
from tests.support.cpu_clock import cpu_timer
from tests.support.factories import assistant, call, ctx, result, shell, user
from tests.support.traces import iter_conversations


def garble(text: str, codec: str) -> str:
    """``text``'s UTF-8 bytes read as ``codec``; for cp1252, bytes it leaves undefined become the
    C1 control of the same value, as Windows' own decoder does."""
    data = text.encode("utf-8")
    if codec in ("cp1252", "cp1251"):
        return "".join(bytes([b]).decode(codec, errors="ignore") or chr(b) for b in data)
    return data.decode(codec)


# (correct text, code page it was wrongly read as). Where the bytes read the same in cp1252 and
# latin-1, either name may be reported.
WESTERN = {"windows-1252", "latin-1"}
BROKEN = [
    ("Fehler: Datei nicht gefunden – überprüfen Sie den Pfad", "cp1252", WESTERN),
    ("café naïve résumé — “quoted”", "latin-1", {"latin-1"}),
    ("✔ 12 tests passed 🎉", "cp1252", {"windows-1252"}),
    ("привет мир: ошибка компиляции", "cp1252", WESTERN),
    ("안녕하세요 세계", "cp1252", {"windows-1252"}),
    ("日本語のテキスト", "latin-1", {"latin-1"}),
    ("привет мир: ошибка компиляции", "cp1251", {"windows-1251"}),
    ("경고: 명령 출력", "cp949", {"cp949"}),
    ("게임", "cp949", {"cp949"}),
]


@pytest.mark.parametrize(("text", "codec", "reported"), BROKEN)
def test_mojibake_is_repaired(text: str, codec: str, reported: set[str]) -> None:
    bad = garble(text, codec)
    assert bad != text
    fixed, fixes = fix_text(bad)
    assert fixed == text
    assert len(fixes) == 1 and fixes[0].codec in reported
    assert fix_text(fixed) == (fixed, [])  # idempotent


CORRECT = [
    "plain ascii output\nwith two lines",
    "café, naïve, Straße, Ærøskøbing",
    "안녕하세요 세계, 파일을 찾을 수 없습니다",
    "경고 명령 출력 게임 킹 퓨",  # Korean whose cp949 bytes are partly valid UTF-8
    "日本語のテキスト、中文文本",
    "Portuguese names: JOÃO, SÃO PAULO, CONCEIÇÃO",
    "em dash — and “curly quotes” stay curly; &amp; stays escaped; ﬁ ligature stays",
    "fullwidth ＡＢＣ stays fullwidth",
    "硫붿떆吏\ufffd (lossy cp949 mojibake cannot be restored)",
]


@pytest.mark.parametrize("text", CORRECT)
def test_correct_text_is_untouched(text: str) -> None:
    fixed, fixes = fix_text(text)
    assert fixed is text and fixes == []


def test_only_broken_lines_change() -> None:
    good = "café ok"
    bad = garble("überprüfen", "cp1252")
    fixed, fixes = fix_text(f"{good}\n{bad}\n{good}\r\n")
    assert fixed == f"{good}\nüberprüfen\n{good}\r\n"
    assert [f.lines for f in fixes] == [1] and fixes[0].codec in WESTERN


def test_rule_fixes_tool_output_and_reports() -> None:
    broken = garble("Größe: 5 MB – fertig", "cp1252")  # "–" is cp1252-only
    messages = [
        user(garble("über", "cp1252")),
        assistant(None, shell("c1", "du -sh")),
        result("c1", broken),
        {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": broken}]},
    ]
    res = fix_encoding.apply(ctx(messages), fix_encoding.Config())
    assert res.messages[2]["content"] == "Größe: 5 MB – fertig"
    assert res.messages[3]["content"] == [{"type": "text", "text": "Größe: 5 MB – fertig"}]
    assert res.messages[0] is messages[0]  # user messages are not in the default roles
    assert messages[2]["content"] == broken  # input untouched
    assert res.report["repairs"] == [
        {
            "kind": "mojibake",
            "index": 2,
            "tool_call_id": "c1",
            "action": "utf8_read_as_windows-1252",
            "lines": 1,
        },
        {
            "kind": "mojibake",
            "index": 3,
            "tool_call_id": "c2",
            "action": "utf8_read_as_windows-1252",
            "lines": 1,
        },
    ]
    again = fix_encoding.apply(ctx(res.messages), fix_encoding.Config())
    assert again.messages is res.messages


@pytest.mark.parametrize(
    "read",
    [
        call("r1", "Read", file_path="/w/menu.txt"),  # Claude Code
        call("r1", "read_file", absolute_path="/w/menu.txt"),  # Gemini CLI
        call("r1", "str_replace_editor", command="view", path="/w/menu.txt"),  # SWE-agent
        shell("r1", "cat /w/menu.txt"),
        shell("r1", "sed -n 1,40p /w/menu.txt"),
    ],
)
def test_a_file_read_is_left_as_the_file_holds_it(read: dict) -> None:
    """A file whose bytes hold mojibake reads as mojibake: the agent copies the line into an
    edit, which must match the file. Repaired, the edit's ``old_str`` matched nothing."""
    held = garble("Café crème – 4 €", "cp1252")
    messages = [
        user("fix the menu's encoding"),
        assistant(None, read),
        result("r1", f"1\t{held}"),
        assistant(None, shell("c2", "iconv --version")),
        result("c2", garble("Größe – fertig", "cp1252")),  # a run's output: repaired
    ]
    res = fix_encoding.apply(ctx(messages), fix_encoding.Config())
    assert res.messages[2] is messages[2]
    assert res.messages[4]["content"] == "Größe – fertig"
    assert [r["index"] for r in res.report["repairs"]] == [4]


@pytest.mark.parametrize(
    "command",
    ["grep -rn 'Ã' fixtures/", "git diff", "cat fixtures/a.txt fixtures/b.txt", "rg café src"],
)
def test_what_only_shows_files_is_left_as_the_files_hold_it(command: str) -> None:
    """A grep for `Ã` whose every hit showed none, a diff showing text the file does not hold:
    the agent could no longer see, nor match, the bytes in the file."""
    held = garble("café über naïve", "cp1252")
    messages = [user("find the mojibake"), assistant(None, shell("s1", command)),
                result("s1", f"fixtures/m.txt:1:{held}")]  # fmt: skip
    assert fix_encoding.apply(ctx(messages), fix_encoding.Config()).messages is messages


def test_a_call_reused_id_is_its_nearest_and_the_look_up_is_linear() -> None:
    """Which call a result answers is the nearest one before it of its id (some agents reuse
    ids), and finding it is one pass: a search back from each result with something to fix was
    quadratic (6,000 results answering no call took 2 s)."""
    held = garble("Café crème", "cp1252")
    messages = [
        user("go"),
        assistant(None, shell("r1", "cat /w/menu.txt")),
        result("r1", held),  # a read: left
        assistant(None, shell("r1", "make menu")),
        result("r1", held),  # the same id, now a run: repaired
    ]
    res = fix_encoding.apply(ctx(messages), fix_encoding.Config())
    assert [r["index"] for r in res.report["repairs"]] == [4]
    many = [user("go"), *(result(f"t{i}", held) for i in range(6_000))]
    with cpu_timer() as took:
        res = fix_encoding.apply(ctx(many), fix_encoding.Config())
    assert len(res.report["repairs"]) == 6_000
    assert took.seconds < 1.0


@pytest.mark.parametrize(
    ("cfg", "changed"),
    [
        ({"roles": ["tool", "user"]}, True),
        ({"cp949": False}, False),
        ({"max_chars": 3}, False),
    ],
)
def test_options(cfg: dict, changed: bool) -> None:
    messages = [
        user(garble("über", "cp1252")) if "roles" in cfg else user("hi"),
        assistant(None, shell("c1", "x")),
        result("c1", garble("경고: 명령 출력", "cp949")),
    ]
    res = fix_encoding.apply(ctx(messages), fix_encoding.Config(**cfg))
    assert (res.messages is not messages) is changed
    if "roles" in cfg:
        assert res.messages[0]["content"] == "über"


def test_valid_conversation_is_the_same_list() -> None:
    messages = [user("hi"), assistant(None, shell("c1", "ls")), result("c1", "a.py\nbé.py")]
    before = orjson.dumps(messages)
    res = fix_encoding.apply(ctx(messages), fix_encoding.Config())
    assert res.messages is messages and orjson.dumps(res.messages) == before


@pytest.mark.slow
def test_corpus_tool_output_is_left_alone_and_fast(traces_path: Path) -> None:
    """The corpus has correct UTF-8 throughout: zero false fixes, and the check is cheap."""
    texts = [
        m["content"]
        for conv in iter_conversations(traces_path)
        for m in conv["messages"]
        if m.get("role") == "tool" and isinstance(m.get("content"), str)
    ]
    with cpu_timer() as took:
        changed = [t for t in texts if fix_text(t)[1]]
    assert changed == []
    assert took.seconds < 10  # ~14k outputs, 11 MB


MOJIBAKE_ALPHABET = list("abc Ã©â€œ”ìëíð¿Ñ\n–üöä寃쎄퀬紐낅졊異쒕젰경고\ufffd")
TEXTS = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.sampled_from(MOJIBAKE_ALPHABET), max_size=40),
    st.text(max_size=20).map(lambda t: t.encode("utf-8").decode("latin-1")),
    st.text(alphabet=st.characters(min_codepoint=0xAC00, max_codepoint=0xD7A3), max_size=10).map(
        lambda t: t.encode("utf-8").decode("cp949", errors="ignore")
    ),
)


@settings(max_examples=300, deadline=None)
@given(TEXTS)
def test_fixing_is_idempotent(text: str) -> None:
    once, _ = fix_text(text)
    assert fix_text(once) == (once, [])


KOREAN = st.characters(min_codepoint=0xAC00, max_codepoint=0xD7A3).filter(
    lambda c: len(c.encode("euc_kr", errors="ignore")) == 2
)
HANJA = st.characters(min_codepoint=0x4E00, max_codepoint=0x9FA5).filter(
    lambda c: len(c.encode("euc_kr", errors="ignore")) == 2
)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.one_of(KOREAN, HANJA, st.sampled_from(list(" a1:.\n"))), max_size=12))
def test_correct_korean_and_hanja_text_is_never_reversed(text: str) -> None:
    fixed, fixes = fix_text(text)
    assert fixed is text and fixes == []


def test_a_resent_clean_prefix_is_not_looked_at_again_and_new_mojibake_is_fixed() -> None:
    """The session's last list had nothing to fix: the messages it shares at the start are
    skipped; a broken result among the new ones, or in place of an earlier one, is fixed, and
    other options look at every message again."""
    broken = garble("Größe: 5 MB – fertig", "cp1252")
    clean = [user("hi"), assistant(None, shell("c1", "make sizes")), result("c1", "a.py\nbé.py")]
    kept: dict = {}
    first = fix_encoding.apply(ctx(clean, memo=kept), fix_encoding.Config())
    assert first.messages is clean
    grown = [*clean, assistant(None, shell("c2", "du")), result("c2", broken)]
    res = fix_encoding.apply(ctx(grown, memo=kept), fix_encoding.Config())
    assert res.messages[4]["content"] == "Größe: 5 MB – fertig"
    replaced = [clean[0], clean[1], result("c1", broken)]
    res = fix_encoding.apply(ctx(replaced, memo=kept), fix_encoding.Config())
    assert res.report["repairs"][0]["index"] == 2
    # the clean list again, then the same objects under options that repair user messages
    garbled_user = [user(garble("über", "cp1252")), *clean[1:]]
    assert (
        fix_encoding.apply(ctx(garbled_user, memo=kept), fix_encoding.Config()).messages
        is garbled_user
    )
    users = fix_encoding.Config(roles=("tool", "user"))
    res = fix_encoding.apply(ctx(garbled_user, memo=kept), users)
    assert res.messages[0]["content"] == "über"
