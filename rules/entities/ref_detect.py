"""Detecting vague references to files and folders in a user's text, in English, Chinese, Korean
and Japanese: "the folder I just created", "that file", "it", "刚创建的文件夹", "그 파일",
"さっき作ったフォルダ". The lexicons and pattern templates come from the ``references`` pack;
this module only compiles and applies them. Text the proxy injected earlier is ignored.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rules.messages import INJECT_CLOSE, INJECT_OPEN
from rules.packs import builtin_strings, compile_regex, load_pack

# Linear: every opening marker's match runs to its closing one or to the end, so none rescans.
_INJECTED = re.compile(re.escape(INJECT_OPEN) + r".*?(?:" + re.escape(INJECT_CLOSE) + r"|\Z)", re.S)
_SLOTS = ("type", "action", "rec_adj", "rec", "dem", "art", "subj", "pron", "op")


@dataclass(frozen=True)
class Mention:
    text: str
    start: int
    lang: str
    kind: str
    base: float  # the kind's base confidence
    type: str | None  # file | folder | None (any)
    action: str | None  # create | delete | … | None (any)
    recency: bool  # a recency word ("just", "刚", "방금", "さっき") was part of it


@dataclass(frozen=True)
class Lexicon:
    lang: str
    patterns: tuple[tuple[str, re.Pattern[str]], ...]
    type_of: Mapping[str, str]  # lower-cased word -> file | folder
    action_of: Mapping[str, str]  # lower-cased word -> action
    # spans that are no reference ("write the new file utils.py"): mentions overlapping them drop
    not_refs: tuple[re.Pattern[str], ...] = ()


def _alternation(words: Sequence[str]) -> str:
    """Longest first, so "文件夹" wins over "文件" and "just now" over "just". A space inside a
    word matches a run of blanks (possessively: a word never starts with one); blanks around a
    word are dropped, so no two blank runs meet (two adjacent ``\\s+`` are quadratic on blanks)."""
    cleaned = {" ".join(str(w).split()) for w in words} - {""}
    ordered = sorted(cleaned, key=len, reverse=True)
    return "|".join(re.escape(w).replace(r"\ ", r"\s++") for w in ordered) or "(?!)"


def _inverse(groups: Mapping[str, Sequence[str]]) -> dict[str, str]:
    return {str(w).lower(): canonical for canonical, words in groups.items() for w in words}


def _compile_language(lang: str, spec: Mapping[str, Any]) -> Lexicon:
    """One language of the references pack: YAML data, shaped as ``references.yaml`` shows."""
    types = dict(spec.get("types") or {})
    actions = dict(spec.get("actions") or {})
    fills = {
        "type": [w for ws in types.values() for w in ws],
        "action": [w for ws in actions.values() for w in ws],
    }
    for slot in _SLOTS[2:]:
        fills[slot] = list(spec.get(slot) or [])
    flags = re.I if "i" in str(spec.get("flags", "")) else 0

    builtin = builtin_strings("references")

    def compile_template(template: str) -> re.Pattern[str]:
        source = template
        for slot in _SLOTS:
            group = "rec" if slot == "rec_adj" else slot
            alternation = _alternation(fills[slot])
            source = source.replace("{" + slot + "}", f"(?P<{group}>{alternation})")
        # a user's template is timed on adversarial inputs (built-in ones are, by the tests)
        where = f"references pack, {lang}: template {template!r}"
        return compile_regex(source, flags, where, check=template not in builtin)

    patterns = [
        (str(item["kind"]), compile_template(str(item["re"])))
        for item in spec.get("patterns") or []
    ]
    not_refs = tuple(compile_template(str(t)) for t in spec.get("not_refs") or [])
    return Lexicon(lang, tuple(patterns), _inverse(types), _inverse(actions), not_refs)


@functools.lru_cache(maxsize=16)
def load_lexicons(
    extra_packs: tuple[str, ...] = (),
) -> tuple[Mapping[str, float], tuple[Lexicon, ...]]:
    data = load_pack("references", extra_packs)
    kinds = {str(k): float(v) for k, v in (data.get("kinds") or {}).items()}
    langs = tuple(
        _compile_language(lang, spec) for lang, spec in (data.get("languages") or {}).items()
    )
    for lex in langs:
        for kind, _ in lex.patterns:
            if kind not in kinds:
                raise ValueError(f"references pack, {lex.lang}: unknown kind {kind!r}")
    return kinds, langs


def strip_injected(text: str) -> str:
    """The text without blocks the proxy injected (a client that echoes them back)."""
    return _INJECTED.sub(" ", text) if INJECT_OPEN in text else text


def detect(
    text: str, kinds: Mapping[str, float], lexicons: Sequence[Lexicon], languages: Sequence[str]
) -> list[Mention]:
    """Mentions in order of position; of overlapping matches, the earlier pattern wins."""
    text = strip_injected(text)
    lexicons = [lex for lex in lexicons if lex.lang in languages]
    # Characters already claimed: testing a span against a list of every earlier one was
    # quadratic in the mentions (``it it it …``); a mask costs the span's length.
    taken = bytearray(len(text))
    for lex in lexicons:
        for p in lex.not_refs:
            for m in p.finditer(text):
                taken[m.start() : m.end()] = b"\x01" * (m.end() - m.start())
    found: list[Mention] = []
    for lex in lexicons:
        for kind, pattern in lex.patterns:
            for m in pattern.finditer(text):
                start, end = m.span()
                if start == end or taken.find(1, start, end) >= 0:
                    continue
                taken[start:end] = b"\x01" * (end - start)
                groups = m.groupdict()
                found.append(
                    Mention(
                        text=m.group(0).strip(),
                        start=start,
                        lang=lex.lang,
                        kind=kind,
                        base=kinds[kind],
                        type=lex.type_of.get((groups.get("type") or "").lower()),
                        action=lex.action_of.get((groups.get("action") or "").lower()),
                        recency=bool(groups.get("rec")),
                    )
                )
    return sorted(found, key=lambda x: x.start)
