"""A secret's name whose value is an object, for ``rules.redact``: the object's quoted values are
the secret (``terraform output -json``'s ``"db_password": {"sensitive": true, "type": "string",
"value": "…"}``, a Terraform variable's ``default = "…"``, Composer's ``"gitlab-token":
{"gitlab.example.com": "…"}``), but for the fields
that describe one (a schema's ``"password": {"type": "string", "format": "password"}``) or say
where it is kept. A captured body's parsed JSON loses such an object whole (``redact``'s field
rule); this reads the same objects in a text. Only a flat object of 1,024 characters at most: each
opening is read to the next brace, so the scan is linear."""

from __future__ import annotations

import re

from rules.redact_names import is_secret_name
from rules.redact_references import is_placeholder, names_a_source
from rules.redact_shapes import REDACTED

# A quoted name (escaped once, as in a JSON string), a colon, and a flat object
_OBJECT = re.compile(
    r"""(?P<q>\\?["'])(?P<name>[\w.\-]{1,64}+)(?P=q)[ \t]*+:[ \t\r\n]*+"""
    r"""\{(?P<body>[^{}]{1,1024}+)\}"""
)
# Terraform's ``variable "db_password" { default = "…" }`` (a block nested inside is not read)
_HCL_BLOCK = re.compile(
    r"""(?:variable|output)[ \t]++"(?P<name>[\w.\-]{1,64}+)"[ \t]*+\{(?P<body>[^{}]{1,1024}+)\}"""
)
_FIELD = re.compile(
    r"""(?:\\?["'](?P<field>[^"'\\\r\n]{1,64}+)\\?["'][ \t]*+:"""
    r"""|(?<![\w"'])(?P<hcl>[A-Za-z_][\w\-]{0,63}+)[ \t]*+=)[ \t\r\n]*+"""
    r"""(?:\\?"(?P<dq>(?:[^"\\\r\n]|\\[^"\r\n])*+)\\?"|'(?P<sq>(?:[^'\\\r\n]|\\[^\r\n])*+)')"""
)
# Fields that describe a secret or say where it is kept, not hold it: a schema's, Terraform's
# and a reference's (``{"name": "db-secret", "key": "password"}``)
_DESCRIBING = frozenset(
    {
        *("type", "format", "description", "title", "pattern", "$ref", "ref", "kind"),
        *("name", "key", "path", "file", "env", "source", "provider", "mount", "version"),
        *("secretname", "secret_name", "valuefrom", "encoding", "unit", "label", "hint"),
    }
)


def redact_secret_objects(text: str) -> str:
    """``text`` with the values of the objects its secret names hold replaced."""
    if "{" not in text:
        return text
    text = _OBJECT.sub(_redacted_object, text)
    if "variable" not in text and "output" not in text:
        return text
    return _HCL_BLOCK.sub(_redacted_object, text)


def _redacted_object(m: re.Match[str]) -> str:
    if not is_secret_name(m["name"]):
        return m[0]
    body, offset = m["body"], m.start("body") - m.start()
    pieces, last = [], 0
    for field in _FIELD.finditer(body):
        group = "dq" if field["dq"] is not None else "sq"
        value = field[group]
        named = field["field"] if field["field"] is not None else field["hcl"]
        if named.lower() in _DESCRIBING or not value or value.startswith(REDACTED):
            continue
        if names_a_source(value) or is_placeholder(value, bare=False):
            continue
        pieces += [body[last : field.start(group)], REDACTED]
        last = field.end(group)
    if not pieces:
        return m[0]
    out = m[0]
    return out[:offset] + "".join([*pieces, body[last:]]) + out[offset + len(body) :]
