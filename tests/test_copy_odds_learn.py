"""bench/copy_odds_learn.py: the split by conversation id, the fitted table's keys and backoff,
and the held-out scores (a table that knows the features beats the base rate)."""

from __future__ import annotations

from collections import Counter

from bench import copy_odds_learn as learn
from rules.activity.observations import observations
from rules.context import copy_odds, need
from tests.support.factories import assistant, result, shell, user


def _key(kind: str, fresh: str, size: str = "m", age: str = "<=5", used: str = "-") -> str:
    values = {"kind": kind, "fresh": fresh, "size": size, "age": age, "used": used}
    return copy_odds.key(values | {"does": "-", "new": "5+"})


def _cells() -> Counter[learn.Sample]:
    cells: Counter[learn.Sample] = Counter()
    unchanged, changed = _key("read", "unchanged"), _key("read", "changed")
    cells[(unchanged, 0.05, 2_000, True)] = 150
    cells[(unchanged, 0.05, 2_000, False)] = 150
    cells[(changed, 0.05, 2_000, True)] = 10
    cells[(changed, 0.05, 2_000, False)] = 290
    cells[(_key("run", "-", "s", ">20"), 0.01, 100, False)] = 50  # too few for its own keys
    return cells


def test_the_split_is_by_a_hash_of_the_id_and_about_half() -> None:
    ids = [f"conv/{i}" for i in range(400)]
    halves = [learn.fitting(i) for i in ids]
    assert halves == [learn.fitting(i) for i in ids]  # deterministic
    assert 150 < sum(halves) < 250


def test_the_fit_keeps_keys_with_enough_samples_and_backs_off() -> None:
    pack = learn.fit(_cells())
    odds = pack["odds"]
    assert odds[_key("read", "unchanged")] == round(151 / 302, 4)  # add-one smoothed
    assert odds[_key("read", "changed")] == round(11 / 302, 4)
    assert _key("run", "-", "s", ">20") not in odds  # 50 samples: below MIN_SAMPLES
    # nor has its age bucket (50 samples): the base rate
    assert learn._predict(pack, _key("run", "-", "s", ">20")) == pack["base"]
    assert learn._predict(pack, _key("read", "unchanged")) > learn._predict(
        pack, _key("read", "changed")
    )


def test_the_table_scores_better_than_the_base_rate() -> None:
    cells = _cells()
    scores = learn.evaluate(learn.fit(cells), cells)
    assert scores["brier table"] < scores["brier base"]
    assert scores["logloss table"] < scores["logloss base"]
    assert scores["samples"] == sum(cells.values())


def test_the_plain_table_has_no_key_with_the_run_class_or_new_names() -> None:
    plain = learn.fit(_cells(), copy_odds.BASE_LEVELS)
    assert plain["odds"] and not any("new=" in k or "does=" in k for k in plain["odds"])
    scores = learn.evaluate(learn.fit(_cells()), _cells(), plain)
    assert {"brier plain", "logloss plain", "top tenth per char plain"} <= set(scores)


def test_the_top_tenth_is_a_share_of_the_copied_samples() -> None:
    assert learn._top_tenth([(1.0, 10, True), (0.5, 90, False)], 100) == 1.0
    assert learn._top_tenth([(1.0, 10, False), (0.5, 40, True), (0.1, 50, True)], 100) == 0.0
    # the tenth ends inside the second cell: 5 + 5 of the 15 copied samples
    assert learn._top_tenth([(0.9, 10, True), (1.0, 5, True), (0.1, 85, False)], 100) == 2 / 3


def test_later_names_are_counted_as_a_cap_forwards_the_later_result() -> None:
    """A search, then a test log over prune's ``max_result_tokens`` that names every handler
    only in its middle: prune forwards the log's head and tail, so the search's names are not
    shown later (``capped``); counting the log whole would say they are."""
    hits = "\n".join(f"src/mod_{i}.py:{i}: def handler_{i}(request):" for i in range(30))
    log = "\n".join(
        [f"tests/test_a.py::test_setup_{i} PASSED" for i in range(1500)]
        + [f"src/mod_{i}.py:{i}: in handler_{i}: warning deprecated" for i in range(30)]
        + [f"tests/test_b.py::test_teardown_{i} PASSED" for i in range(1500)]
    )
    msgs = [
        user("Find the handlers"),
        assistant(None, shell("g", "grep -rn 'def handler_' src")),
        result("g", hits),
        assistant(None, shell("p", "python -m pytest -v")),
        result("p", log),
        assistant(None, shell("s", "git status --short")),
        result("s", "M a.txt"),
    ]
    conv = {"id": "conv/capped", "messages": msgs}
    g = 2
    forwarded = learn.capped(msgs, learn.model_of(conv))
    assert list(forwarded) == [4]  # the log alone is over the cap
    assert "handler_7" not in forwarded[4]
    _, cells = learn.samples(conv, 0)
    as_capped = need.judge(msgs, observations(msgs), [g], forwarded=forwarded)[g]
    whole = need.judge(msgs, observations(msgs), [g])[g]
    assert dict(as_capped.features)["new"] == "5+"
    assert dict(whole.features)["new"] == "0"
    # the last request's sample of the search has the features judged as the cap forwards
    keys = {k for k, *_ in cells}
    assert copy_odds.key(dict(as_capped.features)) in keys
    assert copy_odds.key(dict(whole.features)) not in keys
