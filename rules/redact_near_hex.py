"""32+ hex runs (and AWS secret access keys) near a secret's name, for
``rules.redact_triggers``: bare hex is a digest or an id anywhere else."""

from __future__ import annotations

import re

from rules.redact_names import min_chars, name_words
from rules.redact_shapes import AWS_SECRET

# A 32+ hex run (or an AWS secret access key) up to 32 characters further on the line, whole.
_NEAR_HEX = re.compile(
    rf"[^\n]{{0,32}}?(?P<cred>(?<![0-9A-Za-z])[0-9a-fA-F]{{32,}}(?![0-9A-Za-z])|{AWS_SECRET})"
)


def hex_spans(text: str, begin: int, end: int, seen: set[int]) -> list[tuple[int, int]]:
    """32+ hex runs after the secret name ``text[begin:end]``: the first within 32 characters
    on its line, then each within 32 of the one before (so that redacting one never brings the
    next within reach of a second pass)."""
    name = text[max(begin, end - 64) : end]  # as ``name_ending`` reads it: 64 at most
    if min_chars(name) is None and name_words(name) != ["key"]:  # "API key: 9f86…" is one
        return []
    spans = []
    while (m := _NEAR_HEX.match(text, end)) is not None and m.start("cred") not in seen:
        seen.add(m.start("cred"))  # a chain that reaches a run already seen has the rest
        spans.append(m.span("cred"))
        end = m.end()
    return spans
