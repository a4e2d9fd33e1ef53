"""bench/next_action.py and its ground truth (bench/copied_literals.py): which literals a tool
call copies from earlier tool output, whether a forwarded request still holds them, and a tiny
replay on the corpus."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path
from typing import Any, cast

import pytest

import bench.copied_literals as cl
from bench.cache_emulator import PrefixCache
from bench.copied_literals import (
    age_bucket,
    candidates,
    copied_literals,
    request_text,
)
from bench.next_action import (
    Job,
    Lane,
    Outcome,
    _account,
    kept_rows,
    main,
    mask_older,
    parse_variant,
    replay,
)
from bench.next_action_thrash import Cut, classify, count_compaction, count_overshoot, overshoot
from bench.reuse_learn import need_samples, reuse_pack
from rules.packs import slow_input
from tests.support.traces import iter_conversations


def _call(cid: str, name: str, **args: Any) -> dict[str, Any]:
    return {
        "id": cid,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


def _asks(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": list(calls)}


def _conversation() -> list[dict[str, Any]]:
    grep = "src/pkg/parser.py:12:def parse_header_line(line):\ntests/test_parser.py:4:import x"
    return [
        {"role": "system", "content": "You fix bugs."},
        {"role": "user", "content": "Fix header parsing; the tests are in tests/test_parser.py"},
        _asks(_call("a", "bash", command="grep -rn header src")),
        {"role": "tool", "tool_call_id": "a", "content": grep},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                _call(
                    "b",
                    "str_replace_editor",
                    command="str_replace",
                    path="src/pkg/parser.py",
                    old_str="def parse_header_line(line):",
                    new_str="def parse_header_line(line, strict=0):",
                ),
                _call("c", "bash", command="pytest tests/test_parser.py -q --maxfail=1"),
            ],
        },
        {"role": "tool", "tool_call_id": "b", "content": "edited"},
        {"role": "tool", "tool_call_id": "c", "content": "1 passed"},
        _asks(_call("d", "bash", command="cat src/pkg/parser.py")),
        {"role": "tool", "tool_call_id": "d", "content": "def parse_header_line(line, strict=0):"},
    ]


def test_a_literal_copied_from_a_tool_result_is_found_with_its_source_and_age() -> None:
    copied = copied_literals(_conversation())
    assert {c.literal for c in copied} == {
        "src/pkg/parser.py",  # a path grep printed
        "def parse_header_line(line):",  # an old_str line it read
        "parse_header_line",  # an identifier grep showed
    }
    assert {(c.call_index, c.source, c.age) for c in copied} == {(4, 3, 1)}
    assert age_bucket(1) == "<=5" and age_bucket(6) == "6-20" and age_bucket(21) == ">20"


def test_literals_the_user_or_the_agent_wrote_first_do_not_count() -> None:
    messages = _conversation()
    literals = {c.literal for c in copied_literals(messages)}
    assert "tests/test_parser.py" in candidates(messages[4])  # in grep's output, but the user
    assert "tests/test_parser.py" not in literals  # named it first
    assert "--maxfail=1" not in candidates(messages[4])  # flags are no literals
    # the agent's own new_str, read back by cat, then typed again: its origin is the agent
    again = [*messages, _asks(_call("e", "edit", old_str=messages[-1]["content"]))]
    assert [c.call_index for c in copied_literals(again)] == [4, 4, 4]


def test_kept_until_a_placeholder_replaces_the_source_result() -> None:
    messages = _conversation()
    request = messages[:4]  # what produced the call at index 4
    for c in copied_literals(messages):
        assert c.literal in request_text(request)
        assert c.literal not in request_text(mask_older(request, 0))
    assert "src/pkg/parser.py" in request_text(mask_older(messages[:8], 0))  # b's arguments


def test_a_lost_literal_is_a_name_or_a_line() -> None:
    """What a dropped run's line can name (a path, identifier or id) against a copied line."""
    assert cl.is_name("src/pkg/parser.py") and cl.is_name("parse_args") and cl.is_name("getValue")
    assert not cl.is_name("def parse_args(argv):") and not cl.is_name("return value + 1")
    assert not cl.is_name("--verbose") and not cl.is_name("12345678")
    mask = Lane(parse_variant("mask10"), None, cast(PrefixCache, None))
    messages = _conversation()
    out = Outcome()
    copied = copied_literals(messages)
    for c in copied:  # each in the request that produced its call, every result masked
        _account(out, mask, [c], messages, mask_older(messages[: c.call_index], 0))
    tally = out.tally["mask10"]
    lost = sum(n for k, n in tally.items() if k.startswith("lost: "))
    assert tally["lost kind: name"] and tally["lost kind: line"]
    assert tally["lost kind: name"] + tally["lost kind: line"] == lost
    assert tally["lost kind: name"] == sum(cl.is_name(c.literal) for c in copied)


def test_need_samples_pair_each_request_with_each_earlier_result() -> None:
    messages = _conversation()
    samples = need_samples(messages, [4, 7], copied_literals(messages))
    # prune's kinds (a grep is a run); the grep's result is needed on request 7: call 4 named
    # a path it showed
    assert samples == {
        ("run", False, "<=5", True): 1,  # request 4: grep's result, copied by the call at 4
        ("run", True, "<=5", False): 1,  # request 7
        ("write", False, "<=5", False): 1,
        ("run", False, "<=5", False): 1,
    }
    pack = reuse_pack(samples, "test", 1)
    assert set(pack) == {"source", "conversations", "samples", "reuse", "age_factor"}


@pytest.mark.needs_shared
def test_a_tiny_replay_on_the_corpus(tmp_path: Path) -> None:
    convs = [c for c in iter_conversations() if c["source"].startswith("SWE-agent/mini")][:2]
    variants = tuple(parse_variant(n) for n in ("nomask", "defaults", "share30", "mask10"))
    for conv in convs:
        out = replay(Job(conv, variants, seed=0, max_requests=8, read_ratio=0.1, learn=True))
        assert out.requests == 8 and not +out.rule_errors
        rows = {r["configuration"]: r for r in kept_rows(out, list(variants))}
        assert rows["nomask"]["literals"] > 0
        assert rows["nomask"]["kept"] == rows["nomask"]["literals"]
        for r in rows.values():
            assert r["literals"] == rows["nomask"]["literals"] and r["kept"] <= r["literals"]
            assert r["literals"] - r["kept"] == sum(r["losses"].values()) >= r["lost_names"]
            assert r["compactions"] >= r["forced"] and r["compactions"] >= r["thrash"]
            assert r["thrash"] >= r["thrash_over_budget"]
        assert rows["nomask"]["compactions"] == rows["mask10"]["compactions"] == 0
        assert sum(out.learn.values()) > 0
    out_json = tmp_path / "out.json"
    assert (
        main(["--limit", "2", "--max-requests", "8", "--jobs", "1", "--json", str(out_json)]) == 0
    )
    assert {r["configuration"] for r in json.loads(out_json.read_text())["rows"]} >= {"mask10"}


@pytest.mark.needs_shared
def test_no_session_of_the_corpus_compacts_twice_within_five_requests() -> None:
    # the first 12 conversations, 40 requests each, at half and 30% of their largest request:
    # held at the budget, not re-cut within 5 requests of a compaction (7 of them did before).
    # The replay keeps the cache warm (2-10 s a request) and the model's window known (gpt-4o's):
    # the hold's conditions; a cold cache or an unknown window would cut
    variants = (parse_variant("share50"), parse_variant("share30"))
    compactions = 0
    for conv in itertools.islice(iter_conversations(), 12):
        out = replay(Job(conv, variants, seed=0, max_requests=40, read_ratio=0.1, learn=False))
        assert not +out.rule_errors
        for r in kept_rows(out, list(variants)):
            assert r["thrash"] == 0, (conv["id"], r["configuration"])
            compactions += r["compactions"]
    assert compactions >= 50


def test_a_compaction_within_five_requests_of_the_previous_is_thrash() -> None:
    lane = Lane(parse_variant("share30"), 1_000, cast(PrefixCache, None))
    tally: Counter[str] = Counter()
    for request, decision, over in ((3, "forced", False), (7, "forced", True), (12, "paid", False)):
        lane.compacted, lane.over = decision, over
        count_compaction(tally, lane, request)
    # 7 is 4 requests after 3 (thrash, still over the budget); 12 is 5 after 7 (not thrash)
    assert tally["compactions"] == 3 and tally["compactions: forced"] == 2
    assert tally["compactions: thrash"] == 1 and tally["compactions: thrash, over"] == 1
    out = Outcome(requests=12, tally={"share30": tally})
    row = kept_rows(out, [parse_variant("share30")])[0]
    assert (row["compactions"], row["forced"], row["thrash"], row["thrash_over_budget"]) == (
        3, 2, 1, 1,
    )  # fmt: skip
    assert row["thrash_why"]["not forced before"] == 1  # no figures: a cut of no known goal


def _cut(after: int = 6_000, **figures: int | float | str) -> Cut:
    """A forced compaction at request 10 that left ``after`` tokens, in a session with a budget
    of 10,000 (room 9,500), its goal 6,000 for 500 tokens a request."""
    schedule = {"decision": "forced", "goal": 6_000, "growth": 500.0, **figures}
    return Cut.of(10, {"budget": 10_000, "reserve": 500, "tokens_after": after,
                       "schedule": schedule})  # fmt: skip


def test_thrash_is_classed_by_why_it_came() -> None:
    # back at 9,600 tokens 4 requests on: 900 a request against the 500 expected
    assert classify(_cut(deepest=2_000, deepest_spare=3_000), 9_600, 14) == "burst"
    # the deepest cut held 5 requests of the growth expected, not of the burst seen
    assert classify(_cut(deepest=5_500, deepest_spare=5_500), 9_600, 14) == "burst past the floor"
    # not even 5 requests of the growth expected fit above the deepest cut
    floor = _cut(after=7_200, deepest=7_200, deepest_spare=7_200)
    assert classify(floor, 9_600, 14) == "floor"
    # stopped above the goal: only the turns kept to fit would have reached it
    assert classify(_cut(after=7_000, deepest=2_000, deepest_spare=6_500), 9_600, 14) == (
        "protected"
    )
    assert classify(_cut(decision="paid"), 9_600, 14) == "not forced before"
    shallow = _cut(goal=8_000, deepest=1_000, deepest_spare=1_000)  # 6,000 + 5 × 500 ≤ 9,500
    assert classify(shallow, 8_400, 14) == "shallow goal"  # but 8,000 + 5 × 500 > 9,500
    assert classify(_cut(deepest=1_000, deepest_spare=1_000), 8_000, 14) == "other"


def test_the_regexes_on_client_text_are_linear() -> None:
    for pattern in (cl._TOKEN, cl._DOTTED, cl._CAMEL, cl._HEXISH, cl._LETTER):
        assert slow_input(pattern) is None, pattern.pattern


def test_requests_over_the_budget_are_told_by_how_far() -> None:
    tally: Counter[str] = Counter()
    for after in (10_001, 10_500, 11_000, 12_500):  # just over, 5%, 10%, 25% of 10,000
        count_overshoot(tally, {"budget": 10_000, "tokens_after": after})
    count_overshoot(tally, {"budget": None, "tokens_after": 99_999})  # no budget: nothing
    assert overshoot(tally) == (0.05, 0.25, 0.25)
    for after in range(10_100, 11_000, 100):  # 1% to 9%: 13 requests over, the p90 at 10%
        count_overshoot(tally, {"budget": 10_000, "tokens_after": after})
    assert overshoot(tally) == (0.05, 0.1, 0.25)
    assert overshoot(Counter()) == (0.0, 0.0, 0.0)
    row = kept_rows(Outcome(requests=4, tally={"share30": tally}), [parse_variant("share30")])[0]
    assert row["overshoot"] == {"median": 0.05, "p90": 0.1, "max": 0.25}


def test_a_guard_variant_sets_prune_s_warm_risk_share() -> None:
    assert parse_variant("defaults+guard2").guard == 0.02
    assert parse_variant("defaults+guard2").kind == "ctxproxy"
    assert parse_variant("defaults").guard is None
    with pytest.raises(ValueError):
        parse_variant("nomask+guard2")
    assert parse_variant("share50+guardoff").guard == "off"  # unset: break-even alone
    assert parse_variant("share50+guardoff").share == 0.5


def test_a_guard_and_a_risk_share_are_both_kept_in_either_order() -> None:
    for name in ("defaults+guard2+risk5", "defaults+risk5+guard2"):
        v = parse_variant(name)
        assert (v.guard, v.risk) == (0.02, 0.05), name
