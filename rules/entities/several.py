"""A resolution that a request for several things rules out: "удали обе ветки, которые ты
создал" (both branches), "把你创建的分支都删掉" (all of them), "作ったブランチを両方削除して"
and "만든 브랜치 둘 다 삭제해" were read as the newest branch alone, a pointer to one of the
things asked for. A pointer names one thing, so a mention said with a word of number or
totality turns its resolution into an abstention (``several``), its entity a candidate: the
word right before the mention ("both", "обе", "les deux", "两个", "両方の"), in it ("both", a
plural relative pronoun: "ветки, которые …"; two counted before a CJK noun) or right after it
("…都", "…を全部", "… 둘 다", "…, both of them"; not "both locally and on origin", two places
of one thing). Only a word joined to the mention counts: "delete all files in the folder you
made" asks for one folder ("all" is the files'). Linear: fixed words, read over windows of
bounded length."""

from __future__ import annotations

import re

from rules.entities.order_unread import Placed
from rules.entities.ruled_out import abstention
from rules.report import Reference

_WINDOW_BEFORE = 24  # characters before the mention read ("удали обе ", "supprime les deux ")
_WINDOW_AFTER = 24  # and after it ("…都删掉", "…を両方とも", "…, both of them")

# a word of number or totality ending right where the mention starts (a determiner may follow:
# "all the", "tous les", "alle die")
_BEFORE = re.compile(
    r"(?:\b(?:both|all|each|every|either|two|three|four|several|multiple"
    r"|ambos|ambas|los\s{1,3}dos|las\s{1,3}dos|todos|todas|cada"
    r"|les\s{1,3}deux|tous|toutes|chaque"
    r"|beide|beiden|alle|allen|jede[nrs]?|die\s{1,3}zwei|die\s{1,3}beiden"
    r"|os\s{1,3}dois|as\s{1,3}duas"
    r"|entrambi|entrambe|ambedue|i\s{1,3}due|le\s{1,3}due|tutti|tutte|ogni"
    r"|iki|her\s{1,3}iki|tüm|bütün"
    r"|обе|оба|обоих|обеих|все|всех|два|две|три|каждую|каждый|каждое)"
    r"(?:\s{1,3}of)?(?:\s{1,3}(?:the|these|those|los|las|les|des|die|der|den|os|as|i|gli|le))?"
    r"|两个|兩個|俩|倆|所有|全部|每个|每個|両方の|全部の|すべての|全ての|二つの|2つの"
    r"|ふたつの|모든|(?<![가-힣])두|दोनों|सभी|सारे|सब)\s{0,3}\Z",
    re.IGNORECASE,
)
# in the mention: "both", a plural relative pronoun ("ветки, которые ты создал"), two counted
# before a CJK noun ("你创建的两个分支", "作った二つのフォルダ", "만든 두 폴더": not "두 번째",
# second); not a number said in words (English "two minutes ago" is a time)
_WITHIN = re.compile(
    r"\b(?:both|котор(?:ые|ых|ыми)|обе|оба|обоих|обеих)\b"
    r"|两个|兩個|俩|倆|二つ|2つ|ふたつ|두\s{0,2}개|(?<![가-힣])두\s{1,2}+(?!번)|दोनों",
    re.IGNORECASE,
)
# right after it, past a particle or a comma: "…都删掉", "…を両方", "… 둘 다", "…, both of them"
_AFTER = re.compile(
    r"[\s,]{0,3}+(?:(?:both|all|each)\s{1,3}+of\s{1,3}+them|them\s{1,3}+(?:both|all)"
    r"|both(?=\s{0,3}+(?:[.,;:!?)]|\Z))"
    r"|ambos|ambas|los\s{1,3}+dos|las\s{1,3}+dos|(?:tous|toutes)\s{1,3}+les\s{1,3}+deux|les\s{1,3}+deux"
    r"|alle\s{1,3}+beide|beide|os\s{1,3}+dois|as\s{1,3}+duas|entrambi|entrambe"
    r"|tutti\s{1,3}+e\s{1,3}+due|tutte\s{1,3}+e\s{1,3}+due|her\s{1,3}+ikisini|ikisini|hepsini"
    r"|обе|оба|обеих|обоих|все\s{1,3}+(?:две|два)|दोनों)\b"
    r"|\s{0,2}+(?:都|全都|全部(?!内容|內容|的)|两个都|兩個都|俩都|倆都|统统|統統|通通)"
    r"|(?:を|は|も)?\s{0,2}+(?:両方|全部(?!内容|內容|的)|すべて|全て|どちらも|どっちも|二つとも|2つとも|ふたつとも)"
    r"|(?:을|를|은|는|이|가|도)?\s{0,2}+(?:둘\s{0,2}+다|모두|전부|다(?=\s)|두\s{0,2}+개)"
    r"|\s{0,2}+(?:दोनों|सभी|सब(?!से))",
    re.IGNORECASE,
)


def asks_several(text: str, start: int, end: int) -> bool:
    """Whether the mention ``text[start:end]`` is said with a word of number or totality joined
    to it: right before it, in it or right after it."""
    return bool(
        _BEFORE.search(text, max(0, start - _WINDOW_BEFORE), start)
        or _WITHIN.search(text, start, end)
        or _AFTER.match(text[end : end + _WINDOW_AFTER])
    )


def several(ref: Reference, text: str, mention: Placed) -> Reference:
    """``ref`` as an abstention when its ``mention`` asks for several things, else itself. A
    mention through an anchor ("all the files in the folder you made") is left alone: its head
    may be plural, and two related entities abstain already."""
    entity = ref.get("entity")
    if not entity or mention.anchor is not None:
        return ref
    if not asks_several(text, mention.start, mention.end):
        return ref
    return abstention(ref, "several", str(entity.get("path") or ""))
