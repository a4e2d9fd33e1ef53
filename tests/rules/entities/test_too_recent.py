"""``too_recent``: time words a day or more back, said beside a mention, against the age of the
entity it resolved to (the scenarios in ``scenarios/probes_o.yaml`` run the whole rule)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import pytest

from rules.entities.too_recent import said_age, too_recent
from rules.report import Reference

DAY, HOURS = 24 * 3600, 3 * 3600


def _ref(age_s: int) -> Reference:
    return cast(
        Reference,
        {
            "mention": "the branch you created",
            "lang": "en",
            "kind": "described",
            "entity": {"type": "branch", "name": "feat/x", "path": "branch:feat/x"},
            "age_s": age_s,
            "pointer": {"description": "branch feat/x"},
        },
    )


def _around(text: str, mention: str) -> tuple[int, int]:
    start = text.index(mention)
    return start, start + len(mention)


@dataclass
class _Mention:
    start: int
    end: int
    lang: str = "en"
    recency: bool = False


@pytest.mark.parametrize(
    ("text", "mention", "least"),
    [
        ("Delete the branch you created last week.", "the branch you created", DAY),
        ("Delete the branch you created yesterday.", "the branch you created", HOURS),
        ("Delete the branch you created 3 days ago.", "the branch you created", DAY),
        ("删除我上周创建的分支", "创建的分支", DAY),
        ("私が昨日作ったブランチを消して", "作ったブランチ", HOURS),
        ("지난주에 만든 브랜치 지워", "만든 브랜치", DAY),
        ("Borra la rama que creaste la semana pasada.", "la rama que creaste", DAY),
        ("Удали ветку, которую ты создал вчера.", "ветку, которую ты создал", HOURS),
        ("Delete the branch you created, it broke yesterday.", "the branch you created", 0),
        ("Yesterday was fine. Delete the branch you created.", "the branch you created", 0),
        ("Delete the last branch you created.", "the last branch you created", 0),
    ],
)
def test_the_least_age_the_words_give(text: str, mention: str, least: int) -> None:
    assert said_age(text, *_around(text, mention)) == least


def test_a_thing_seen_that_long_ago_stands() -> None:
    """A session resumed across days (with ``ttl_seconds`` raised): seen long enough ago."""
    text = "Delete the branch you created last week."
    ref = _ref(age_s=8 * DAY)
    assert too_recent(ref, text, _Mention(*_around(text, "the branch you created"))) is ref


def test_a_thing_made_since_is_an_abstention_with_its_candidate() -> None:
    text = "Delete the branch you created last week."
    out = too_recent(_ref(age_s=60), text, _Mention(*_around(text, "the branch you created")))
    assert out["entity"] is None
    assert out["abstained"] == "too_recent"
    assert out["candidates"] == ["branch:feat/x"]
    assert "pointer" not in out and "age_s" not in out


def test_a_long_run_of_words_is_read_in_linear_time() -> None:
    import time

    text = "the branch you created " + "last " * 20_000 + "week"
    started = time.process_time()
    said_age(text, 0, len("the branch you created"))
    assert time.process_time() - started < 0.05


def test_the_users_own_ruling_is_no_question_for_the_resolver_model() -> None:
    """The abstention's one candidate is the thing the user's words ruled out: sent to the
    resolver model (which sees no ages), its pick of that one candidate undid it."""
    from proxy.rewrite.resolver import open_questions
    from rules.entities.ref_resolve import settle

    text = "Delete the branch you created last week."
    out = too_recent(_ref(age_s=60), text, _Mention(*_around(text, "the branch you created")))
    assert open_questions([out]) == []
    pick = {"path": "branch:feat/x", "confidence": 0.9, "model": "m"}
    event = {"type": "branch", "name": "feat/x", "path": "branch:feat/x", "action": "create",
             "first_seen": 1.0, "seq": 1, "call_id": "c1"}  # fmt: skip
    cfg = type("Cfg", (), {"threshold": 0.6})()
    assert settle(out, pick, [("s", 0, [event])], cfg) is out  # type: ignore[arg-type]
