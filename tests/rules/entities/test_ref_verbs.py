"""The object verbs narrowed to the kinds held (ref_scan.narrowed): a scan that looks only for
the verbs of the kinds in reach keeps exactly the mentions a full scan keeps once those whose
verb takes no held kind are dropped (resolve_refs does so for both), for every question of the
scenario sets and every set of kinds; and through the rule, a question whose verb takes no
held kind is not reported while one that does is."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from rules.base import Context, SessionState
from rules.entities import cache as entity_cache
from rules.entities import ref_detect, resolve_refs
from rules.entities.ref_lexicon import load_lexicons
from rules.entities.ref_scan import narrowed, verb_groups, wanted
from tests.support.factories import FakeTokens, user
from tests.support.scenarios import load

HERE = Path(__file__).resolve().parent / "scenarios"
# the sets' questions, and an object verb of each group with a noun and with "it"
VERBS = ("drop", "close", "revert", "push", "stop", "merge", "activate", "pop", "refund")
QUESTIONS = sorted(
    {sc.ask for path in sorted(HERE.glob("*.yaml")) for sc in load(path) if sc.ask}
    | {f"now {verb} the users table" for verb in VERBS}
    | {f"ok, {verb} it please" for verb in VERBS}
)
LANGS = ("en", "zh", "ko", "ja")
SORTS = frozenset({"objects", "listed", "related"})


def _kept(text: str, held: frozenset[str], verbs: frozenset[str] | None) -> list[object]:
    kinds, lexicons = load_lexicons(())
    layers = [
        ref_detect.scan(text, kinds, lexicons, LANGS, 0.6, wanted(frozenset())),
        ref_detect.scan(text, kinds, lexicons, LANGS, 0.6, wanted(SORTS, True, verbs)),
    ]
    found = ref_detect.finish(text, kinds, lexicons, ref_detect.merge(*layers))
    reach = set(held)
    return [m for m in found if resolve_refs._in_reach(m.kinds, reach)]


def _kind_sets() -> list[frozenset[str]]:
    """No kind, each kind the object verbs take alone, and pairs of them."""
    _, lexicons = load_lexicons(())
    every = sorted({k for ks in lexicons[0].object_kinds.values() for k in ks})
    return [frozenset(), *(frozenset(p) for p in itertools.combinations(every, 1))] + [
        frozenset(p) for p in itertools.combinations(every[:8], 2)
    ]


@pytest.mark.parametrize("held", _kind_sets(), ids=lambda s: "+".join(sorted(s)) or "none")
def test_narrowed_verbs_keep_the_mentions_a_full_scan_keeps(held: frozenset[str]) -> None:
    assert len(QUESTIONS) > 300
    _, lexicons = load_lexicons(())
    verbs = verb_groups(lexicons[0].object_kinds, held)
    for text in QUESTIONS:
        assert _kept(text, held, verbs) == _kept(text, held, None), text


def test_a_narrowed_pattern_holds_only_the_verbs_of_its_groups() -> None:
    _, lexicons = load_lexicons(())
    en = lexicons[0]
    (p,) = [p for p in en.patterns if p.verb_split is not None and p.kind == "object"]
    push = narrowed(en, p, frozenset({"push"}))
    assert push is not None and push.kind == p.kind
    assert push.regex.search("please push the feature branch") is not None
    assert push.regex.search("please stop the dev server") is None
    assert p.regex.search("please stop the dev server") is not None
    assert narrowed(en, p, frozenset()) is None  # no verb left: the pattern is not run
    assert narrowed(en, en.patterns[-1], frozenset()) is en.patterns[-1]  # no verb slot


def test_only_files_in_reach_keep_the_verbs_that_take_files() -> None:
    _, lexicons = load_lexicons(())
    groups = verb_groups(lexicons[0].object_kinds, ())
    assert {"drop", "close", "revert"} <= groups  # "drop it": a file may be meant
    assert "stop" not in groups and "push" not in groups
    assert "stop" in verb_groups(lexicons[0].object_kinds, ("process",))


def _ask(text: str, held_kinds: list[str]) -> list[str]:
    """The mentions resolve_refs reports for ``text`` in a session holding these kinds."""
    events = [
        {"type": k, "id": f"{k}-1", "path": f"{k}:{k}-1", "name": f"{k}-1", "action": "create",
         "call_id": "c1", "first_seen": 0.0, "seq": i}
        for i, k in enumerate(held_kinds)
    ]  # fmt: skip
    state = SessionState().with_value(entity_cache.NAMESPACE, events)
    state = state.with_value(entity_cache.SUMMARY, entity_cache.summary(events))
    messages = [user(text)]
    ctx = Context(
        messages=messages,
        original_messages=messages,
        model="gpt-4o",
        tokens=FakeTokens(),
        now=10.0,
        session_id="s",
        state=state,
        memo={},
    )
    res = resolve_refs.apply(ctx, resolve_refs.Config())
    return [r["mention"] for r in res.report.get("references", [])]


def test_a_verb_of_no_held_kind_is_not_reported() -> None:
    assert _ask("please stop it now", ["branch"]) == []
    assert _ask("please stop it now", ["process"]) == ["stop it"]
    assert _ask("push it to origin", ["branch"]) == ["push it"]
