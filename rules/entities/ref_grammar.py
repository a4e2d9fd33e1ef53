"""The word lists of the references pack, expanded from its per-language grammar: verbs listed
by lemma and conjugated into the forms a reference uses (past, participle, passive, resultative,
polite and honorific), actors, types, recency words. Pure data in, ``{slot: {word: value}}`` out;
``ref_detect`` compiles the result into patterns.

A verb entry is the lemma's principal parts separated by ``/``. Its class says how the parts
become forms: ``principal`` (English: ``base[/past[/participle]]``, a regular past made by the
language's ``past_rules``), ``word`` (the entry as written: Chinese, which does not inflect), or a
class of the language's ``conjugation`` table, whose templates name the parts as ``{0}``, ``{1}``
… (a template naming a part the entry lacks is skipped); ``conjugation_bases`` gives a class's
base forms the same way (the ``verb_base`` slot). A word may hold ``{a,b}`` alternatives,
expanded like a shell's braces: ``{the ,}{lead,main} agent``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# slot -> the canonical meaning of each of its words (type, verb group, actor class), or "" when
# the slot's words carry none (recency, determiners, pronouns, operations)
Slots = dict[str, dict[str, str]]
PLAIN_SLOTS = ("rec", "rec_adj", "det", "dem", "pron", "op")
# a slot whose words are another's with their plurals (a head noun that may be plural: "the
# tables the migration made"); its match is named as that slot's, and means what it means
PLURAL_SLOTS = {"types": "type"}
# slots read as tests, without a group: the plural forms alone (those no singular is spelled
# as), and the nouns for what a file holds (formats, weak nouns: ``ref_lexicon``). An English
# plural head takes no modifier but one of those or a number: a subject and its verb ("the bot
# commits on") are no modifier and noun, "the csv files", "the two tables" are; and every noun
# naming an entity of some kind ("one", "thing" aside: ``antecedent``)
TEST_SLOTS = ("plurals", "contents", "nouns_named")
ALIASES = {"action": "verb", "subj": "actor", "art": "det"}  # slot names of older packs
_BRACES = re.compile(r"\{([^{}]*,[^{}]*)\}")  # an alternative group: it holds a comma
_PART = re.compile(r"\{(\d+)\}")


def expand(word: str) -> list[str]:
    """``word`` with its ``{a,b}`` groups expanded (left to right), blanks collapsed."""
    m = _BRACES.search(word)
    if m is None:
        return [" ".join(word.split())]
    out: list[str] = []
    for choice in m.group(1).split(","):
        out += expand(word[: m.start()] + choice + word[m.end() :])
    return out


def _words(items: Iterable[Any]) -> list[str]:
    return [w for item in items for w in expand(str(item)) if w]


def expand_all(items: Iterable[Any]) -> list[str]:
    """Every word of a list, its ``{a,b}`` groups expanded, lower-cased."""
    return [w.lower() for w in _words(items)]


def english_past(base: str, rules: Sequence[Sequence[str]]) -> str:
    """The regular past of ``base``: the first rule whose pattern matches its first word
    rewrites it (``create`` -> ``created``, ``copy`` -> ``copied``); the rest stays
    (``back up`` -> ``backed up``)."""
    head, sep, rest = base.partition(" ")
    for pattern, replacement in rules:
        if re.search(str(pattern), head):
            return re.sub(str(pattern), str(replacement), head, count=1) + sep + rest
    return base


def plural(word: str, rules: Sequence[Sequence[str]]) -> str:
    """The plural of ``word`` by its last word: the first rule whose pattern matches it rewrites
    it (``table`` -> ``tables``, ``branch`` -> ``branches``, ``pull request`` ->
    ``pull requests``); a rule may leave it as it is (a word that is plural already)."""
    head, sep, last = word.rpartition(" ")
    for pattern, replacement in rules:
        if re.search(str(pattern), last):
            return head + sep + re.sub(str(pattern), str(replacement), last, count=1)
    return word


def conjugate(
    entry: str,
    cls: str,
    table: Mapping[str, Sequence[str]],
    past_rules: Sequence[Sequence[str]],
) -> list[str]:
    """The forms of one verb entry (see the module's docstring)."""
    parts = [p.strip() for p in entry.split("/")]
    if cls == "word":
        return [entry.strip()]
    if cls == "principal":
        base = parts[0]
        past = parts[1] if len(parts) > 1 else english_past(base, past_rules)
        participle = parts[2] if len(parts) > 2 else past
        return list(dict.fromkeys([past, participle]))
    if cls not in table:
        raise ValueError(f"unknown verb class {cls!r}")
    forms = []
    for template in table[cls]:
        wanted = [int(i) for i in _PART.findall(str(template))]
        if all(i < len(parts) and parts[i] for i in wanted):
            forms.append(_PART.sub(lambda m: parts[int(m.group(1))], str(template)))
    return forms


def _verbs(spec: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """(form -> verb group, base form -> verb group) for every verb of a language (older
    packs' ``actions`` as words). Base forms ("create", "write") are the first principal part:
    "the file I asked you to write"."""
    table = dict(spec.get("conjugation") or {})
    # a class's base forms (``conjugation_bases``: the infinitive of a Spanish verb, "acabo de
    # crear"), as a principal verb's first part is
    base_table = dict(spec.get("conjugation_bases") or {})
    rules = list(spec.get("past_rules") or ())
    default = str(spec.get("verb_class", "word"))
    out: dict[str, str] = {}
    bases: dict[str, str] = {}
    sources = [(spec.get("verbs") or {}, default), (spec.get("actions") or {}, "word")]
    for verbs, fallback in sources:
        for group, entries in verbs.items():
            by_class = entries if isinstance(entries, Mapping) else {fallback: entries}
            for cls, items in by_class.items():
                for entry in _words(items or ()):
                    for form in conjugate(entry, str(cls), table, rules):
                        out.setdefault(form, str(group))
                    if cls == "principal":
                        bases.setdefault(entry.split("/")[0].strip(), str(group))
                    elif cls in base_table:
                        for form in conjugate(entry, str(cls), base_table, rules):
                            bases.setdefault(form, str(group))
    return out, bases


def _inverse(groups: Mapping[str, Iterable[Any]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for canonical, words in groups.items():
        for w in _words(words or ()):
            out.setdefault(w, str(canonical))
    return out


def slots(spec: Mapping[str, Any], fold: bool) -> Slots:
    """Every slot's words for one language of the pack, lower-cased when the language folds.
    Weak nouns (``types: weak``: what a file holds, "summary", "ダンプ") are listed as words, or
    as ``{english word: [words]}`` so a name can be matched ("ダンプ" finds shop_dump.sql); nouns
    for a kind of file (``file_kinds``: ``{kind: [words]}``) are file nouns naming their kind."""
    verbs, bases = _verbs(spec)
    types = dict(spec.get("types") or {})
    weak = types.pop("weak", None) or {}
    out: Slots = {
        "type": _inverse(types),
        "verb": verbs,
        "verb_base": bases,
        "actor": _inverse(spec.get("actors") or {}),
        "weak": {},  # a weak noun -> the word names may hold ("ダンプ" -> "dump")
        # a position in a list ("second", "第二", "두 번째", "2番目") -> its number
        "ord": _inverse({str(n): w for n, w in (spec.get("ordinals") or {}).items()}),
        # a place said after the mention ("before the last one") -> its number
        "ord_after": _inverse({str(n): w for n, w in (spec.get("ordinals_after") or {}).items()}),
        # a verb that takes entities of some kinds ("push", "stop") -> its object_kinds group
        "kop": _inverse(spec.get("object_verbs") or {}),
        # a file's verbs, looked for around a mention ("cat that thing")
        "fop": dict.fromkeys(_words(spec.get("file_verbs") or ()), "file"),
        # those of them that only read a file ("open the image": a picture, not a container's)
        "fread": dict.fromkeys(_words(spec.get("file_read_verbs") or ()), "file"),
        # recency words that, of the kinds one is on at a time, name the one before the current
        # ("the previous branch"): not the newest made
        "prior": dict.fromkeys(_words(spec.get("prior") or ()), "prior"),
        # the process nouns that name what serves ("the server", "the port"): not a watcher
        "serving": dict.fromkeys(_words(spec.get("serving") or ()), "serving"),
    }
    pairs = weak.items() if isinstance(weak, Mapping) else ((w, [w]) for w in _words(weak))
    for hint, words in pairs:
        for word in _words(words or ()):
            out["type"].setdefault(word, "weak")
            out["weak"].setdefault(word, str(hint))
    # nouns for a kind of file ("script", "脚本"): file nouns, each naming its kind
    out["file_kind"] = {}
    for name, words in (spec.get("file_kinds") or {}).items():
        for word in _words(words or ()):
            out["type"].setdefault(word, "file")
            out["file_kind"].setdefault(word, str(name))
    # a language that marks the plural on its nouns (``plural_rules``): a plural head noun
    rules = list(spec.get("plural_rules") or ())
    out["types"] = dict(out["type"])
    out["plurals"] = {}
    for word, typ in out["type"].items():
        form = plural(word, rules) if rules else word
        out["types"].setdefault(form, typ)
        if form not in out["type"]:
            out["plurals"].setdefault(form, typ)
    for word in _words(spec.get("subj") or ()):  # an older pack's subjects: any actor
        out["actor"].setdefault(word, "any")
    for slot in PLAIN_SLOTS:
        out[slot] = dict.fromkeys(_words(spec.get(slot) or ()), "")
    # what follows an ordinal standing before the phrase it places ("2番目に作った": に)
    out["ord_particles"] = dict.fromkeys(_words(spec.get("ordinal_particles") or ()), "")
    for word in _words(spec.get("art") or ()):
        out["det"].setdefault(word, "")
    if fold:
        out = {s: {w.lower(): v for w, v in ws.items()} for s, ws in out.items()}
    return out


def alternation(words: Iterable[str], space: str = r"\s++") -> str:
    """A regex matching any of ``words``, longest first, factored as a trie so a long list costs
    one branch per character, not one per word (and re's first-character scan still applies).
    A blank inside a word matches ``space`` (a run of blanks: possessive, so linear)."""
    trie: dict[str, Any] = {}
    for word in {" ".join(w.split()) for w in words} - {""}:
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}
    return _emit(trie, space) if trie else "(?!)"


def _emit(node: Mapping[str, Any], space: str) -> str:
    branches = [
        (space if ch == " " else re.escape(ch)) + _emit(child, space)
        for ch, child in sorted(node.items())
        if ch
    ]
    if not branches:
        return ""
    body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
    if "" in node:  # a word ends here: longer ones first, then this one
        return ("(?:" + body + ")?") if len(branches) > 1 or len(body) > 1 else body + "?"
    return body
