"""rules.text_cache: memoises pure functions of texts within a character budget."""

from __future__ import annotations

from rules.text_cache import text_cache


def test_hits_are_answered_from_the_cache() -> None:
    calls: list[str] = []

    @text_cache(max_chars=1_000)
    def upper(text: str) -> str:
        calls.append(text)
        return text.upper()

    assert upper("abc") == upper("abc") == "ABC"
    assert calls == ["abc"]


def test_the_cache_holds_at_most_its_characters_oldest_out_first() -> None:
    calls: list[str] = []

    @text_cache(max_chars=100)
    def length(text: str) -> int:
        calls.append(text)
        return len(text)

    texts = [str(i) * 30 for i in range(5)]  # 31 "chars" each with the entry's own unit
    for t in texts:
        length(t)
    assert length.cache_chars() <= 100  # type: ignore[attr-defined]
    length(texts[-1])  # the newest is still held
    length(texts[0])  # the oldest was dropped: computed again
    assert calls == [*texts, texts[0]]


def test_a_text_over_the_per_text_limit_is_never_held() -> None:
    calls: list[str] = []

    @text_cache(max_chars=10_000, max_text_chars=50)
    def length(text: str) -> int:
        calls.append(text)
        return len(text)

    big = "x" * 100
    assert length(big) == length(big) == 100
    assert calls == [big, big]
    assert length.cache_chars() == 0  # type: ignore[attr-defined]


def test_other_arguments_are_part_of_the_key() -> None:
    @text_cache(max_chars=1_000)
    def tagged(text: str, n: int | None = None) -> str:
        return f"{text}:{n}"

    assert tagged("a", 1) == "a:1"
    assert tagged("a", 2) == "a:2"


def test_the_cache_holds_at_most_its_entries_least_recently_used_out_first() -> None:
    calls: list[str] = []

    @text_cache(max_chars=1_000_000, max_entries=3)
    def length(text: str) -> int:
        calls.append(text)
        return len(text)

    for t in ("a", "b", "c"):
        length(t)
    length("a")  # used again: "b" is now the least recently used
    length("d")  # a fourth entry: "b" goes
    assert calls == ["a", "b", "c", "d"]
    length("a")
    length("c")
    length("d")  # all three still held
    assert calls == ["a", "b", "c", "d"]
    length("b")  # dropped: computed again
    assert calls == ["a", "b", "c", "d", "b"]
    assert length.cache_chars() == 3 * 2  # three one-character entries (one unit each besides)


def test_cache_clear_empties_the_cache() -> None:
    calls: list[str] = []

    @text_cache(max_chars=1_000)
    def upper(text: str) -> str:
        calls.append(text)
        return text.upper()

    upper("abc")
    upper.cache_clear()
    assert upper.cache_chars() == 0
    assert upper("abc") == "ABC"
    assert calls == ["abc", "abc"]


def test_resolve_refs_text_memos_stay_within_their_entries() -> None:
    from rules.entities import resolve_refs

    memo = resolve_refs._scan
    memo.cache_clear()
    cfg = resolve_refs.Config()
    texts = [f"question {i}: delete the folder you just made" for i in range(300)]
    for text in texts:
        memo(text, (), cfg.languages, 0.6, None)
    held = texts[-resolve_refs.MEMO_ENTRIES :]  # the newest; each entry counts its text + 1
    assert memo.cache_chars() == sum(len(t) + 1 for t in held)
    memo.cache_clear()
