"""Secrets named in Chinese, Japanese or Korean text, for ``rules.redact_triggers``: ``密码：…``,
``パスワードは S3cretです``, ``API key 是 …``. Linear: the value is bounded and read once."""

from __future__ import annotations

import re

from rules.redact_idents import CJK
from rules.redact_names import MIN_SECRET_CHARS
from rules.redact_prose import LOOKS_SET
from rules.redact_references import is_placeholder
from rules.redact_shapes import REDACTED

# A secret's name in Chinese, Japanese or Korean, and the shortest value it is given
CJK_NAMES = {
    **dict.fromkeys(("密码", "密碼", "口令", "パスワード", "비밀번호"), 1),
    **dict.fromkeys(("密钥", "秘钥", "密鑰", "金鑰", "令牌", "トークン", "토큰"), MIN_SECRET_CHARS),
    **dict.fromkeys(("apiキー", "アクセスキー", "シークレットキー"), MIN_SECRET_CHARS),
}
# After it: a colon or ``=`` (full-width too), or a copula (是, 为, は, 는 …); then a value that
# runs to a blank, a quote or the CJK text after it (``密码是 S3cret，用户名…``, ``パスワードは
# S3cretです``)
_CJK_VALUE = re.compile(
    r"[ \t]*+(?:(?P<sep>[:=：＝])|是|为|為|は|는|은|이|가)[ \t]*+[`\"'「『“]?"
    rf"(?P<bare>[^\s\"'`{CJK}]{{1,128}}+)"
)
_LETTER = re.compile(r"[A-Za-z]")


def cjk_value(text: str, end: int, needed: int) -> tuple[int, int, int] | None:
    """The value given to a secret named in CJK text ending at ``end``: any after a colon (the
    placeholders aside), one that looks set after a copula ("密码是必填项" holds none)."""
    m = _CJK_VALUE.match(text, end)
    if m is None:
        return None
    value = m["bare"].rstrip(".,;:!?)")
    if len(value) < needed or value.startswith(REDACTED) or is_placeholder(value, bare=True):
        return None
    if m["sep"] is None and not LOOKS_SET.search(value):
        return None
    if needed > 1 and not _LETTER.search(value):
        return None
    return m.start("bare"), m.start("bare") + len(value), m.start("bare") + len(value)
