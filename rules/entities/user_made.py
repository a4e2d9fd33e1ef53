"""A reference to what the user made themselves: "I've just dropped a new export into the repo
root … use the file I just added". At the top level "I" is read as the agent's work (a user
speaks of what the agent did for them as their own: "delete the folder I just created"), but not
when the user's own words since the agent made what is pointed at say they made something
themselves, or worked elsewhere ("in my other terminal", "myself"): the proxy never saw that
making, so the newest thing the agent made is not what is meant. The resolution turns into an
abstention (``user_made``), its entity the one candidate. English, Chinese, Japanese, Spanish,
German and French; bounded patterns, a bounded window."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Protocol

from rules.activity.storable import stored_id
from rules.base import Message
from rules.entities.ruled_out import abstention
from rules.entities.too_recent import Span
from rules.messages import call_id, role, text_of, tool_calls
from rules.report import Reference

_MAKE = (
    r"made|created|added|dropped|put|copied|uploaded|wrote|saved|moved|generated|downloaded"
    r"|placed|cloned|built|started|launched|pushed|opened|set\s{1,3}up"
)
# "I've just dropped", "we also made", "I have already created"; "myself"; "my other terminal"
_OWN = re.compile(
    rf"\b(?:I|we)(?:'ve|\s{{1,3}}have|\s{{1,3}}just|\s{{1,3}}also|\s{{1,3}}already){{0,3}}"
    rf"\s{{1,3}}(?:{_MAKE})\b"
    r"|\b(?:myself|ourselves)\b"
    r"|\b(?:my|our|another|the\s{1,3}other|a\s{1,3}separate)\s{1,3}(?:other\s{1,3})?"
    r"(?:terminal|shell|tab|window|machine|laptop|computer)\b",
    re.IGNORECASE,
)
# The same in the other languages the references are read in: a first person's own making
# (Spanish's and French's past forms, German's perfect with the object between, Chinese's 了,
# Japanese's polite past: the user's own act, the agent's would be "…てくれました"), "myself",
# another terminal. The mention itself ("the folder I just created") is read out first.
_OWN_IN: dict[str, re.Pattern[str]] = {
    "en": _OWN,
    "zh": re.compile(
        r"我们?(?:刚才|刚刚|刚|已经|也|先|手动)?(?:在[^，。,.；;]{1,24}?)?"
        r"(?:新建|创建|建立|建|做|放|添加|加|下载|复制|拷贝|上传|写|保存|生成|搭建|启动|克隆)了"
        r"|我们?自己|(?:我的|另一个|另外一个)(?:终端|窗口|标签页|机器|电脑)"
    ),
    "ja": re.compile(
        r"(?:作り|作成し|追加し|置き|入れ|ダウンロードし|コピーし|保存し|アップロードし|起動し"
        r"|立ち上げ|クローンし)ました"
        r"|自分で|手動で|別の(?:ターミナル|端末|ウィンドウ|タブ|マシン|パソコン)"
    ),
    "es": re.compile(
        r"\b(?:cre[ée]|hice|añad[íi]|copi[ée]|sub[íi]|guard[ée]|descargu[ée]|puse|mov[íi]"
        r"|gener[ée]|escrib[íi]|constru[íi]|clon[ée]|arranqu[ée]|inici[ée])\b"
        r"|\bhe\s{1,3}(?:creado|hecho|añadido|copiado|subido|guardado|descargado|puesto|movido"
        r"|generado|escrito|clonado|iniciado)\b"
        r"|\byo\s{1,3}mism[oa]\b|\b(?:mi|otra)\s{1,3}(?:otra\s{1,3})?"
        r"(?:terminal|ventana|pestaña|máquina|computadora|ordenador)\b",
        re.IGNORECASE,
    ),
    "de": re.compile(
        r"\b(?:ich|wir)\s{1,3}(?:habe?|hab)\b(?:\s{1,3}[\w.-]{1,40}){0,8}?\s{1,3}"
        r"(?:angelegt|erstellt|erzeugt|gemacht|hinzugefügt|kopiert|hochgeladen|gespeichert"
        r"|heruntergeladen|abgelegt|geschrieben|generiert|gebaut|geklont|gestartet)\b"
        r"|\b(?:selbst|selber)\b|\b(?:meinem|einem)\s{1,3}anderen\s{1,3}"
        r"(?:Terminal|Fenster|Tab|Rechner|Computer)\b",
        re.IGNORECASE,
    ),
    "fr": re.compile(
        r"\bj'ai\s{1,3}(?:d[ée]j[àa]\s{1,3}|aussi\s{1,3})?(?:cr[ée]{2}|fait|ajout[ée]|copi[ée]"
        r"|t[ée]l[ée]charg[ée]|mis|enregistr[ée]|g[ée]n[ée]r[ée]|[ée]crit|clon[ée]|lanc[ée])\b"
        r"|\bmoi-m[êe]me\b|\b(?:mon|un)\s{1,3}autre\s{1,3}(?:terminal|onglet|ordinateur)\b",
        re.IGNORECASE,
    ),
}
# A mention whose verb alone says it is the speaker's, in a language that drops the pronoun
# ("la carpeta que acabo de crear": I, where "acabas" is you)
_SPEAKER_VERB: dict[str, re.Pattern[str]] = {
    "es": re.compile(
        r"\b(?:acabo|acabamos)\s{1,3}de\b|\b(?:he|hemos)\s{1,3}\w{2,20}?(?:ado|ido)\b"
        r"|\b(?:cre[ée]|hice|añad[íi]|copi[ée]|sub[íi]|guard[ée]|descargu[ée]|puse|mov[íi]"
        r"|gener[ée]|escrib[íi])\b",
        re.IGNORECASE,
    ),
}
_MESSAGES = 8  # user messages read back, at most
_CHARS = 4_000  # of each, at most (its start)
_WALK = 200  # messages walked back, at most


def said_own(messages: Sequence[Message], question: int, since: str | None = None) -> list[str]:
    """The user's words before the question (``question``: its index), newest first, back to
    the agent's last tool call; with ``since`` (a call's id: the one that made what a reference
    points at), back to that call, the agent's later calls read past ("I created data/raw by
    hand" said after the agent's `mkdir build`, then `ls data/raw`). At most ``_MESSAGES`` user
    messages, ``_CHARS`` of each, ``_WALK`` messages walked."""
    out: list[str] = []
    for i in range(question - 1, max(question - 1 - _WALK, -1), -1):
        m = messages[i]
        if len(out) >= _MESSAGES:
            break
        calls = tool_calls(m)
        if since is None and (role(m) == "tool" or calls):
            break
        if calls and any(stored_id(call_id(c)) == since for c in calls):
            break
        if role(m) == "user":
            out.append(text_of(m.get("content"))[:_CHARS])
    return out


class Said(Span, Protocol):
    """What of a mention this reads (``Mention``): its place, language and actor."""

    @property
    def actor(self) -> str | None: ...


def user_made(
    ref: Reference,
    question: str,
    mention: Said,
    own: Callable[[str | None], list[str]],
    mentions: Sequence[Span] = (),
) -> Reference:
    """``ref`` as an abstention when its mention ("the file I just added") is the speaker's and
    the user's own words since what it points at was made (``own(its call's id)``, and the
    question outside its mentions: ``mentions``, the question's others) say they made something
    themselves; else itself. Another mention's own "I made" is no such word: "delete the folder
    I just created and the branch I made" gave up on both."""
    entity = ref.get("entity")
    said_own = _OWN_IN.get(mention.lang)
    if not entity or said_own is None or not _speakers(mention, question):
        return ref
    rest = _outside(question, max(mention.start - _CHARS, 0), mention.end + _CHARS,
                    [mention, *mentions])  # fmt: skip
    made_by = ref.get("call_id")
    if not any(said_own.search(text) for text in (rest, *own(made_by if made_by else None))):
        return ref
    return abstention(ref, "user_made", str(entity.get("path") or ""))


def _speakers(mention: Said, question: str) -> bool:
    """Whether the mention is the speaker's: by its pronoun, or by its verb alone."""
    if mention.actor is not None:
        return mention.actor == "speaker"
    verb = _SPEAKER_VERB.get(mention.lang)
    return verb is not None and verb.search(question, mention.start, mention.end) is not None


def _outside(question: str, start: int, end: int, spans: Sequence[Span]) -> str:
    """``question[start:end]`` without the words of ``spans`` (each a mention's)."""
    pieces: list[str] = []
    at = start
    for span in sorted(spans, key=lambda s: s.start):
        if span.end <= at or span.start >= end:
            continue
        pieces.append(question[at : max(span.start, at)])
        at = span.end
    pieces.append(question[at:end] if at < end else "")
    return " ".join(pieces)
