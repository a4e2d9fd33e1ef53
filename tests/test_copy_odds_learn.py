"""bench/copy_odds_learn.py: the split by conversation id, the fitted table's keys and backoff,
and the held-out scores (a table that knows the features beats the base rate)."""

from __future__ import annotations

from collections import Counter

from bench import copy_odds_learn as learn
from rules.activity.observations import observations
from rules.context import copy_odds, need
from tests.support.factories import assistant, call, result, shell, user


def _key(kind: str, fresh: str, size: str = "m", age: str = "<=5", used: str = "-") -> str:
    values = {"kind": kind, "fresh": fresh, "size": size, "age": age, "used": used}
    return copy_odds.key(values | {"does": "-", "new": "5+"})


def _cells() -> Counter[learn.Sample]:
    cells: Counter[learn.Sample] = Counter()
    unchanged, changed = _key("read", "unchanged"), _key("read", "changed")
    cells[(unchanged, 0.05, 2_000, True, 6)] = 150  # six literals copied later from each
    cells[(unchanged, 0.05, 2_000, False, 0)] = 150
    cells[(changed, 0.05, 2_000, True, 1)] = 10
    cells[(changed, 0.05, 2_000, False, 0)] = 290
    cells[(_key("run", "-", "s", ">50"), 0.01, 100, False, 0)] = 50  # too few for its own keys
    return cells


def _spread(
    cells: Counter[learn.Sample], n: int = 2 * learn.MIN_CONVERSATIONS
) -> dict[str, Counter[learn.Sample]]:
    """``cells`` as the samples of ``n`` conversations, each cell's samples split evenly."""
    out = {f"conv/{i}": Counter[learn.Sample]() for i in range(n)}
    for sample, count in cells.items():
        for i in range(n):
            out[f"conv/{i}"][sample] = count // n + (i < count % n)
    return out


def test_the_split_is_by_a_hash_of_the_id_and_about_half() -> None:
    ids = [f"conv/{i}" for i in range(400)]
    halves = [learn.fitting(i) for i in ids]
    assert halves == [learn.fitting(i) for i in ids]  # deterministic
    assert 150 < sum(halves) < 250


def test_the_fit_keeps_keys_with_enough_samples_and_backs_off() -> None:
    pack = learn.fit(_spread(_cells()))
    odds = pack["odds"]
    assert odds[_key("read", "unchanged")] == round(151 / 302, 4)  # add-one smoothed
    assert odds[_key("read", "changed")] == round(11 / 302, 4)
    # literals: 900 and 10 over 300 samples each, smoothed by one sample at the mean of all
    mean = 910 / 650
    assert pack["base_literals"] == round(mean, 4)
    assert pack["literals"][_key("read", "unchanged")] == round((900 + mean) / 301, 4)
    assert pack["literals"][_key("read", "changed")] == round((10 + mean) / 301, 4)
    assert _key("run", "-", "s", ">50") not in odds  # 50 samples: below MIN_SAMPLES
    # nor has its age bucket (50 samples): the base rate
    assert learn._predict(pack, _key("run", "-", "s", ">50")) == pack["base"]
    assert learn._predict(pack, _key("read", "unchanged")) > learn._predict(
        pack, _key("read", "changed")
    )


def test_a_key_from_fewer_conversations_is_not_kept_however_many_its_samples() -> None:
    """The same samples, from many conversations or from too few: a key's samples of one
    conversation are far from independent, so many of them from a few stand for those few."""
    changed = _key("read", "changed")
    few = learn.MIN_CONVERSATIONS - 1
    spread = _spread(_cells())
    # the changed read's samples from ``few`` conversations alone, the others' as before
    narrow = {
        conv: Counter({s: n for s, n in c.items() if s[0] != changed}) for conv, c in spread.items()
    }
    for sample, count in ((s, n) for s, n in _cells().items() if s[0] == changed):
        for j in range(few):
            narrow[f"conv/{j}"][sample] = count // few + (j < count % few)
    assert sum(sum(c.values()) for c in narrow.values()) == sum(_cells().values())
    assert changed in learn.fit(spread)["odds"]
    kept = learn.fit(narrow)["odds"]
    assert changed not in kept
    assert _key("read", "unchanged") in kept  # from all the conversations: kept
    # one sample from one conversation more, and the key is kept
    narrow[f"conv/{few}"][(changed, 0.05, 2_000, False, 0)] += 1
    assert changed in learn.fit(narrow)["odds"]


def test_the_table_scores_better_than_the_base_rate() -> None:
    cells = _cells()
    scores = learn.evaluate(learn.fit(_spread(cells)), cells)
    assert scores["brier table"] < scores["brier base"]
    assert scores["logloss table"] < scores["logloss base"]
    assert scores["samples"] == sum(cells.values())


def test_the_plain_table_has_no_key_with_the_run_class_or_new_names() -> None:
    plain = learn.fit(_spread(_cells()), copy_odds.BASE_LEVELS)
    assert plain["odds"] and not any("new=" in k or "does=" in k for k in plain["odds"])
    scores = learn.evaluate(learn.fit(_spread(_cells())), _cells(), plain)
    assert {"brier plain", "logloss plain", "top tenth per char plain"} <= set(scores)


def test_the_top_tenth_is_a_share_of_the_copied_samples() -> None:
    assert learn._top_tenth([(1.0, 10, True), (0.5, 90, False)], 100) == 1.0
    assert learn._top_tenth([(1.0, 10, False), (0.5, 40, True), (0.1, 50, True)], 100) == 0.0
    # the tenth ends inside the second cell: 5 + 5 of the 15 copied samples
    assert learn._top_tenth([(0.9, 10, True), (1.0, 5, True), (0.1, 85, False)], 100) == 2 / 3


def test_the_literal_share_weighs_each_sample_by_its_literals() -> None:
    """Two keys: a likely one whose results give one literal, an unlikelier one whose give
    nine. The tenth ranked first by odds is the first's, by literals the second's."""
    one, many = _key("run", "-", "s"), _key("read", "unchanged", "s")
    cells: Counter[learn.Sample] = Counter()
    cells[(one, 0.0, 100, True, 1)] = 10
    cells[(many, 0.0, 100, True, 9)] = 10
    cells[(_key("write", "-", "s"), 0.0, 100, False, 0)] = 80  # the base figures
    pack = {
        "base": 0.2,
        "base_literals": 1.0,
        "odds": {one: 0.9, many: 0.3},
        "literals": {one: 0.9, many: 2.3},
    }
    scores = learn.evaluate(pack, cells)
    assert scores["top tenth per char table"] == 10 / 20  # the ten of ``one``: half the copies
    assert scores["literals in top tenth, by odds, table"] == 10 / 100
    assert scores["literals in top tenth, by literals, table"] == 90 / 100  # ``many``'s ten


def test_samples_count_the_literals_copied_at_or_after_each_request() -> None:
    """A read; a later edit copies two of its lines, the next one line again and a new one: a
    literal an earlier call's arguments hold is no copy (its origin is no longer tool output
    alone), so three literals follow the read's first request and one its second."""
    body = "\n".join(f"total = price + tax + {i} more" for i in range(8))
    lines = body.splitlines()

    def edit(call_id: str, old: str) -> dict[str, object]:
        return assistant(None, call(call_id, "Edit", file_path="a.txt", old_str=old, new_str="x"))

    msgs = [
        user("Tidy the file"),
        assistant(None, call("r", "Read", file_path="a.txt")),
        result("r", body),
        edit("e1", f"{lines[0]}\n{lines[1]}"),
        result("e1", "ok"),
        edit("e2", f"{lines[1]}\n{lines[2]}"),
        result("e2", "ok"),
    ]
    _, cells = learn.samples({"id": "conv/lines", "messages": msgs}, 0)
    read = [(copied, literals) for (_, _, chars, copied, literals) in cells if chars == len(body)]
    # the requests msgs[:3] (before e1: 2 + 1 literals later), msgs[:5] (before e2: 1) and the
    # whole conversation (none later)
    assert sorted(read) == [(False, 0), (True, 1), (True, 3)]


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
