"""bench/next_action_losses.py: each literal a forwarded request lost, classified by its kind,
what removed its source, the source's action and where the digest would have placed it; and a
tiny replay on the corpus, with the oracle's order."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

import bench.next_action as na
import bench.next_action_losses as losses
from bench.copied_literals import Copied
from bench.next_action_losses import classify, digest_position, literal_kind, main, patched
from rules.context import forced, prune, restore
from rules.context.need import Need


def _asks(cid: str, command: str) -> dict[str, Any]:
    arguments = json.dumps({"command": command})
    call = {"id": cid, "type": "function", "function": {"name": "bash", "arguments": arguments}}
    return {"role": "assistant", "content": "", "tool_calls": [call]}


def test_a_literal_is_a_line_a_name_or_code() -> None:
    assert literal_kind("if settings.configured and settings.DEBUG:") == "line"
    assert literal_kind("src/app/views.py") == "path"
    assert literal_kind("parse_header_line") == "ident"
    assert literal_kind("3f9a2c1d7e") == "id"
    assert literal_kind("__repr__") == "code"


def test_where_a_name_stood_among_those_its_source_showed() -> None:
    source = " ".join(f"name_{i:03d}" for i in range(60))
    assert digest_position("name_003", source) == "< 12"
    assert digest_position("name_030", source) == "< 48"
    assert digest_position("name_050", source) == "48 or more"
    assert digest_position("__repr__", source + " __repr__") == "not a name"
    assert digest_position("views.py", "see src/app/views.py:12") == "in names()"


def test_each_lost_literal_is_counted_by_what_removed_its_source() -> None:
    read = "def parse_header_line(line):\n    return line.split(':')"
    msgs = [
        {"role": "user", "content": "Fix it"},
        _asks("a", "cat src/parse.py"),
        {"role": "tool", "tool_call_id": "a", "content": read},
        _asks("b", "ls"),
        {"role": "tool", "tool_call_id": "b", "content": "src/other_module.py"},
        _asks("c", "sed -i s/x/y/ src/parse.py"),
    ]
    copied = [
        Copied(5, "def parse_header_line(line):", 2, 2),
        Copied(5, "parse_header_line", 2, 2),
        Copied(5, "src/other_module.py", 4, 1),
    ]
    dropped = [msgs[0], {"role": "user", "content": "[ctxproxy: dropped 2 earlier messages]"}]
    forwarded = [*dropped, msgs[3], {"role": "tool", "tool_call_id": "b", "content": "[elided]"}]
    tally: Counter[str] = Counter()
    classify(tally, copied, msgs, forwarded, {"b": "mask"})
    assert tally["kind\tdrop\tline"] == 1 and tally["kind\tdrop\tident"] == 1
    assert tally["kind\tmask\tpath"] == 1
    assert tally["digest\tdrop\t< 12"] == 1  # the identifier; a line has no place among names
    assert tally["source\tdrop\tread"] == 2 and tally["source\tmask\tlist"] == 1
    kept: Counter[str] = Counter()
    classify(kept, copied, msgs, msgs[:5], {})
    assert not kept  # nothing lost, nothing counted
    # the source "a" was dropped at request 2; a compaction at request 4 came since, up to 5
    for compactions, since in (([2, 4], "a compaction"), ([2, 6], "none"), ([2], "none")):
        timed: Counter[str] = Counter()
        classify(timed, copied, msgs, forwarded, {"b": "mask"}, ([5], {"a": 2}, compactions))
        assert (
            timed[f"since\tdrop\t{since}"] == 2
            and sum(n for k, n in timed.items() if k.startswith("since")) == 2
        ), compactions


def test_patched_restores_the_replay_and_the_order() -> None:
    saved = na._account, na._forward, forced.order, restore.named_lately, prune.apply
    with patched(oracle=True):
        assert (na._account, na._forward, forced.order) != saved[:3]
        assert saved[3:] == (restore.named_lately, prune.apply)  # as shipped: no way back
    assert (na._account, na._forward, forced.order, restore.named_lately, prune.apply) == saved
    with patched(oracle="literals"):
        assert forced.order is losses._literal_order
    assert forced.order is saved[2]
    with patched(oracle=False, restoring="lately"):
        assert prune.apply is not saved[4] and restore.named_lately is saved[3]
    with patched(oracle=False, restoring="all"):
        assert restore.named_lately([], [], {2, 1}) == [1, 2]
    assert (restore.named_lately, prune.apply) == saved[3:]


def test_the_literal_oracle_ranks_by_the_literals_copied_later(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two results of one size: six literals are copied from the first after request 10, one
    from the second. The first is kept longer by the literal oracle, whatever the copy model
    says; once past the copies, neither counts (the older first, as shipped)."""
    copies = {2: [10, 11, 11, 12, 14, 15], 4: [10]}
    monkeypatch.setitem(losses.ORACLE, "copies", copies)
    monkeypatch.setitem(losses.ORACLE, "per_copy", 3.5)
    needs = {2: Need(False, "", 0.01, odds=0.001), 4: Need(False, "", 0.01, odds=0.9)}
    masks, sizes = [(2, "old"), (4, "old")], {2: 500, 4: 500}
    monkeypatch.setitem(losses.ORACLE, "request", 10)
    steps = losses._literal_order(masks, [], needs, sizes, whole={2, 4})
    assert [s.first for s in steps] == [4, 2]
    assert [s.rank for s in steps] == [1 / 3.5, 6 / 3.5]  # in copies' units
    monkeypatch.setitem(losses.ORACLE, "request", 12)  # two of the first's copies are past
    assert [s.rank for s in losses._literal_order(masks, [], needs, sizes, {2, 4})] == [
        losses.UNUSED,
        3 / 3.5,
    ]
    monkeypatch.setitem(losses.ORACLE, "request", 16)
    steps = losses._literal_order(masks, [[1, 2]], needs, {**sizes, 1: 100}, whole={2, 4})
    assert steps[0].rank == losses.UNUSED  # no copy left: a mask first
    assert steps[-1].stage == "drop" and steps[-1].rank == losses.UNUSED + forced.DROP_TEXT_ODDS


@pytest.mark.needs_shared
def test_a_tiny_replay_classifies_every_loss(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--limit", "3", "--max-requests", "30", "--jobs", "1", "--oracle"]) == 0
    out = capsys.readouterr().out
    assert "oracle order" in out and "## share50: kept" in out and "## share30: kept" in out
    assert "restore: off" in out
