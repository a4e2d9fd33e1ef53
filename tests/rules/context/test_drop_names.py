"""A dropped run's line names what the rest of the prompt no longer shows, chosen at the
compaction and replayed byte for byte after it (``rules.context.drop_names``)."""

from __future__ import annotations

import re
from typing import Any

from rules.base import SessionState
from rules.context import digest, drop_names, overlay, prune
from rules.messages import PLACEHOLDER_PREFIX, text_of
from tests.support.factories import TOKENS, assistant, call, ctx, result, shell, user

NOW = 10_000.0
LINE = f"{PLACEHOLDER_PREFIX} dropped "


def _session(reads: int, task: str = "Refactor the parser") -> list[dict[str, Any]]:
    """A task, then ``reads`` reads, each of a file defining four functions of its own."""
    out: list[dict[str, Any]] = [user(task)]
    for k in range(reads):
        body = "\n".join(f"def func_{k}_{i}(value):\n    return value + {i}" for i in range(4))
        body += "\n" + "pad line without names\n" * 40
        out += [
            assistant(None, call(f"r{k}", "Read", file_path=f"pkg/m{k}.py")),
            result(f"r{k}", body),
        ]
    return out


def _lines(messages: list[dict[str, Any]]) -> list[str]:
    return [text_of(m["content"]) for m in messages if text_of(m.get("content")).startswith(LINE)]


def _named(line: str) -> list[str]:
    return re.split(
        r", ", line.split("they showed: ")[1].removesuffix(") to fit the token budget]")
    )


def _compacted(messages: list[dict[str, Any]]) -> Any:
    budget = int(TOKENS.count_messages(messages) * 0.4)
    return prune.apply(ctx(messages, budget=budget, now=NOW), prune.Config()), budget


def test_a_dropped_runs_line_names_only_what_the_rest_of_the_prompt_no_longer_shows() -> None:
    # the task names the first file's functions: the prompt keeps showing them
    messages = _session(30, "Speed up func_0_0, func_0_1, func_0_2 and func_0_3 in pkg/m0.py")
    out, _ = _compacted(messages)
    (line,) = _lines(out.messages)
    named = _named(line)
    elsewhere = drop_names.shown_in(m for m in out.messages if text_of(m.get("content")) != line)
    assert named and not set(named) & elsewhere
    assert not {"func_0_0", "func_0_3"} & set(named)
    # the old way spends the line's first places on names the task prompt still shows
    results = [m for m in messages if m["role"] == "tool"]
    assert _named(overlay.dropped_text(results[:25], drop_names.NAMES_IN_ORDER))[:2] == [
        "func_0_0",
        "func_0_1",
    ]
    # as many names as the run's size allows, in the order its 25 results showed them: at this
    # budget the line does not fit the compaction's goal with ``count_for``'s 96, so it names
    # the older ways' count rather than nothing
    assert named[:5] == ["func_1_0", "func_1_1", "func_1_2", "func_1_3", "func_2_0"]
    assert len(named) == len(set(named)) == drop_names.legacy_count_for(25) == 48


def test_a_dropped_runs_line_names_up_to_its_full_count_where_it_fits() -> None:
    messages = _session(30)
    budget = int(TOKENS.count_messages(messages) * 0.6)
    out = prune.apply(ctx(messages, budget=budget, now=NOW), prune.Config())
    (line,) = _lines(out.messages)
    named = _named(line)
    # every name of the run's results (4 each), past the older ways' 48
    run = int(line.split("dropped ")[1].split(" ")[0]) // 2
    assert len(named) == len(set(named)) == 4 * run > drop_names.legacy_count_for(run)
    assert len(named) <= drop_names.count_for(run)


def test_the_line_is_replayed_byte_for_byte_however_the_conversation_goes_on() -> None:
    messages = _session(30)
    out, budget = _compacted(messages)
    (line,) = _lines(out.messages)
    shown = _named(line)
    # later turns show some of the names the line keeps: the line stays as it was forwarded
    more = [
        *messages,
        assistant(None, shell("g1", f"grep -rn {shown[1]} pkg")),
        result("g1", f"pkg/m1.py:1: def {shown[1]}(value): {shown[2]}"),
    ]
    again = prune.apply(ctx(more, budget=budget, now=NOW + 5, state=out.state), prune.Config())
    assert not again.report["prune"].get("compacted")
    assert _lines(again.messages) == [line]
    # what is stored is positions, never the client's text
    stored = out.state.get(prune.NAMESPACE)
    assert stored["names"] == drop_names.NAMES_WIDE and stored["chosen"]
    for positions in stored["chosen"].values():
        assert positions and all(type(n) is int and n >= 0 for n in positions)


def test_choose_skips_what_is_shown_elsewhere_and_names_each_once_within_its_size() -> None:
    texts = ["alpha_one beta_two gamma_three", "beta_two delta_four epsilon_five"]
    picked = drop_names.choose(texts, {"gamma_three"})
    words = [[w for _, w in digest._scan(t)] for t in texts]
    assert [[words[k][n] for n in p] for k, p in enumerate(picked)] == [
        ["alpha_one", "beta_two"],
        ["delta_four", "epsilon_five"],
    ]
    many = [" ".join(f"name_{k}_{i}" for i in range(40)) for k in range(3)]
    chosen = drop_names.choose(many, set())
    assert sum(map(len, chosen)) == drop_names.count_for(3) == 28
    # 20 names, 500 characters: the second long name does not fit, the short ones after it do
    long = [" ".join(f"{c}_" + c * 290 for c in "xyzw") + " short_name another_name"]
    (only,) = drop_names.choose(long, set())
    assert [digest._scan(long[0])[n][1][:2] for n in only] == ["x_", "sh", "an"]


def test_stored_positions_are_checked_and_an_older_overlay_keeps_its_lines() -> None:
    assert drop_names.load(
        {"a": [0, 2], "b": ["x"], "c": [-1], "d": [], "e": list(range(97)), "f": [*range(96)]},
        "abcdef",
    ) == {"a": (0, 2), "f": tuple(range(96))}
    assert drop_names.load("nonsense", ["a"]) == {}
    # an overlay that dropped messages naming them in order goes on doing so
    run = [assistant(None, shell("c1", "ls")), result("c1", "src/app/main.py\nREADME.md")]
    old = overlay.Overlay.load({"edits": {}, "dropped": ["a"], "compactions": 1, "names": 2}, {"a"})
    assert old.names == drop_names.NAMES_IN_ORDER and not old.chosen
    assert overlay.dropped_text(run, old.names).endswith(
        "they showed: src/app/main.py, README.md) to fit the token budget]"
    )
    # the chosen way names exactly what was chosen, nothing when nothing was
    now = overlay.Overlay({}, ["a"], 1, drop_names.NAMES_CHOSEN, {"a": (1,)})
    back = overlay.Overlay.load(now.to_json(), {"a"})
    assert back.names == drop_names.NAMES_CHOSEN and back.chosen == {"a": (1,)}
    assert drop_names.names_of(run, ["x", "a"], back.chosen) == ["README.md"]
    assert "showed" not in overlay.dropped_text(run, drop_names.NAMES_CHOSEN, [])
    state = SessionState({prune.NAMESPACE: now.to_json()})
    assert state.get(prune.NAMESPACE)["chosen"] == {"a": [1]}


def test_an_older_chosen_overlay_keeps_its_count_when_the_client_trims_its_run() -> None:
    """``NAMES_CHOSEN`` (the count before ``NAMES_WIDE``) renders within ``legacy_count_for``:
    a run its client's trimmed history shortens names what it named before, not more."""
    messages = _session(30)
    results = [m for m in messages if m["role"] == "tool"]
    # 4 names chosen of each of the first 12 results: under the older count a run of 12 names 32
    chosen = {f"r{k}": (0, 1, 2, 3) for k in range(12)}
    run = [m for k in range(12) for m in (messages[1 + 2 * k], results[k])]
    anchors = [a for k in range(12) for a in (f"c{k}", f"r{k}")]
    older = drop_names.names_of(run, anchors, chosen, drop_names.count_of_way(3))
    assert len(older) == drop_names.legacy_count_for(12) == 32
    wide = drop_names.names_of(run, anchors, chosen, drop_names.count_of_way(4))
    assert len(wide) == 48 and wide[:32] == older
    every = ["t", *(a for k in range(30) for a in (f"c{k}", f"r{k}"))]
    stored = {a: list(p) for a, p in chosen.items()}  # as the session's state holds them
    for way, named in ((drop_names.NAMES_CHOSEN, older), (drop_names.NAMES_WIDE, wide)):
        ov = overlay.Overlay.load(
            {"dropped": anchors, "compactions": 1, "names": way, "chosen": stored}, set(every)
        )
        (line,) = _lines(overlay.render(messages, every, ov, {}, TOKENS, 8_000))
        assert ov.names == way and line.startswith(f"{LINE}24 ") and _named(line) == named


def test_a_way_back_keeps_what_a_result_dropped_again_named() -> None:
    from rules.context import restore

    before = overlay.Overlay(
        {}, ["a", "b", "c"], 2, drop_names.NAMES_CHOSEN, {"a": (0,), "b": (3,)}
    )
    back = restore.reopened(["a", "b", "c"], before, {1}, [[0], [1], [2]])
    assert back is not None and back.dropped == ["a", "c"] and back.chosen == {"a": (0,)}
    trial = overlay.Overlay({}, ["a", "b", "c"], 3, drop_names.NAMES_CHOSEN, {"b": (5,), "c": (1,)})
    restore.settle(trial, before)
    # a run dropped again renders the same line: "c" named nothing before, and names nothing
    assert trial.chosen == {"a": (0,), "b": (3,)}


def test_a_client_resending_the_forwarded_view_gets_its_new_runs_named() -> None:
    """An own-output session (the client resends prune's output): the stored overlay keeps the
    drops of messages no longer sent, so a new run is told from what is new, not by a count."""
    first = _session(30)
    out, _ = _compacted(first)
    (line,) = _lines(out.messages)
    more = _session(12)[1:]
    for m in more:  # new files, the same shape
        if m["role"] == "tool":
            m["content"] = m["content"].replace("func_", "later_")
            m["tool_call_id"] = "n" + m["tool_call_id"]
        else:
            m["tool_calls"][0]["id"] = "n" + m["tool_calls"][0]["id"]
    second = [*out.messages, *more, user("Now the lexer"), *_session(3)[1:]]
    budget = int(TOKENS.count_messages(second) * 0.3)
    again = prune.apply(ctx(second, budget=budget, now=NOW + 5, state=out.state), prune.Config())
    assert again.report["prune"]["compacted"]
    new = [x for x in _lines(again.messages) if x != line]
    assert new and all("they showed: " in x for x in new)
    stored = again.state.get(prune.NAMESPACE)
    assert set(stored["chosen"]) <= set(stored["dropped"])
