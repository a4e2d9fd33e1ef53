"""rules.text_cache: memoises pure functions of texts within a character budget."""

from __future__ import annotations

from rules.text_cache import ENTRY_CHARS, charge, text_cache


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

    bound = 3 * (30 + ENTRY_CHARS) + 10  # three entries of 30 characters and their own cost

    @text_cache(max_chars=bound)
    def length(text: str) -> int:
        calls.append(text)
        return len(text)

    texts = [str(i) * 30 for i in range(5)]
    for t in texts:
        length(t)
    assert length.cache_chars() <= bound  # type: ignore[attr-defined]
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
    assert length.cache_chars() == 3 * (1 + ENTRY_CHARS)  # three one-character entries


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
    from rules.entities import ref_read, resolve_refs

    memo = ref_read._scan
    memo.cache_clear()
    cfg = resolve_refs.Config()
    texts = [f"question {i}: delete the folder you just made" for i in range(300)]
    for text in texts:
        memo(text, (), cfg.languages, 0.6, None)
    held = texts[-ref_read.MEMO_ENTRIES :]  # the newest; each its text, value and own cost
    values = [memo(t, (), cfg.languages, 0.6, None) for t in held]
    assert memo.cache_chars() == sum(
        len(t) + ENTRY_CHARS + charge(v) for t, v in zip(held, values, strict=True)
    )
    memo.cache_clear()


def test_a_value_is_charged_what_it_holds() -> None:
    @text_cache(max_chars=10_000_000)
    def words(text: str) -> list[str]:
        return text.split()

    text = " ".join(f"w{i}" for i in range(1000))
    words(text)
    held = words.cache_chars()  # type: ignore[attr-defined]
    assert held == len(text) + ENTRY_CHARS + charge(text.split())
    assert charge(text.split()) > 1000 * 50  # each word an object, not only its characters


def test_short_texts_hold_a_few_bytes_a_unit_charged() -> None:
    """One tenant's many distinct short texts: charged their characters alone, the memo held
    16-44 bytes a character, and a gigabyte past its stated bound."""
    import gc
    import tracemalloc

    @text_cache(max_chars=2_000_000)
    def kind(text: str) -> tuple[str, int]:
        return ("word", len(text))

    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for i in range(40_000):
            kind(f"t{i}")
        gc.collect()
        used = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert kind.cache_chars() <= 2_000_000  # type: ignore[attr-defined]
    assert used <= 2 * kind.cache_chars(), used  # type: ignore[attr-defined]


def test_a_value_larger_than_the_cache_is_not_held_and_pushes_nothing_out() -> None:
    calls: list[str] = []

    @text_cache(max_chars=2_000)
    def upper(text: str) -> str:
        calls.append(text)
        return text.upper()

    upper("a small one")
    upper("x" * 5_000)  # held, it would have pushed every entry out, then itself
    upper("a small one")
    assert calls == ["a small one", "x" * 5_000]
    assert upper.cache_chars() < 2_000


def test_a_long_command_line_is_split_once_for_every_reader() -> None:
    from rules.activity import shell_lex

    line = "mv a b && mv b a && " * 2_000 + "true"
    first = shell_lex.split_commands(line)
    assert shell_lex.split_commands(line) is first  # a 40 KB line was split again by each rule
