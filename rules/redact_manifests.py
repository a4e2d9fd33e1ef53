"""A Kubernetes Secret's values, for ``rules.redact``: every entry of its ``data`` and
``stringData`` maps is a secret whatever its name (``kubectl get secret app -o yaml`` shows
``DATABASE_URL: cG9zdGdyZXM6Ly9…``, a database URL with its password, base64-encoded; a name
that does not say secret kept it). Read only in a text that says ``kind: Secret`` (YAML or JSON);
linear: each map is read line by line (YAML) or entry by entry (JSON) from where it opens."""

from __future__ import annotations

import re

from rules.redact_shapes import REDACTED

_KIND = re.compile(r"""["']?kind["']?[ \t]*+:[ \t]*+["']?Secret\b""")
# YAML: a map's opening line, then its entries, each indented deeper than it
_YAML_MAP = re.compile(r"(?m)^(?P<ind>[ \t]*+)(?:data|stringData):[ \t]*+\r?$")
_YAML_ENTRY = re.compile(
    r"\r?\n(?P<ind>[ \t]++)[\w.\-/]{1,253}+:[ \t]++(?P<value>[^\s#'\"][^\r\n]*+|'[^'\r\n]*+'"
    r"|\"[^\"\r\n]*+\")"
)
# JSON: a map's opening, then its entries ("name": "value")
_JSON_MAP = re.compile(r"\"(?:data|stringData)\"[ \t\r\n]*+:[ \t\r\n]*+\{")
_JSON_ENTRY = re.compile(
    r"[ \t\r\n]*+\"[^\"\\\r\n]{1,253}+\"[ \t\r\n]*+:[ \t\r\n]*+"
    r"\"(?P<value>[^\"\\]*+)\"[ \t\r\n]*+,?"
)


def redact_secret_data(text: str) -> str:
    """``text`` with the values of its Secrets' ``data`` and ``stringData`` maps replaced."""
    if "Secret" not in text or _KIND.search(text) is None:
        return text
    spans: list[tuple[int, int]] = []
    for opening in _YAML_MAP.finditer(text):
        depth, at = len(opening["ind"]), opening.end()
        while (entry := _YAML_ENTRY.match(text, at)) is not None and len(entry["ind"]) > depth:
            spans.append(entry.span("value"))
            at = entry.end()
    for opening in _JSON_MAP.finditer(text):
        at = opening.end()
        while (entry := _JSON_ENTRY.match(text, at)) is not None:
            spans.append(entry.span("value"))
            at = entry.end()
    pieces, last = [], 0
    for start, end in sorted(spans):
        if start >= last and text[start:end].strip("'\"") not in ("", REDACTED):
            pieces += [text[last:start], REDACTED]
            last = end
    return "".join([*pieces, text[last:]]) if pieces else text
