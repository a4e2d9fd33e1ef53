"""The references pack compiled: per language, its templates (fragments and slots filled from
the word lists ``ref_grammar`` expands) as regexes, its words, its script; and the kinds with
their confidences. Loaded once per tuple of extra packs, when resolve_refs' config is validated.

Speed: every template starts with a slot or a literal, so re's first-character scan skips the
text between candidates (a leading ``\\b`` is checked by the detector instead, on each match),
and the text is matched lower-cased, without ``re.I`` (which turns that scan off).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rules import packs, regex_literals
from rules.entities import lexicon_cache, ref_gate, ref_grammar
from rules.entities.ref_prefilter import required_literals, tail_words
from rules.packs import BUILTIN_DIR, builtin_strings, compile_regex, load_pack
from rules.regex_literals import compile_once

_SLOT = re.compile(r"\{([a-z_]+)\}")
_FRAGMENT = re.compile(r"(?<!\?P)<([a-z_]+)>")  # not a named group's (?P<name>
_VERBS = "\x00"  # where a template's object verbs stand while it is compiled
# re's own parser (no public API; sre_parse warns as deprecated): a script read as re reads it
_parser: Any = importlib.import_module("re._parser")


@dataclass(frozen=True)
class Kind:
    base: float
    crowd: bool = False
    untyped: str | None = None  # the kind it becomes when its noun is "one", "thing", "やつ" …
    actor: str | None = None  # only a mention whose actor is of this class counts


@dataclass(frozen=True)
class Pattern:
    kind: str
    regex: re.Pattern[str]
    word_start: bool  # its template began with \b: the character before must not be a word's
    head: int = 0  # a relation: which of its two nouns is the one meant (1, 2); 0: no relation
    verb_head: bool = False  # a relation whose verb is the head's ("the table that script made")
    needs: str | None = None  # objects | listed | related: run only when such entities exist
    literals: tuple[str, ...] = ()  # strings every match holds: skipped when a text lacks one
    edge: str | None = None  # the relation it names: on | serves | mounts | next_to (None: in)
    # its source before and after its object verbs ({kop}): narrowed to the verbs of the kinds a
    # session holds (``ref_scan.narrowed``); None: it has no such slot
    verb_split: tuple[str, str] | None = None
    # what its match ends with before the blanks at the end of the text (a relation's words read
    # before a mention: "the commit on "): the text is tested with one ``endswith`` first
    tail: tuple[str, ...] = ()
    # the language's phrase (``ref_gate``), when the template begins with it: on a long text the
    # pattern is tried only where the phrase matches
    gate: re.Pattern[str] | None = None
    # the noun a template without a {type} slot stands for ("kill whatever is on port 8080": the
    # port's process)
    noun: str | None = None


@dataclass(frozen=True)
class FileKind:
    """What a noun for a kind of file keeps ("the script", "the Dockerfile"): files with one of
    these extensions, or whose path holds one of these words."""

    extensions: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()


@dataclass(frozen=True)
class Lexicon:
    lang: str
    patterns: tuple[Pattern, ...]
    words: Mapping[str, Mapping[str, str]]  # slot -> word -> meaning (ref_grammar.slots)
    not_refs: tuple[Pattern, ...] = ()  # spans that are no reference: mentions overlapping drop
    script: re.Pattern[str] | None = None  # the language is read only when this is found
    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # verb group -> actions
    formats: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # "csv" -> extensions
    # entities beyond files: verb group -> their actions; object verb group -> the kinds it takes
    entity_groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    object_kinds: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    object_before: re.Pattern[str] | None = None  # an object verb ending a window: "push "
    object_after: re.Pattern[str] | None = None  # an object verb opening a window: "を停止"
    needs_noun: tuple[str, ...] = ()  # kinds a mention without a noun does not mean
    op_kinds: tuple[str, ...] = ()  # kinds the ``op`` words take ("delete it": a file's)
    relation_prefix: Pattern | None = None  # "the file in " before a folder mention
    placement: re.Pattern[str] | None = None  # "put " before it: a destination, no relation
    # "the commit on ", "the test file next to " before a mention: (edge, its pattern)
    relation_prefixes: tuple[tuple[str, Pattern], ...] = ()
    # " on port 5173", " that mounts the data folder" just after a mention: (edge, its pattern)
    relation_suffixes: tuple[tuple[str, Pattern], ...] = ()
    space: str = r"\s++"  # a blank inside a word of a slot (``ref_grammar.alternation``)
    script_in_ascii: bool = True  # whether ``script`` can match in a text of ASCII only
    # what names the thing a pronoun may stand for ("the cache directory", "data.zip"): searched
    # just before "delete it"; None: never looked for
    antecedent: re.Pattern[str] | None = None
    file_kinds: Mapping[str, FileKind] = field(default_factory=dict)  # "script" -> .py, .sh …


def _kinds(data: Mapping[str, Any]) -> dict[str, Kind]:
    out = {}
    for name, value in (data.get("kinds") or {}).items():
        if isinstance(value, Mapping):
            out[str(name)] = Kind(
                float(value["base"]),
                bool(value.get("crowd")),
                value.get("untyped"),
                value.get("actor"),
            )
        else:
            out[str(name)] = Kind(float(value))
    return out


def _mixed_alternation(words: Iterable[str], space: str) -> str:
    """``ref_grammar.alternation`` for a language written without spaces: a word ending in a
    Latin letter is neither part of a longer word nor its end ("的 pr" is a pull request,
    "的prompt" none; "的tag" a tag, "的tagline" none; "的profile" no file). Digits may follow
    ("pr12")."""
    latin = {w for w in words if w[-1:].isascii() and w[-1:].isalpha()}
    if not latin:
        return ref_grammar.alternation(words, space)
    rest = set(words) - latin
    bounded = f"(?<![a-z])(?:{ref_grammar.alternation(latin, space)})(?![a-z])"
    return f"(?:{ref_grammar.alternation(rest, space)}|{bounded})" if rest else bounded


def _compile_language(
    lang: str,
    spec: Mapping[str, Any],
    kinds: Mapping[str, Kind],
    groups: Mapping[str, tuple[str, ...]],
    formats: Mapping[str, tuple[str, ...]],
    format_nouns: set[str],
    entity_groups: Mapping[str, tuple[str, ...]],
    object_kinds: Mapping[str, tuple[str, ...]],
    needs_noun: tuple[str, ...] = (),
    op_kinds: tuple[str, ...] = (),
    programs: tuple[str, ...] = (),
) -> Lexicon:
    """One language of the references pack: YAML data, shaped as ``references.yaml`` shows.
    Format names ("csv", "yaml") are file nouns in every language; the programs of
    ``actor_programs`` are actors in every language ("the bucket terraform created"), any one's."""
    words = ref_grammar.slots(spec, fold=True)
    words["program_actor"] = {}
    for name in programs:
        if words["actor"].setdefault(name, "any") == "any":
            words["program_actor"][name] = ""
    for name in format_nouns:
        words["type"].setdefault(name, "format")
        words["types"].setdefault(name, "format")
    space = r"\s*+" if spec.get("loose_spaces") else r"\s++"
    # an English word among CJK ones ends where its letters do; in a language whose nouns take
    # their case as a suffix ("klasörü", "etiketi": `suffixed`) the patterns read the ending
    if spec.get("script") and not spec.get("suffixed"):
        alternations = {slot: _mixed_alternation(ws, space) for slot, ws in words.items()}
    else:
        alternations = {slot: ref_grammar.alternation(ws, space) for slot, ws in words.items()}
    # slots holding all the words of another: a template begins with the phrase when it does
    # with these read as their wider slots (``ref_gate``); an older pack's names as the new
    wider = {a: b for a, b in (("type", "types"), ("dem", "det")) if set(words[a]) <= set(words[b])}
    wider.update({old: wider.get(new, new) for old, new in ref_grammar.ALIASES.items()})
    # what a file holds (a format, a weak noun): never the subject of a verb ("the csv files")
    contents = {*formats, *(w for w, t in words["type"].items() if t in ("weak", "format"))}
    alternations["contents"] = ref_grammar.alternation(contents, space)
    # "the cache directory" (not "a global variable": mostly a program's, no thing made)
    named = (w for w, t in words["types"].items() if t not in ("any", "variable"))
    alternations["nouns_named"] = ref_grammar.alternation(named, space)
    for slot, named_as in ref_grammar.PLURAL_SLOTS.items():  # a plural head means what it names
        for word, meaning in words.pop(slot).items():
            words[named_as].setdefault(word, meaning)
    for slot in ref_grammar.TEST_SLOTS:  # read in tests only, their words are others'
        popped = words.pop(slot, None)
        if slot == "plurals":  # kept apart, no slot: a plural head noun is said of several
            words["plural_forms"] = popped or {}
    fragments = {str(k): str(v) for k, v in (spec.get("fragments") or {}).items()}
    builtin = builtin_strings("references")

    def expand(template: str) -> str:
        for _ in range(3):  # fragments may name fragments
            template = _FRAGMENT.sub(lambda m: fragments.get(m.group(1), m.group(0)), template)
        return template

    phrase_items, phrase_gate = _phrase(lang, spec, expand(str(spec.get("phrase") or "")),
                                        alternations, wider, builtin)  # fmt: skip

    def compile_template(
        template: str,
        kind: str,
        head: int = 0,
        verb_head: bool = False,
        needs: str | None = None,
        edge: str | None = None,
        noun: str | None = None,
    ) -> Pattern:
        source = expand(template)
        word_start = source.startswith(r"\b")
        source = source[2:] if word_start else source
        leading = ref_gate.items(source)
        gated = bool(phrase_items) and leading is not None
        gated = gated and ref_gate.begins_with(ref_gate.relaxed(leading or [], wider), phrase_items)
        seen: Counter[str] = Counter()

        def fill(m: re.Match[str]) -> str:
            slot = ref_grammar.ALIASES.get(m.group(1), m.group(1))
            if slot not in alternations:
                raise ValueError(f"references pack, {lang}: unknown slot {m.group(0)}")
            if slot in ref_grammar.TEST_SLOTS:
                return f"(?:{alternations[slot]})"
            name = ref_grammar.PLURAL_SLOTS.get(slot, slot)
            seen[name] += 1
            group = name if seen[name] == 1 else f"{name}__{seen[name]}"
            if group == "kop":
                return _VERBS  # split on below, then filled
            return f"(?P<{group}>{alternations[slot]})"

        source = _SLOT.sub(fill, source)
        verb_split = None
        if _VERBS in source:
            before, after = source.split(_VERBS)
            verb_split = (before + "(?P<kop>", ")" + after)
            source = before + f"(?P<kop>{alternations['kop']})" + after
        # a user's template is timed on adversarial inputs (built-in ones are, by the tests)
        where = f"references pack, {lang}: template {template!r}"
        regex = compile_regex(source, 0, where, template not in builtin)
        literals = required_literals(regex)
        tail = tail_words(regex)
        return Pattern(kind, regex, word_start, head, verb_head, needs, literals, edge,
                       verb_split, tail, phrase_gate if gated else None, noun)  # fmt: skip

    patterns = []
    for item in spec.get("patterns") or []:
        kind = str(item["kind"])
        if kind not in kinds:
            raise ValueError(f"references pack, {lang}: unknown kind {kind!r}")
        head = int(item.get("head") or 0)
        needs = str(item["needs"]) if item.get("needs") else None
        edge = str(item["edge"]) if item.get("edge") else None
        verb_head = item.get("verb") == "head"
        noun = str(item["noun"]) if item.get("noun") else None
        if noun is not None and noun not in words["type"]:
            raise ValueError(f"references pack, {lang}: unknown noun {noun!r}")
        template = str(item["re"])
        patterns.append(compile_template(template, kind, head, verb_head, needs, edge, noun))
    not_refs = tuple(compile_template(str(t), "") for t in spec.get("not_refs") or [])
    script = spec.get("script")
    gate = compile_regex(str(script), 0, f"references pack, {lang}: script") if script else None
    kop = ref_grammar.alternation([*words["kop"], *words["fop"]], space)
    # bounded windows around a mention (see ref_detect): its verb before it, or after it (CJK)
    # compiled as the templates are: a kept copy holds their code (``lexicon_cache``)
    before = compile_once(r"(?:^|\W)(?P<kop>" + kop + r")\s*+(?:to\s++)?$")
    after = compile_once(r"^\s*+(?:을|를|은|는|を|は|も|给|給)?\s*+(?P<kop>" + kop + ")")
    prefix = spec.get("relation_prefix")
    relation = compile_template(str(prefix), "relation", 1) if prefix else None
    prefixes = tuple(
        (str(edge), compile_template(str(t), "relation", 1, edge=str(edge)))
        for edge, t in (spec.get("relation_prefixes") or {}).items()
    )
    suffixes = tuple(
        (str(edge), compile_template(str(t), "relation", edge=str(edge)))
        for edge, t in (spec.get("relation_suffixes") or {}).items()
    )
    found = spec.get("antecedent")
    antecedent = compile_template(str(found), "").regex if found else None
    placing = ref_grammar.alternation(ref_grammar.expand_all(spec.get("placement_verbs") or ()))
    # a quantifier may stand between the verb and the article: "put all (of) the files in …"
    quantities = ref_grammar.expand_all(spec.get("placement_quantifiers") or ())
    quantity = r"(?:(?:" + ref_grammar.alternation(quantities, space) + r")\s++)?"
    placement = (
        compile_once(r"(?:^|\W)(?:" + placing + r")\s++" + (quantity if quantities else "") + "$")
        if relation
        else None
    )
    return Lexicon(lang, tuple(patterns), words, not_refs, gate, groups, formats,
                   entity_groups, object_kinds, before, after, needs_noun, op_kinds,
                   relation, placement, prefixes, suffixes, space,
                   gate is None or _matches_ascii(gate), antecedent)  # fmt: skip


def _phrase(
    lang: str,
    spec: Mapping[str, Any],
    source: str,
    alternations: Mapping[str, str],
    wider: Mapping[str, str],
    builtin: frozenset[str],
) -> tuple[list[str], re.Pattern[str] | None]:
    """The language's phrase (``ref_gate``) as items and compiled, its slots filled without
    groups; ([], None) without one, or when it is not as wide as patterns are read (a lookaround,
    a slot with a wider one: the gate compiled from it would reject where a pattern matches)."""
    found = ref_gate.items(source) if source else None
    if not found or ref_gate.relaxed(found, wider) != found:
        return [], None
    where = f"references pack, {lang}: phrase"

    def fill(m: re.Match[str]) -> str:
        slot = ref_grammar.ALIASES.get(m.group(1), m.group(1))
        if slot not in alternations:
            raise ValueError(f"{where}: unknown slot {m.group(0)}")
        return f"(?:{alternations[slot]})"

    filled = _SLOT.sub(fill, source)
    regex = compile_regex(filled, 0, where, str(spec.get("phrase")) not in builtin)
    return found, regex


def _matches_ascii(script: re.Pattern[str]) -> bool:
    """Whether ``script`` may match in a text of ASCII characters only: False only for a single
    character class that no ASCII character is in (``[\u3040-\u30ff]``), tested per character.
    An English question is then not searched for Chinese, Korean or Japanese at all."""
    parsed = _parser.parse(script.pattern, script.flags)
    if len(parsed) != 1 or str(parsed[0][0]) not in ("IN", "LITERAL", "RANGE"):
        return True
    return any(script.fullmatch(chr(c)) for c in range(128))


def _groups(data: Any) -> dict[str, tuple[str, ...]]:
    return {str(g): tuple(map(str, a or ())) for g, a in (data or {}).items()}


# what a kept copy of the lexicons is compiled by (``lexicon_cache``): these modules' sources
_COMPILERS = (Path(__file__).parent, Path(packs.__file__), Path(regex_literals.__file__))


def _compiler_sources() -> list[Path]:
    folder, *files = _COMPILERS
    return sorted(folder.glob("*.py")) + files


@functools.lru_cache(maxsize=16)
def load_lexicons(
    extra_packs: tuple[str, ...] = (),
) -> tuple[Mapping[str, Kind], tuple[Lexicon, ...]]:
    """(kinds, one lexicon per language); a copy kept from an earlier run when the packs and
    this code are the same (``lexicon_cache``)."""
    files = [BUILTIN_DIR / "references.yaml", *map(Path, extra_packs)]
    key = lexicon_cache.key_of(_compiler_sources(), files) if lexicon_cache.in_use() else None
    classes = {c.__name__: c for c in (Kind, Pattern, FileKind, Lexicon)}
    return lexicon_cache.cached(key, lambda: _compile(extra_packs), classes)


def _compile(extra_packs: tuple[str, ...]) -> tuple[Mapping[str, Kind], tuple[Lexicon, ...]]:
    data = load_pack("references", extra_packs)
    kinds = _kinds(data)
    for name, kind in kinds.items():
        if kind.untyped is not None and kind.untyped not in kinds:
            raise ValueError(f"references pack: kind {name!r}: unknown untyped {kind.untyped!r}")
    groups = _groups(data.get("action_groups"))
    nouns = {str(name).lower() for name in data.get("formats") or {}}
    formats = {
        str(name).lower(): tuple(str(e).lower() for e in exts)
        for key in ("format_modifiers", "formats")
        for name, exts in (data.get(key) or {}).items()
    }
    entity_groups = _groups(data.get("entity_action_groups"))
    object_kinds = _groups(data.get("object_kinds"))
    file_kinds = {
        str(name): FileKind(
            tuple(str(e).lower() for e in spec.get("extensions") or ()),
            tuple(str(w).lower() for w in spec.get("paths") or ()),
        )
        for name, spec in (data.get("file_kinds") or {}).items()
    }
    langs = tuple(
        _compile_language(
            str(lang),
            spec,
            kinds,
            groups,
            formats,
            nouns,
            entity_groups,
            object_kinds,
            tuple(map(str, data.get("needs_noun") or ())),
            tuple(map(str, data.get("op_kinds") or ())),
            tuple(str(p).lower() for p in data.get("actor_programs") or ()),
        )
        for lang, spec in (data.get("languages") or {}).items()
    )
    return kinds, tuple(dataclasses.replace(lex, file_kinds=file_kinds) for lex in langs)
