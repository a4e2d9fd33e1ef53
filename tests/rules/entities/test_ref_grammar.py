"""The references pack's grammar: verbs by lemma into their forms, brace expansion, tries."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from rules.entities import resolve_refs
from rules.entities.ref_detect import detect, load_lexicons
from rules.entities.ref_grammar import (
    alternation,
    conjugate,
    english_past,
    expand,
    plural,
    slots,
)
from rules.packs import load_pack

RULES = [["e$", "ed"], ["([^aeiou])y$", r"\1ied"], ["$", "ed"]]


@pytest.mark.parametrize(
    ("base", "past"),
    [("create", "created"), ("copy", "copied"), ("play", "played"), ("add", "added"),
     ("back up", "backed up"), ("clean up", "cleaned up")],
)  # fmt: skip
def test_the_regular_english_past(base: str, past: str) -> None:
    assert english_past(base, RULES) == past


def _english_plural_rules() -> list[list[str]]:
    rules: list[list[str]] = load_pack("references")["languages"]["en"]["plural_rules"]
    return rules


@pytest.mark.parametrize(
    ("noun", "plural_form"),
    [("table", "tables"), ("branch", "branches"), ("process", "processes"),
     ("directory", "directories"), ("pull request", "pull requests"), ("key", "keys"),
     ("box", "boxes"), ("notes", "notes"), ("results", "results")],
)  # fmt: skip
def test_the_regular_english_plural(noun: str, plural_form: str) -> None:
    assert plural(noun, _english_plural_rules()) == plural_form


def test_a_plural_head_slot_holds_the_types_and_their_plurals_where_marked() -> None:
    en = slots({"types": {"table": ["table"]}, "plural_rules": _english_plural_rules()}, True)
    assert en["types"] == {"table": "table", "tables": "table"}
    unmarked = slots({"types": {"table": ["表"]}}, True)  # no plural on the noun
    assert unmarked["types"] == unmarked["type"] == {"表": "table"}
    # the plural forms alone, for the test "no modifier before a plural head"; a word spelled
    # the same in both numbers ("settings") is no plural-only form
    en = slots(
        {"types": {"table": ["table"], "config": ["settings"]},
         "plural_rules": _english_plural_rules()},
        True,
    )  # fmt: skip
    assert en["plurals"] == {"tables": "table"} and unmarked["plurals"] == {}
    kinds, lexicons = load_lexicons()
    english = next(x for x in lexicons if x.lang == "en")
    assert "types" not in english.words and english.words["type"]["tables"] == "table"
    # only the relation templates read a plural head: elsewhere "those tables" stays unread
    assert not detect("drop those tables", kinds, lexicons, ("en",))


def test_a_plural_relation_head_takes_no_modifier() -> None:
    """A subject and its verb spelled as a plural noun ("the bot commits on") are no relation's
    head with a modifier; a plural head alone, a singular one with its modifier and a plural
    after a format, a weak noun or a number are."""
    english = next(x for x in load_lexicons()[1] if x.lang == "en")
    on = dict(english.relation_prefixes)["on"].regex
    assert on.search("make sure the bot commits on ") is None
    assert on.search("check that the cron archives on ") is None
    assert on.search("cherry-pick the commits on ").group("type") == "commits"
    hit = on.search("cherry-pick the bot commit on ")
    assert (hit.group("mod"), hit.group("type")) == ("bot", "commit")
    assert english.relation_prefix is not None
    inside = english.relation_prefix.regex
    assert inside.search("check that the cron archives in ") is None
    assert inside.search("zip the files in ").group("type") == "files"
    # ... but what a file holds or a number, never a verb's subject, is a plural's modifier
    for words, mod in [
        ("the csv files", "csv"),
        ("the config files", "config"),
        ("the log files", "log"),
        ("the two files", "two"),
        ("the 3 files", "3"),
    ]:
        hit = inside.search(f"zip {words} in ")
        assert hit is not None and (hit.group("mod"), hit.group("type")) == (mod, "files")


@pytest.mark.parametrize(
    ("before", "placed"),
    [("can you put ", True), ("can you put all ", True), ("copy both of ", True),
     ("save all of ", True), ("keep just ", True), ("move a few of ", True),
     ("delete all ", False), ("zip ", False), ("put all the ", False)],
)  # fmt: skip
def test_a_placement_verb_may_take_a_quantifier_before_the_article(
    before: str, placed: bool
) -> None:
    english = next(x for x in load_lexicons()[1] if x.lang == "en")
    assert english.placement is not None
    assert bool(english.placement.search(before)) is placed


def test_principal_parts_give_past_and_participle() -> None:
    assert conjugate("write/wrote/written", "principal", {}, RULES) == ["wrote", "written"]
    assert conjugate("make/made", "principal", {}, RULES) == ["made"]
    assert conjugate("generate", "principal", {}, RULES) == ["generated"]


def test_a_class_table_conjugates_from_parts() -> None:
    table = {"native": ["{0}", "{2}던", "{1}진", "{1} 둔", "{3}"]}
    assert conjugate("만든/만들어/만들었/만드신", "native", table, []) == [
        "만든", "만들었던", "만들어진", "만들어 둔", "만드신",
    ]  # fmt: skip
    assert conjugate("쓴/써", "native", table, []) == ["쓴", "써진", "써 둔"]  # parts missing


def test_brace_expansion() -> None:
    assert expand("{the ,}{lead,main} agent") == [
        "the lead agent", "the main agent", "lead agent", "main agent",
    ]  # fmt: skip
    assert expand("plain  word") == ["plain word"]


def test_every_verb_of_the_pack_has_forms_in_every_language() -> None:
    data = load_pack("references")
    for lang, spec in data["languages"].items():
        words = slots(spec, fold=True)
        groups = set(words["verb"].values())
        assert {"create", "write", "delete", "modify"} <= groups, lang
        assert all(g in data["action_groups"] for g in groups), lang


def test_a_trie_alternation_matches_exactly_the_words_longest_first() -> None:
    words = ["file", "files", "folder", "set up", "set"]
    pattern = re.compile(f"(?:{alternation(words)})")
    for w in words:
        assert pattern.fullmatch(w.replace(" ", "   "))
    assert pattern.match("set up").group(0) == "set up"
    assert pattern.match("files").group(0) == "files"
    assert not pattern.fullmatch("fil")


def test_a_users_pack_adds_verbs_by_lemma(tmp_path: Path) -> None:
    pack = tmp_path / "refs.yaml"
    pack.write_text(
        "references:\n  languages:\n    en:\n      verbs:\n        create: [forge/forged]\n",
        encoding="utf-8",
    )
    cfg = resolve_refs.Config(extra_packs=(str(pack),))
    kinds, lexicons = load_lexicons(cfg.extra_packs)
    (m,) = [x for x in detect("the folder you forged", kinds, lexicons, ("en",))]
    assert (m.type, m.action, m.actions) == ("folder", "create", ("create", "copy"))


def test_an_unknown_slot_fails_at_start_up(tmp_path: Path) -> None:
    pack = tmp_path / "refs.yaml"
    pack.write_text(
        "references:\n  languages:\n    en:\n      patterns:\n"
        "        - {kind: described, re: '{nope}\\s++{type}'}\n",
        encoding="utf-8",
    )
    with pytest.raises(ValidationError, match="unknown slot"):
        resolve_refs.Config(extra_packs=(str(pack),))
