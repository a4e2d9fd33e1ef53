"""A resolution the user's own time words rule out: "delete the branch I created last week" read
the branch the agent made a minute ago as meant. A time of a day or more ago said beside the
mention ("yesterday", "last week", "3 days ago", "上周", "昨日", "지난주", "la semaine dernière",
"на прошлой неделе"), or earlier today ("this morning", "two hours ago", "ce matin", "今朝",
at least half an hour), and an entity the proxy saw made more recently than that turns the
resolution into an abstention (``too_recent``), its entity a candidate. An entity the message
names stands; so does one seen long enough ago (a session resumed across days), and one said
to be just made. Linear: fixed phrases read in the mention and at its two edges, each a window
of bounded length."""

from __future__ import annotations

import re
from typing import Protocol

from rules.entities.ruled_out import abstention, names_of
from rules.report import Reference

_HOUR = 3600
_WINDOW_BEFORE = 16  # characters before the mention read (CJK: "我上周创建的", "昨日作った")
_WINDOW_AFTER = 40  # and after it ("… that I created last week")

_WEEKDAYS = (
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday"
    r"|lunes|martes|miércoles|jueves|viernes|sábado|domingo"
    r"|lundi|mardi|mercredi|jeudi|vendredi|samedi|dimanche"
    r"|montag|dienstag|mittwoch|donnerstag|freitag|samstag|sonntag"
)
# a day ago or so (yesterday, last night, last Friday): at least _DAY_AGO
_DAY = re.compile(
    rf"\b(?:yesterday|last\s{{1,3}}(?:night|evening|{_WEEKDAYS})|ayer|anoche|gestern"
    r"|ontem|ieri|gisteren|wczoraj|вчера)\b"
    r"|昨天|昨晚|昨日|昨夜|어제|어젯밤",
    re.IGNORECASE,
)
_NUMBER = r"(?:\d{1,3}|a\s{1,3}few|a\s{1,3}couple\s{1,3}of|couple\s{1,3}of|two|three|several)"
# days ago or more (last week, the other day, 3 days ago): at least _DAYS_AGO
_DAYS = re.compile(
    rf"\b(?:last\s{{1,3}}(?:week|month|year)|the\s{{1,3}}other\s{{1,3}}day"
    r"|(?:a|one)\s{1,3}(?:week|month|year)\s{1,3}ago"
    rf"|the\s{{1,3}}day\s{{1,3}}before\s{{1,3}}yesterday|{_NUMBER}\s{{1,3}}(?:days|weeks|months)"
    r"\s{1,3}ago|(?:la|el)\s{1,3}(?:semana|mes|año)\s{1,3}pasad[oa]|anteayer|antier"
    r"|hace\s{1,3}(?:\d{1,3}|unos|unas|dos|tres|varios|varias)\s{1,3}(?:días|semanas|meses)"
    r"|(?:la\s{1,3}semaine|le\s{1,3}mois|l'année)\s{1,3}derni[eè]re?|avant-hier|l'autre\s{1,3}jour"
    r"|il\s{1,3}y\s{1,3}a\s{1,3}(?:\d{1,3}|quelques|deux|trois)\s{1,3}(?:jours|semaines|mois)"
    r"|(?:letzte|vorige|vergangene)n?\s{1,3}(?:woche|monat|jahr)|vorgestern|neulich"
    r"|vor\s{1,3}(?:\d{1,3}|ein\s{1,3}paar|einigen|zwei|drei)\s{1,3}(?:tagen|wochen|monaten)"
    r"|(?:na\s{1,3})?(?:semana|mês|ano)\s{1,3}passad[oa]|anteontem"
    r"|há\s{1,3}(?:\d{1,3}|uns|umas|alguns|algumas|dois|duas|três)\s{1,3}(?:dias|semanas|meses)"
    r"|la\s{1,3}settimana\s{1,3}scorsa|l'altro\s{1,3}ieri"
    r"|на\s{1,3}прошлой\s{1,3}неделе|в\s{1,3}прошлом\s{1,3}(?:месяце|году)|позавчера|на\s{1,3}днях"
    r"|(?:\d{1,3}|несколько|пару|два|три)\s{1,3}(?:дня|дней|недели|недель)\s{1,3}назад)\b"
    r"|上周|上星期|上个?礼拜|上个月|去年|前天|前几天|几天前|\d{1,3}\s{0,2}天前"
    r"|先週|先月|一昨日|おととい|数日前|この間|\d{1,3}\s{0,2}日前"
    r"|지난\s{0,2}(?:주|달)(?:에|말)?(?![가-힣])|작년|그저께|며칠\s{0,2}전|\d{1,3}\s{0,2}일\s{0,2}전",
    re.IGNORECASE,
)
# earlier today (this morning, two hours ago): at least _HOURS_AGO
_HOURS = re.compile(
    r"\b(?:this\s{1,3}(?:morning|afternoon)|earlier\s{1,3}today"
    r"|(?:an|one|two|three|a\s{1,3}few|a\s{1,3}couple\s{1,3}of|several|\d{1,2})\s{1,3}hours?"
    r"\s{1,3}ago|esta\s{1,3}(?:mañana|tarde|manhã)|hoje\s{1,3}de\s{1,3}manhã"
    r"|hace\s{1,3}(?:una|unas|dos|tres|\d{1,2})\s{1,3}horas?"
    r"|há\s{1,3}(?:uma|umas|duas|três|\d{1,2})\s{1,3}horas?"
    r"|ce\s{1,3}matin|cet\s{1,3}après-midi|il\s{1,3}y\s{1,3}a\s{1,3}(?:une|deux|trois|\d{1,2})"
    r"\s{1,3}heures?|heute\s{1,3}(?:früh|morgen|vormittag|nachmittag)"
    r"|vor\s{1,3}(?:einer|zwei|drei|\d{1,2})\s{1,3}stunden?|stamattina|questa\s{1,3}mattina"
    r"|сегодня\s{1,3}утром|(?:час|два\s{1,3}часа|несколько\s{1,3}часов)\s{1,3}назад)\b"
    r"|今天早上|今早|今天上午|几个小时前|\d{1,2}\s{0,2}个?小时前|今朝|数時間前|\d{1,2}\s{0,2}時間前"
    r"|오늘\s{0,2}아침|몇\s{0,2}시간\s{0,2}전|\d{1,2}\s{0,2}시간\s{0,2}전",
    re.IGNORECASE,
)
_HIER = re.compile(r"\bhier\b", re.IGNORECASE)  # French only: "here" in German and Dutch
_PARTICLES = ("에", "に", "了")  # after a time word, before the mention ("지난주에 만든")
_DAY_AGO = 3 * _HOUR  # "yesterday" said of a thing made in the last three hours: not it
_DAYS_AGO = 24 * _HOUR
_HOURS_AGO = _HOUR // 2  # "this morning" said of a thing made in the last half hour: not it


def _found(pattern: re.Pattern[str], lang: str, where: str) -> list[re.Match[str]]:
    found = list(pattern.finditer(where))
    return found + list(_HIER.finditer(where)) if lang == "fr" else found


def said_age(text: str, start: int, end: int, lang: str = "en") -> int:
    """The least age, in seconds, that time words said of the mention ``text[start:end]`` give
    what it names (0: none): in its own words, right after it ("… I created last week") or
    right before it ("我上周创建的", "昨日作った", "지난주에 만든"); a time later in the sentence
    is the data's or the task's ("… on last week's data", "… with the one from yesterday")."""
    after = text[end : end + _WINDOW_AFTER].lstrip()
    before = text[max(0, start - _WINDOW_BEFORE) : start].rstrip()
    if before.endswith(_PARTICLES):
        before = before[:-1].rstrip()
    for least, pattern in ((_DAYS_AGO, _DAYS), (_DAY_AGO, _DAY), (_HOURS_AGO, _HOURS)):
        if (
            _found(pattern, lang, text[start:end])
            or any(
                m.start() == 0 and not _possessive(after, m.end())
                for m in _found(pattern, lang, after)
            )
            or any(m.end() == len(before) for m in _found(pattern, lang, before))
        ):
            return least
    return 0


def _possessive(text: str, at: int) -> bool:
    """Whether the time words go on as a possessive ("yesterday's logs"): the data's time."""
    return text[at : at + 2] in ("'s", "’s")


class Span(Protocol):
    """A mention's place in the text (``ref_detect.Mention``)."""

    @property
    def start(self) -> int: ...

    @property
    def end(self) -> int: ...

    @property
    def lang(self) -> str: ...

    @property
    def recency(self) -> bool: ...


def too_recent(ref: Reference, text: str, mention: Span) -> Reference:
    """``ref`` as an abstention when the time words around its ``mention`` put the thing meant
    further back than its entity was made, else itself."""
    entity, age = ref.get("entity"), ref.get("age_s")
    if not entity or not isinstance(age, int):
        return ref
    if mention.recency:  # "the folder you just created …": said as just made
        return ref
    least = said_age(text, mention.start, mention.end, mention.lang)
    if not least or age >= least:
        return ref
    low = text.lower()
    if any(2 <= len(n) <= 200 and n.lower() in low for n in names_of(entity)):
        return ref  # named: the user's word for which one
    return abstention(ref, "too_recent", str(entity.get("path") or ""))
