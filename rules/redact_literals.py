"""A Kubernetes Secret made from a command line, for ``rules.redact_flags``: ``kubectl create
secret generic NAME --from-literal=KEY=VALUE`` (OpenShift's ``oc`` too; after global options,
``kubectl -n prod create secret …``) gives each value of the Secret, which is secret whatever
its key is named (``--from-literal=dsn=postgres://…``), as a manifest's ``data`` is
(``rules.redact_manifests``).
A ConfigMap's literals and ``--from-file=KEY=PATH`` (a path) stay."""

from __future__ import annotations

from collections.abc import Iterator

from rules.redact_words import Span, value_after

_LITERAL = "--from-literal"


def from_literals(text: str, words: list[Span]) -> Iterator[Span]:
    """The values of ``--from-literal`` pairs, when the command creates a Secret."""
    named = {text[s:e] for s, e in words[:8]}  # ``create secret`` after a few global options
    if "create" not in named or "secret" not in named:
        return
    for i, (start, end) in enumerate(words):
        if text.startswith(_LITERAL + "=", start):
            yield from value_after(text, start + len(_LITERAL) + 1, end, "=")
        elif text[start:end] == _LITERAL and i + 1 < len(words):
            yield from value_after(text, *words[i + 1], "=")
