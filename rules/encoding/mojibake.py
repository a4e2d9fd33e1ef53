"""Undoing mojibake in one text: UTF-8 that was decoded with the wrong code page.

- cp1252 / latin-1 (and the other code pages ftfy knows, e.g. cp1251): ``ftfy`` with only its
  encoding fixes on (no quote uncurling, no HTML unescaping, no width or normalisation changes),
  line by line so a correct line next to a broken one stays as it is.
- cp949 (Korean Windows), which ftfy does not cover: a line whose characters all re-encode to
  cp949 and whose bytes then decode as strict UTF-8 into *fewer* non-ASCII characters is
  reversed. Legitimate Korean text does not pass that test (its cp949 bytes are not valid UTF-8,
  or decode to as many characters), so correct text is left alone.

Lines with U+FFFD in them (bytes the wrong decoding already dropped) cannot be restored and are
left as they are. ASCII text is returned at once, so the usual tool output costs one ``isascii``.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

import ftfy
from ftfy import badness

# UTF-8 lead bytes C2..F4 read as latin-1/cp1252 are the characters Â..ô: no mojibake without one.
_LATIN_GATE = re.compile("[\u00c2-\u00f4]")
# In any single-byte code page, UTF-8 lead bytes read as letters somewhere in Latin-1 … Arabic.
_SBCS_GATE = re.compile("[\u00c0-\u06ff]")
# cp949 mojibake of UTF-8 is made of Hangul syllables and Hanja.
_CJK_GATE = re.compile("[\uac00-\ud7a3\u4e00-\u9fff\uf900-\ufaff]")
_FTFY = ftfy.TextFixerConfig(
    unescape_html=False,
    remove_terminal_escapes=False,
    fix_latin_ligatures=False,
    fix_character_width=False,
    uncurl_quotes=False,
    fix_line_breaks=False,
    fix_surrogates=False,
    remove_control_chars=False,
    normalization=None,
    explain=True,
)
_BAD_CATEGORIES = {"Cc", "Co", "Cn", "Cs"}


@dataclass(frozen=True)
class Fix:
    codec: str  # the code page the UTF-8 was wrongly read as
    lines: int


def _non_ascii(text: str) -> int:
    return sum(1 for ch in text if ord(ch) > 127)


# Where the characters of real text decoded right live; a cp949 reversal that yields anything
# else (Arabic digits, CJK extension B, unassigned code points …) was a coincidence, not a fix.
_COMMON_RANGES = (
    (0x00A0, 0x024F),  # Latin-1 supplement, Latin extended
    (0x0370, 0x052F),  # Greek, Cyrillic
    (0x2000, 0x2BFF),  # punctuation, arrows, box drawing, symbols
    (0x3000, 0x30FF),  # CJK punctuation, kana
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xFF00, 0xFFEF),  # fullwidth forms
)


def _plausible(ch: str) -> bool:
    o = ord(ch)
    if o < 0x80:
        return ch.isprintable() or ch in "\t\r"
    if 0xAC00 <= o <= 0xD7A3:  # Hangul: the 2,350 syllables of KS X 1001 that real text uses
        try:
            ch.encode("euc_kr")
        except UnicodeEncodeError:
            return False
        return True
    if unicodedata.category(ch) in _BAD_CATEGORIES:
        return False
    if unicodedata.category(ch) == "So":  # emoji and other symbols
        return True
    return any(lo <= o <= hi for lo, hi in _COMMON_RANGES)


def _fix_latin(line: str) -> tuple[str, str | None]:
    fixed, steps = ftfy.fix_and_explain(line, _FTFY)
    if fixed == line:
        return line, None
    codec = next((param for action, param in steps or [] if action == "encode"), "latin-1")
    return fixed, codec.removeprefix("sloppy-")


def _fix_cp949(line: str) -> str | None:
    if "\ufffd" in line or not _CJK_GATE.search(line):
        return None
    try:
        fixed = line.encode("cp949").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return None
    if fixed == line or _non_ascii(fixed) >= _non_ascii(line):
        return None
    if not all(_plausible(ch) for ch in fixed):
        return None
    return fixed


def fix_text(text: str, *, cp949: bool = True) -> tuple[str, list[Fix]]:
    """(text with mojibake undone, what was fixed). The same string object when nothing was."""
    if text.isascii():
        return text, []
    counts: dict[str, int] = {}
    # Split on "\n" only: str.splitlines would also split on U+0085, which is part of mojibake.
    lines = text.split("\n")
    changed = False
    for k, line in enumerate(lines):
        if line.isascii():
            continue
        # cp1252/latin-1 mojibake always shows one of Â..ô; other code pages (cp1251 …) are
        # left to ftfy's own detector, which only sees lines with letters it could come from.
        if _LATIN_GATE.search(line) or (_SBCS_GATE.search(line) and badness.is_bad(line)):
            fixed, codec = _fix_latin(line)
            if codec:
                lines[k], changed = fixed, True
                counts[codec] = counts.get(codec, 0) + 1
                continue
        if cp949:
            fixed_k = _fix_cp949(line)
            if fixed_k is not None:
                lines[k], changed = fixed_k, True
                counts["cp949"] = counts.get("cp949", 0) + 1
    if not changed:
        return text, []
    return "\n".join(lines), [Fix(codec, n) for codec, n in sorted(counts.items())]
