"""A name said of a thing beside its noun, where the grammar's ``<mod>`` slot (the word just
before an English noun: "the redis container") does not reach: after the noun through a
preposition ("the container running redis", "el contenedor de postgres", "контейнер с redis",
"le conteneur de redis", "den Container mit redis"), or before it in Chinese, Japanese and Korean
("跑 postgres 的那个容器", "redisのコンテナ", "redis 컨테이너"). Of the candidates, those holding it
are kept when any does (``ref_candidates``): a word none holds says nothing. Linear: each pattern
is anchored at the mention's edge, over a window of bounded length."""

from __future__ import annotations

import re

_AFTER_CHARS = 48
_BEFORE_CHARS = 24
_WORD = r"(?P<word>[A-Za-z][A-Za-z0-9_.+:/-]{1,40}+)"  # ASCII: "redisの" ends at the particle
_AFTER = {
    "en": r"(?:running|with|using|from|based\s++on|(?:that|which)\s++runs)",
    "es": r"(?:de|del|con|que\s++corre)",
    "pt": r"(?:de|do|da|com|que\s++roda)",
    "fr": r"(?:de|du|avec|d')",
    "de": r"(?:mit|von|für)",
    "ru": r"(?:с|со|для|из)",
}
_ARTICLE = r"(?:(?:the|el|la|los|las|le|les|o|a|os|as|der|die|das|den|dem)\s++)?"
_AFTER_RE = {
    lang: re.compile(rf"\s*+{words}\s*+{_ARTICLE}{_WORD}(?![A-Za-z0-9_.+:/-])", re.IGNORECASE)
    for lang, words in _AFTER.items()
}
# before the noun: "postgres 的", "redisの", "redis " (the mention's start is its noun or a
# demonstrative: "那个容器")
_BEFORE_RE = {
    "zh": re.compile(rf"(?<![A-Za-z0-9_.+:/-]){_WORD}\s*+的?\s*+$"),
    "ja": re.compile(rf"(?<![A-Za-z0-9_.+:/-]){_WORD}\s*+の?\s*+$"),
    "ko": re.compile(rf"(?<![A-Za-z0-9_.+:/-]){_WORD}\s*+(?:의\s*+)?$"),
}
# words that name nothing: articles, pronouns, the user's and the agent's own, and words that
# say what a thing is like ("with the new limits")
_EMPTY = frozenset(
    ("the", "this", "that", "these", "those", "it", "its", "me", "you", "your", "my", "our",
     "them", "him", "her", "us", "and", "or", "all", "any", "some", "one", "which", "what",
     "new", "old", "same", "other", "latest", "last", "first", "more", "less", "a", "an")
)  # fmt: skip


def detail_near(lang: str, text: str, start: int, end: int) -> str | None:
    """The name said of the thing the mention ``text[start:end]`` names, beside its noun."""
    after = _AFTER_RE.get(lang)
    found = after.match(text[end : end + _AFTER_CHARS]) if after is not None else None
    if found is None and lang in _BEFORE_RE:
        found = _BEFORE_RE[lang].search(text[max(0, start - _BEFORE_CHARS) : start])
    if found is None:
        return None
    word = found["word"].rstrip(".:/-").lower()
    return word if len(word) >= 2 and word not in _EMPTY else None
