"""Whether the value after a secret's name holds the secret, for ``rules.redact_triggers``: not
when it names where the secret is kept, a placeholder, a type, an interpolation or an object; a
YAML block scalar's lines when it opens one."""

from __future__ import annotations

import re

from rules.redact_idents import VALUE_GROUPS
from rules.redact_names import value_fits
from rules.redact_references import declares, is_placeholder, names_a_source, names_where_kept
from rules.redact_shapes import REDACTED
from rules.redact_yaml_blocks import block_span


def held_span(text: str, m: re.Match[str], name: str, needed: int) -> tuple[int, int, int] | None:
    """The span of the value ``m`` holds after the secret name ``name`` (``needed``: its shortest
    value), and where the scan goes on; None when it is no secret."""
    groups = m.groupdict()
    group = next(g for g in VALUE_GROUPS if groups.get(g) is not None)
    value: str = m[group]
    if group == "bare" and value == "{":
        # an object opens (``"db_password": {…}``, a schema's ``password: { type: String }``):
        # no value of its own; its fields are judged in their turn (``redact_objects``)
        return m.end(), m.end(), m.end()
    if (
        group == "bare"
        and _BLOCK_SCALAR.fullmatch(value)
        and ":" in text[m.start() : m.start(group)]
        and _LINE_END.match(text, m.end())
    ):
        return block_span(text, m.start(), m.end())  # YAML's ``password: |`` and its lines
    # a value that starts redacted was a key or a URL's password: ``token:[REDACTED]@host``
    if value.startswith(REDACTED) or len(value) < needed or not value_fits(name, value):
        return None
    if group == "bare" and names_where_kept(text, m.start(group), m.end(group)):
        return None  # ``token = os.environ['GITHUB_TOKEN']``: code, not the token
    if _no_secret(text, m, group):
        # ``password: str``, ``token: <sensitive>``, ``api_key: "{{ … }}"``: read past it, but
        # for a command's output, whose words are read in their turn (``$(echo …)``)
        at = m.end() if not value.startswith(_SUBSTITUTED) else m.start(group)
        return at, at, at
    return m.start(group), m.end(group), m.end()


# YAML's block scalar indicator (``|``, ``>-``, ``|2+``): the value is on the lines below
_BLOCK_SCALAR = re.compile(r"[|>](?:[+-]?[1-9]?|[1-9][+-])")
_LINE_END = re.compile(r"[ \t]*+(?:#[^\r\n]*+)?(?:\r?\n|\Z)")
_SUBSTITUTED = ("$(", "`")


def _no_secret(text: str, m: re.Match[str], group: str) -> bool:
    """Whether the value ``m[group]`` stands where a secret would without being one: a reference
    to where it is kept, a placeholder, or (after a colon) a type annotation or a YAML tag."""
    value, bare = m[group], group == "bare"
    if names_a_source(value, bare) or is_placeholder(value, bare):
        return True
    if not bare and "{" in value and _interpolating(text, m.start(group)):
        return True  # ``f"{settings.DB_PASSWORD}"``, C#'s ``$"Bearer {token}"``: names it
    if bare and _PLAN_PLACEHOLDER.match(text, m.start(group)) is not None:
        return True  # ``password = (sensitive value)``: the bare value is cut at its blank
    if not bare or "=" in text[m.start() : m.start(group)]:
        return False
    return declares(value, text[m.end(group) : m.end(group) + 1])


def _interpolating(text: str, start: int) -> bool:
    """Whether the quoted value at ``start`` is an f-string's or C#'s ``$"…"`` (its quote maybe
    escaped, inside JSON)."""
    at = start - 1  # the quote
    while at > 0 and text[at - 1] == "\\":
        at -= 1
    prefix = text[max(0, at - 2) : at]
    return prefix[-1:] in ("f", "F", "$") or (
        prefix[-1:] in ("r", "R", "@") and prefix[-2:-1] in ("f", "F", "$")
    )


# What Terraform's plan shows for a value it hides or does not know yet
_PLAN_PLACEHOLDER = re.compile(r"\((?:sensitive(?: value)?|known after apply)\)(?![^\s,;])")
