"""A resolution that an order word beside the mention, not read as its place, rules out:
"删掉倒数第二个你创建的文件夹" (the second to last), "처음에 만든 컨테이너" (the first),
"предпоследнюю ветку" and "the commit before the last one" were read as the newest one made, a
wrong pointer. Where the
mention carries no place (``ordinal``), no anchor and no recency word ("first, delete the folder
you just made": the steps' order), an order word in it or at its edges turns
the resolution into an abstention (``order_unread``), its entity a candidate. The words a
language's pack reads as places itself ("the first folder", "el primer archivo") are not listed:
said apart from the noun they order the user's steps ("first, delete …", "primero, borra …").
Linear: one pattern over windows of bounded length."""

from __future__ import annotations

import re
from typing import Protocol

from rules.entities.ruled_out import abstention
from rules.entities.too_recent import Span
from rules.report import Reference

_WINDOW_BEFORE = 16  # characters before the mention read ("倒数第二个你创建的", "처음에 만든")
_WINDOW_AFTER = 24  # and after it ("the commit before the last one")

_ORDER = re.compile(
    r"\b(?:earliest|oldest|penultimate"
    r"|before\s{1,3}(?:the\s{1,3})?(?:last|latest|newest)|(?:the\s{1,3})?one\s{1,3}before"
    r"|más\s{1,3}antigu[oa]|plus\s{1,3}ancien(?:ne)?|älteste[nrs]?|mais\s{1,3}antig[oa]"
    r"|предпоследн\w{0,4}|перв(?:ый|ую|ая|ого|ой|ое)|втор(?:ой|ую|ая|ого|ое)"
    r"|сам(?:ый|ую|ая|ое)\s{1,3}(?:ранн|стар)\w{0,4})\b"
    r"|倒数|最早|最先|最初|最旧|第[一二三四五六七八九十\d]{1,2}(?:个|個|次)|头一个"
    r"|맨\s{0,2}처음|처음|첫\s{0,2}번째|[두세네]\s{0,2}번째|가장\s{0,2}(?:먼저|오래된)|마지막에서"
    r"|一番古い|最後から|[一二三四五1-5]番目",
    re.IGNORECASE,
)


class Placed(Span, Protocol):
    """A mention's place in the text, and whether it was read with a place of its own."""

    @property
    def ordinal(self) -> int | None: ...

    @property
    def anchor(self) -> object | None: ...

    @property
    def before(self) -> bool: ...


def order_unread(ref: Reference, text: str, mention: Placed) -> Reference:
    """``ref`` as an abstention when an order word in or beside its ``mention`` was not read as
    the mention's place, else itself."""
    entity = ref.get("entity")
    if not entity or mention.ordinal is not None or mention.anchor is not None or mention.before:
        return ref  # placed already ("the one before that": ``ref_other.the_one_before``)
    if (
        mention.recency
    ):  # "最初にさっき作ったフォルダを消して": just made; the word orders the steps
        return ref
    start = max(0, mention.start - _WINDOW_BEFORE)
    if _ORDER.search(text, start, min(len(text), mention.end + _WINDOW_AFTER)) is None:
        return ref
    return abstention(ref, "order_unread", str(entity.get("path") or ""))
