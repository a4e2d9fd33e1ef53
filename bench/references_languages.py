"""What each language of the references pack costs reference detection on the user messages of
the trace corpus (all English): ``detect`` over every user message's text with the default
languages, then with each language left out, best of three passes. A language is read only
where its script matches, so one the text does not hold costs one regex search over it.

    .venv/bin/python -m bench.references_languages
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from rules.entities.ref_detect import detect, fold
from rules.entities.ref_lexicon import load_lexicons
from rules.entities.resolve_refs import Config
from rules.messages import text_of
from tests.support.traces import iter_conversations


def user_texts() -> list[str]:
    """Every user message's text in the corpus (a message's first 20,000 characters)."""
    out = []
    for conv in iter_conversations():
        for message in conv["messages"]:
            if message.get("role") == "user":
                text = text_of(message.get("content"))
                if text:
                    out.append(text[:20_000])
    return out


def seconds(texts: Sequence[str], languages: tuple[str, ...]) -> float:
    kinds, lexicons = load_lexicons(())
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for text in texts:
            detect(text, kinds, lexicons, languages)
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    texts = user_texts()
    languages = tuple(Config().languages)
    _, lexicons = load_lexicons(())
    folded = [fold(t) for t in texts]
    whole = seconds(texts, languages)
    n = len(texts)
    print(f"{n} user messages, {sum(map(len, texts)):,} characters")
    print(f"all of {', '.join(languages)}: {whole / n * 1e6:.0f} µs a message")
    for lang in languages:
        lex = next(x for x in lexicons if x.lang == lang)
        read = sum(1 for t in folded if lex.script is None or lex.script.search(t))
        without = seconds(texts, tuple(x for x in languages if x != lang))
        print(f"  {lang}: +{(whole - without) / n * 1e6:5.1f} µs a message, read in {read}")


if __name__ == "__main__":
    main()
