"""What a pronoun or "that file" may stand for, named in the words just before it: then it is
no reference to what the agent made ("if the cache directory exists, delete it", "node_modules
is corrupted, remove it", "the pip cache is stale, delete it")."""

from __future__ import annotations

import re

from rules.entities.ref_lexicon import Lexicon

WINDOW = 160  # characters before "delete it" read for what "it" stands for

# A name a pronoun may stand for in any language: snake_case ("node_modules is corrupted, remove
# it", "node_modulesが壊れているので、それを削除") or backticked. Not for "that file": a variable
# named before it ("about the `runner`, … in this spec file") is no file.
_THING_NAMED = re.compile(
    r"(?<![A-Za-z0-9_-])_*+[A-Za-z0-9]++(?:_++[A-Za-z0-9]++)++_*+(?![A-Za-z0-9_-])|`[^`\s]{1,64}`"
)
# English: a thing said to be in some state just before the pronoun ("the pip cache is stale,
# delete it", "my venv looks broken; remove it"): "it" is that thing, not one the agent made
_SUBJECT_SAID = re.compile(
    r"(?i:\b(?:the|my|your|our|this|that)[ \t]++[a-z][\w.-]{0,40}(?:[ \t]++[a-z][\w.-]{0,40})?"
    r"[ \t]++(?:is|are|was|were|seems|looks|got|has|keeps)\b)"
)


def named_before(lex: Lexicon, text: str, start: int) -> bool:
    """Whether the words just before ``start`` name a thing in the language's terms
    (``antecedent``: a noun of a kind, a path, a file name)."""
    if lex.antecedent is None:
        return False
    return lex.antecedent.search(text, max(0, start - WINDOW), start) is not None


def pronoun_stands_for_named(lex: Lexicon, text: str, start: int) -> bool:
    """Whether a pronoun at ``start`` stands for a thing named just before it: in the language's
    terms, a snake_case or backticked name, or (English) a thing said to be in some state."""
    if named_before(lex, text, start):
        return True
    window = max(0, start - WINDOW)
    if _THING_NAMED.search(text, window, start) is not None:
        return True
    return lex.lang == "en" and _SUBJECT_SAID.search(text, window, start) is not None


def name_goes_on(text: str, end: int) -> bool:
    """Whether the word ending at ``end`` goes on as a file or module name (``library.py``,
    ``config/settings``, ``test_utils``)."""
    return text[end : end + 1] in (".", "/", "_", "-") and text[end + 1 : end + 2].isalnum()
