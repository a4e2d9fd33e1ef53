"""copy_odds: a result's features as need.judge gives them, the table's backoff, and the shipped
pack's figures in the direction measured on the corpus (an unchanged read, a large output, a
recent result, one a later call uses: more likely copied from)."""

from __future__ import annotations

from rules.activity.observations import observations
from rules.context import copy_odds, need
from tests.support.factories import assistant, call, result, shell, user


def _odds(kind: str, fresh: str = "-", size: str = "m", age: str = "<=5", used: str = "-") -> float:
    return copy_odds.odds({"kind": kind, "fresh": fresh, "size": size, "age": age, "used": used})


def test_buckets() -> None:
    assert [copy_odds.size_bucket(n) for n in (0, 499, 500, 3_999, 4_000)] == list("ssmml")
    assert [copy_odds.age_bucket(n) for n in (1, 5, 6, 20, 21)] == [
        "<=5", "<=5", "6-20", "6-20", ">20",
    ]  # fmt: skip


def test_the_shipped_pack_points_the_measured_way() -> None:
    assert _odds("read", "unchanged") > 2 * _odds("read", "changed")
    assert _odds("run", size="l") > _odds("run", size="m") > _odds("run", size="s")
    assert _odds("run", age="<=5") > _odds("run", age=">20")
    assert _odds("plan") < 0.01


def test_an_unknown_kind_backs_off_to_its_age() -> None:
    table, base = copy_odds._table()
    assert _odds("no-such-kind", age=">20") == table["age=>20"]
    assert 0 < base < 1


def test_need_judge_gives_each_result_its_features() -> None:
    body = "\n".join(f"line {i} of the parser" for i in range(100))
    messages = [
        user("Fix the parser"),
        assistant(None, call("r1", "Read", file_path="src/parse.py")),
        result("r1", body),
        assistant(None, call("r2", "Read", file_path="src/lex.py")),
        result("r2", body.replace("parser", "lexer")),
        assistant(None, call("w", "Edit", file_path="src/lex.py", old_str="a", new_str="b")),
        result("w", "ok"),
        assistant(None, shell("s", "ls src")),
        result("s", "parse.py\nlex.py"),
    ]
    obs = observations(messages)
    judged = need.judge(messages, obs, [o.result_index for o in obs])
    features = {o.call_id: dict(judged[o.result_index].features) for o in obs}
    assert features["r1"]["fresh"] == "unchanged"
    assert features["r2"]["fresh"] == "changed"  # edited after the read
    assert features["s"]["fresh"] == "-" and features["s"]["size"] == "s"
    assert features["r1"]["size"] == "m" and features["r1"]["age"] == "<=5"
    r1, r2 = (next(o.result_index for o in obs if o.call_id == c) for c in ("r1", "r2"))
    assert judged[r1].odds > judged[r2].odds


def test_the_shipped_packs_hold_what_their_readers_take() -> None:
    """A bad entry in a shipped table fails here, not silently in a user's compaction."""
    from rules.context import payback

    copy_odds._table.cache_clear()
    table, base = copy_odds._table()
    assert table and all(0 <= p <= 1 for p in table.values()) and 0 <= base <= 1
    payback._survival.cache_clear()
    lengths, sums = payback._survival()
    assert lengths and all(n > 0 for n in lengths) and len(sums) == len(lengths) + 1
