"""What a tool result showed that an agent copies into later calls: the paths (with their line
anchors), the identifiers (snake_case, CamelCase, dotted names, test names) and the ids it printed.
``names`` gives them all, for telling whether later calls used a result; ``digest`` a bounded
line of the first ones, kept in place of a result pruning elides, so the agent can still name
what it saw (and re-read it with the command the placeholder keeps).

One linear scan: a bounded character-class regex splits the text into words, each classified by
plain string tests (no backtracking on client text)."""

from __future__ import annotations

import re

from rules.redact import redact_text
from rules.text_cache import text_cache

# A word: what a path, an identifier or an id is made of; bounded, so a scan is linear.
_WORD = re.compile(r"[A-Za-z0-9_./:@#$+=-]{4,300}")
_TRIM_END = ".,:;'\"`()[]{}<>=#@$+-"
_TRIM_START = ":;'\"`()[]{}<>=#@$+"
_EXTENSIONS = frozenset(
    {
        "py", "pyi", "js", "jsx", "ts", "tsx", "go", "rs", "java", "kt", "c", "h", "cc", "cpp",
        "hpp", "cs", "rb", "php", "swift", "scala", "sh", "bash", "md", "rst", "txt", "json",
        "yaml", "yml", "toml", "ini", "cfg", "conf", "xml", "html", "css", "scss", "sql", "proto",
        "lock", "env", "csv", "ipynb", "vue", "svelte", "gradle", "mk", "cmake", "dockerfile",
    }
)  # fmt: skip
_HEX = frozenset("0123456789abcdef")
MAX_SCAN_CHARS = 200_000  # a result beyond this is named by its start (results are capped anyway)


def _classify(word: str) -> str | None:
    """``path``, ``ident``, ``id`` or None for a word of ``_WORD``, already trimmed."""
    if len(word) < 4 or word.startswith("-"):
        return None
    if "/" in word:
        return "path" if any(c.isalpha() for c in word) and "//" not in word else None
    stem, dot, ext = word.partition(":")[0].rpartition(".")
    if dot and stem and ext.lower() in _EXTENSIONS:
        return "path"
    if len(word) >= 8 and set(word.lower()) - set("-") <= _HEX:
        lowered = word.lower()
        if any(c.isdigit() for c in lowered) and any(c.isalpha() for c in lowered):
            return "id"
    if len(word) < 6 or not (word[0].isalpha() or word[0] == "_"):
        return None
    if ".." in word or any(not (c.isalnum() or c in "_.") for c in word):
        return None
    if "_" in word.strip("_") or "." in word:
        return "ident"
    inner = word[1:]
    if any(c.isupper() for c in inner) and any(c.islower() for c in inner):
        return "ident"  # CamelCase or camelCase
    return None


def _words(text: str) -> tuple[tuple[str, str], ...]:
    """(kind, word) of each path, identifier and id in ``text``, first appearance order."""
    seen: set[str] = set()
    out: list[tuple[str, str]] = []
    for match in _WORD.finditer(text, 0, MAX_SCAN_CHARS):
        word = match.group().lstrip(_TRIM_START).rstrip(_TRIM_END)
        if word in seen:
            continue
        seen.add(word)
        kind = _classify(word)
        if kind is not None:
            out.append((kind, word))
    return tuple(out)


_scan = text_cache(max_chars=8_000_000, max_text_chars=MAX_SCAN_CHARS)(_words)
# the redactor reads this far past the scan's end: a secret cut there is still known as one
_REDACT_MARGIN = 2_000


@text_cache(max_chars=8_000_000, max_text_chars=MAX_SCAN_CHARS + _REDACT_MARGIN)
def _shown_words(text: str) -> tuple[tuple[str, str], ...]:
    return _words(redact_text(text))


def _shown(text: str) -> tuple[tuple[str, str], ...]:
    """``_scan`` of the text as a digest shows it: redacted first, so that a secret the redactor
    knows by its context (a password's value after its key) is never named bare, where the
    stored copy's redaction could no longer tell it."""
    return _shown_words(text[: MAX_SCAN_CHARS + _REDACT_MARGIN])


# asked of every old result and recent call at each look for a compaction: the same texts come
# back on every request of a session (held as ``_scan``'s are)
@text_cache(max_chars=8_000_000, max_text_chars=MAX_SCAN_CHARS)
def names(text: str) -> frozenset[str]:
    """Every path, identifier and id ``text`` shows (a path also by its last part, as a later
    call may name a file by its base name or its path from another folder)."""
    out: set[str] = set()
    for kind, word in _scan(text):
        out.add(word)
        if kind == "path":
            path, _, rest = word.partition(":")  # a line anchor, or pytest's ``::Test::name``
            base = path.rstrip("/").rsplit("/", 1)[-1]
            out.update(x for x in (path, base, *rest.split(":")) if len(x) >= 4)
    return frozenset(out)


def paths_in(text: str) -> list[str]:
    """The paths ``text`` names, each without its line anchor (or pytest's ``::name``)."""
    return [word.partition(":")[0] for kind, word in _scan(text) if kind == "path"]


def sized(text: str) -> tuple[int, int]:
    """(items, characters) of a digest of ``text``: a twelfth of its length, between 12 items
    in 240 characters and 48 in 960 (a longer result showed more worth naming, and eliding it
    still frees most of it)."""
    chars = min(max(len(text) // 12, 240), 960)
    return chars // 20, chars


def in_order(text: str, max_items: int, max_chars: int) -> list[str]:
    """The paths, identifiers and ids ``text`` shows in the order they appeared, whatever their
    kind, at most ``max_items`` of them and ``max_chars`` characters in all: a dropped run's
    line. Paths first (``digest``) crowded out the identifiers after them, 2.7 times as many of
    the literals later calls copy as paths, and 5.6 times as many of those dropped runs lost
    (``bench/next_action_losses.py``)."""
    out: list[str] = []
    used = 0
    for _, word in _shown(text):
        if len(out) >= max_items:
            break
        if used + len(word) + 2 > max_chars:
            continue  # one long word does not crowd out the short ones after it
        out.append(word)
        used += len(word) + 2
    return out


def digest(text: str, max_items: int = 12, max_chars: int = 240) -> list[str]:
    """The first paths (line anchors kept), then identifiers, then ids ``text`` shows, at most
    ``max_items`` of them and ``max_chars`` characters in all."""
    found = _shown(text)
    out: list[str] = []
    used = 0
    for wanted in ("path", "ident", "id"):
        for kind, word in found:
            if kind != wanted:
                continue
            if len(out) >= max_items or used + len(word) + 2 > max_chars:
                return out
            out.append(word)
            used += len(word) + 2
    return out
