"""copy_odds: a result's features as need.judge gives them, the table's backoff, and the shipped
pack's figures in the direction measured on the corpus (an unchanged read, a large output, a
recent result, one a later call uses: more likely copied from)."""

from __future__ import annotations

from rules.activity.observations import observations
from rules.context import copy_odds, need
from tests.support.factories import assistant, call, result, shell, user


def _odds(
    kind: str,
    fresh: str = "-",
    size: str = "m",
    age: str = "<=5",
    used: str = "-",
    does: str = "-",
    new: str = "5+",
) -> float:
    values = {"kind": kind, "fresh": fresh, "size": size, "age": age, "used": used}
    return copy_odds.odds(values | {"does": does, "new": new})


def test_buckets() -> None:
    assert [copy_odds.size_bucket(n) for n in (0, 499, 500, 3_999, 4_000)] == list("ssmml")
    assert [copy_odds.new_names_bucket(n) for n in (0, 1, 4, 5, 900)] == [
        "0", "1-4", "1-4", "5+", "5+",
    ]  # fmt: skip
    assert [copy_odds.age_bucket(n) for n in (1, 5, 6, 20, 21, 50, 51)] == [
        "<=5", "<=5", "6-20", "6-20", "21-50", "21-50", ">50",
    ]  # fmt: skip


def test_the_shipped_pack_points_the_measured_way() -> None:
    assert _odds("read", "unchanged") > 2 * _odds("read", "changed")
    assert _odds("run", size="l", does="view") > _odds("run", size="s", does="view")
    assert _odds("run", age="<=5", does="search") > _odds("run", age=">50", does="search")
    assert _odds("run", age="21-50", does="search") > _odds("run", age=">50", does="search")
    for age in ("21-50", ">50"):  # an old result one of the last calls used: still in play
        lately, unused = (_odds("run", age=age, used=u, does="search") for u in ("lately", "-"))
        assert lately > 2 * unused
    assert _odds("plan") < 0.01
    # a result whose names all came back in later results: its literals are copied from those
    assert _odds("run", does="search") > 10 * _odds("run", does="search", new="0")
    assert _odds("read", "unchanged") > _odds("read", "unchanged", new="1-4")
    # what a run does: what a view or a search showed is copied more than a build's or other
    assert min(_odds("run", does="view"), _odds("run", does="search")) > max(
        _odds("run", does="build"), _odds("run", does="other")
    )


def test_a_key_the_pack_lacks_backs_off_to_kind_freshness_and_new_names() -> None:
    table, _ = copy_odds._table()
    values = {"kind": "run", "fresh": "-", "size": "m", "age": ">50", "used": "-", "new": "0"}
    assert copy_odds.odds(values | {"does": "no-such-class"}) == table["kind=run|fresh=-|new=0"]
    assert copy_odds.odds(values | {"does": "search"}) != table["kind=run|fresh=-|new=0"]


def test_an_unknown_kind_backs_off_to_its_age() -> None:
    table, base = copy_odds._table()
    assert _odds("no-such-kind", age=">50") == table["age=>50"]
    assert 0 < base < 1


def test_need_judge_gives_each_result_its_features() -> None:
    body = "\n".join(f"def parse_{i}(tokens): pass" for i in range(60))
    messages = [
        user("Fix the parser"),
        assistant(None, call("r1", "Read", file_path="src/parse.py")),
        result("r1", body),
        assistant(None, call("r2", "Read", file_path="src/lex.py")),
        result("r2", body.replace("parse_", "lex_")),
        assistant(None, call("w", "Edit", file_path="src/lex.py", old_str="a", new_str="b")),
        result("w", "ok"),
        assistant(None, shell("s", "ls src")),
        result("s", "parse.py\nlex.py"),
        assistant(
            None, shell("g", "cd src && grep -n parse_expr *.py"), shell("t", "python -m pytest")
        ),
        result("g", "parse.py:12: def parse_expr(tokens):"),
        result("t", "1 passed"),
    ]
    obs = observations(messages)
    judged = need.judge(messages, obs, [o.result_index for o in obs])
    features = {o.call_id: dict(judged[o.result_index].features) for o in obs}
    assert features["r1"]["fresh"] == "unchanged"
    assert features["r2"]["fresh"] == "changed"  # edited after the read
    assert features["s"]["fresh"] == "-" and features["s"]["size"] == "s"
    assert features["r1"]["size"] == "m" and features["r1"]["age"] == "<=5"
    does = [features[c]["does"] for c in ("g", "t", "s")]
    assert does == ["search", "build", "-"]  # ``ls src`` alone is a listing, not a run
    # ``ls``'s two names come back in grep's answer (``parse.py``) or not at all (``lex.py``)
    assert features["s"]["new"] == "1-4"
    assert features["r1"]["new"] == "5+"  # its 60 names: no later result shows them
    assert features["r2"]["new"] == "5+" and features["t"]["new"] == "0"
    r1, r2 = (next(o.result_index for o in obs if o.call_id == c) for c in ("r1", "r2"))
    assert judged[r1].odds > judged[r2].odds


def test_how_recently_a_later_call_used_a_result() -> None:
    """A search whose handler a call uses, then idle runs: while the using call is among the
    agent's last ``LATE_CALLS`` calls the search is used lately; after, only used (need's
    recent calls still hold it); a read whose file one of the last calls names is used lately
    though no call uses a name it shows."""
    hits = "\n".join(f"src/mod_{i}.py:{i}: def handler_{i}(request):" for i in range(3))
    messages = [
        user("Fix the handlers"),
        assistant(None, shell("g", "grep -rn 'def handler_' src")),
        result("g", hits),
        assistant(None, call("r", "Read", file_path="docs/notes.txt")),
        result("r", "Remember to keep the request objects immutable."),
        assistant(None, shell("u", "sed -n 1,40p src/mod_1.py | grep -n handler_1")),
        result("u", "None"),
    ]

    def used(msgs: list[dict[str, object]]) -> dict[str, str]:
        obs = observations(msgs)
        judged = need.judge(msgs, obs, [o.result_index for o in obs])
        return {o.call_id: dict(judged[o.result_index].features)["used"] for o in obs}

    assert used(messages)["g"] == "lately"
    idle = []
    for k in range(need.LATE_CALLS):
        idle += [assistant(None, shell(f"t{k}", "python -m pytest -q")), result(f"t{k}", "ok")]
    # four idle calls: the using call is the fifth last; five: the sixth
    assert used(messages + idle[:-2])["g"] == "lately"
    assert used(messages + idle)["g"] == "used"
    assert used(messages + idle)["r"] == "-"
    named = [assistant(None, shell("c", "wc -l docs/notes.txt")), result("c", "1")]
    assert used(messages + idle + named)["r"] == "lately"  # its file named by the last call
    assert used(messages + idle + named)["g"] == "used"


def test_the_shipped_packs_hold_what_their_readers_take() -> None:
    """A bad entry in a shipped table fails here, not silently in a user's compaction."""
    from rules.context import payback

    copy_odds._table.cache_clear()
    table, base = copy_odds._table()
    assert table and all(0 <= p <= 1 for p in table.values()) and 0 <= base <= 1
    payback._survival.cache_clear()
    lengths, sums = payback._survival()
    assert lengths and all(n > 0 for n in lengths) and len(sums) == len(lengths) + 1


def test_a_result_whose_names_came_back_later_is_less_likely_copied_from() -> None:
    """The same search output, its names shown again by a later run or not: the first is the
    likelier elided (a literal is copied from the latest result that shows it)."""
    hits = "\n".join(f"src/mod_{i}.py:{i}: def handler_{i}(request):" for i in range(30))

    def odds_of_the_search(later_output: str) -> float:
        messages = [
            user("Find the handlers"),
            assistant(None, shell("g", "grep -rn 'def handler_' src")),
            result("g", hits),
            assistant(None, shell("p", "python -m pytest -q tests")),
            result("p", later_output),
        ]
        obs = observations(messages)
        return need.judge(messages, obs, [obs[0].result_index])[obs[0].result_index].odds

    shown_again = hits.replace(": def", ": FAILED def")  # every name of the search, again
    assert odds_of_the_search(shown_again) < odds_of_the_search("30 passed in 0.4s") / 10


def test_a_read_that_shows_no_names_is_not_ranked_spent() -> None:
    """A long prose read (no paths or identifiers) the agent may edit with its lines: it shows
    no names, so "none came back later" says nothing; it is judged by the levels without them."""
    doc = "\n".join(
        f"Paragraph {i}: Install the tool with the package manager of your system, then run it "
        "once so that it can write its settings."
        for i in range(60)
    )
    msgs = [
        user("Rewrite the install section of the guide"),
        assistant(None, call("r", "Read", file_path="docs/guide.md")),
        result("r", doc),
    ]
    for k in range(3):
        msgs += [
            assistant(None, shell(f"t{k}", "python -m pytest -q")),
            result(f"t{k}", "3 passed"),
        ]
    obs = observations(msgs)
    i = obs[0].result_index
    judged = need.judge(msgs, obs, [i])[i]
    assert dict(judged.features)["new"] == "-"
    table, base = copy_odds._table()
    plain = next(
        (
            table[k]
            for f in copy_odds.BASE_LEVELS
            if (k := copy_odds.key(dict(judged.features), f)) in table
        ),
        base,
    )
    assert judged.odds == plain  # the levels without the new names
    short = need.judge([*msgs[:2], result("r", "ok"), *msgs[3:]], obs, [i])[i]
    assert dict(short.features)["new"] == "0"  # control: a short result without names is spent
