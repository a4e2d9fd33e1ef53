"""Task-aware savings: the working set only where the model can no longer see it, the task prompt
behind a harness's wrapper, results elided by need with a digest of what they showed, and a
session held at the budget that compacts once, not on every request."""

from __future__ import annotations

import itertools
from typing import Any

from rules.activity import observations
from rules.base import CacheFacts, SessionState
from rules.context import (
    digest,
    drop_names,
    evidence,
    inject,
    need,
    overlay,
    prune,
    prune_stages,
    sticky,
)
from rules.context.prune_plan import Run
from rules.messages import INJECT_OPEN, PLACEHOLDER_PREFIX, text_of
from rules.redact import REDACTED
from tests.support.factories import TOKENS, assistant, call, ctx, result, shell, user

NOW = 10_000.0
LONG = [user("ship the release"), *[assistant(f"step {k}") for k in range(6)], user("go on")]
GOAL = {"working_set": {"goal": "ship the release"}}
SAY_ALL = inject.Config(say_visible=True)  # when a block goes, not which lines it leaves out


def _inject(facts: CacheFacts, report: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    context = ctx(LONG, now=NOW, state=SessionState(GOAL), cache=facts, report=report or {})
    return inject.apply(context, SAY_ALL).messages


def _has_block(messages: list[dict[str, Any]]) -> bool:
    return INJECT_OPEN in text_of(messages[-1]["content"])


def test_working_set_only_where_the_model_cannot_see_it() -> None:
    warm = CacheFacts(last_at=NOW - 5)
    assert _inject(warm) == LONG  # the history is in front of the model: nothing added
    assert _has_block(_inject(CacheFacts(last_at=NOW - 900)))  # cold: billed whole anyway
    assert _inject(CacheFacts()) == LONG  # unknown: assumed cached, and the history is intact
    compacted = {"prune": {"compacted": True, "schedule": {"cache": "warm"}}}
    assert _has_block(_inject(warm, compacted))  # a compaction cut the history
    warm_report = {"prune": {"compacted": False, "schedule": {"cache": "warm"}}}
    assert _inject(CacheFacts(last_at=NOW - 900), warm_report) == LONG  # prune's view wins
    always = ctx(LONG, now=NOW, state=SessionState(GOAL), cache=warm)
    assert _has_block(
        inject.apply(always, inject.Config(working_set_when="always", say_visible=True)).messages
    )


def test_a_block_is_stored_as_forwarded_and_never_redacted_again() -> None:
    secret = {"working_set": {"goal": "log in with Password: hunter2hunter2 and ship"}}
    context = ctx(LONG, now=NOW, state=SessionState(secret), cache=CacheFacts(last_at=0.0))
    out = inject.apply(context, inject.Config())
    forwarded = text_of(out.messages[-1]["content"])
    assert "hunter2hunter2" not in forwarded and REDACTED in forwarded
    stored = out.state.get(sticky.NAMESPACE)
    assert stored["blocks"][0]["text"] in forwarded
    loaded = sticky.Stored.load(stored)
    assert loaded.to_json()["blocks"][0] is stored["blocks"][0]  # the same object: not re-walked


def test_a_failure_a_later_run_of_its_command_passed_is_no_evidence() -> None:
    """The red output of a test run that a later run of the same command turned green was kept
    as "the latest failing test output" over a tight budget, and the passing run dropped: the
    model was shown a failing suite and nothing saying it passed since."""
    red = "F\nFAILED tests/test_a.py::test_one - assert 1 == 2\n1 failed in 0.1s\n[exit code 1]"
    green = "1 passed in 0.1s\n[exit code 0]"
    run = "python -m pytest -q"
    messages = [user("make the tests pass"), assistant(None, shell("t1", run)), result("t1", red),
                assistant(None, shell("t2", run)), result("t2", green)]  # fmt: skip
    closed = evidence.find(messages, observations.of_context(ctx(messages)))
    assert closed.latest_test_failure is None and 2 not in closed.protected
    other = [*messages[:3], assistant(None, shell("t2", "python -m pytest -q tests/test_b.py")),
             result("t2", green)]  # fmt: skip
    still = evidence.find(other, observations.of_context(ctx(other)))
    assert still.latest_test_failure == 2 and still.protected[2] == "latest failing test output"


def test_the_task_is_the_first_user_message_in_the_clients_own_words() -> None:
    env = "<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"
    messages = [user(env), user("fix the failing parser test"), assistant("ok")]
    found = evidence.find(messages, [])
    assert found.first_user == 1
    assert found.protected == {0: "environment", 1: "original task"}
    assert evidence.is_wrapper("<system-reminder>\nbe brief\n</system-reminder>")
    assert not evidence.is_wrapper("<b>make</b> it bold")
    plain = [user("fix it"), assistant("ok")]
    assert evidence.find(plain, []).protected == {0: "original task"}


def test_digest_names_paths_identifiers_and_ids_within_bounds() -> None:
    text = (
        "./src/app/models.py:42: class OrderLine(Base):\n"
        "FAILED tests/test_orders.py::test_total_with_tax - AssertionError\n"
        '{"id": "cus_9f8e7d6c5b", "sha": "3f2a9c81be7d"}\n' + "noise words here " * 5000
    )
    shown = digest.digest(text)
    assert shown[:2] == ["./src/app/models.py:42", "tests/test_orders.py::test_total_with_tax"]
    assert {"OrderLine", "AssertionError", "cus_9f8e7d6c5b", "3f2a9c81be7d"} <= set(shown)
    assert "test_total_with_tax" in digest.names(text) and "models.py" in digest.names(text)
    assert (
        len(", ".join(digest.digest("a_b_c_d " * 10 + " ".join(f"name_{i}" for i in range(999)))))
        <= 240
    )


def _session(reads: int) -> list[dict[str, Any]]:
    """A task, ``reads`` reads of distinct files, an edit of the first one, then more reads."""
    out: list[dict[str, Any]] = [user("Refactor the parser")]
    for k in range(reads):
        body = "\n".join(f"def helper_{k}_{i}(value): return value + {i}" for i in range(60))
        out += [
            assistant(None, call(f"r{k}", "Read", file_path=f"pkg/m{k}.py")),
            result(f"r{k}", body),
        ]
    out += [
        assistant(None, call("e0", "Edit", file_path="pkg/m0.py", old_str="x", new_str="y")),
        result("e0", "ok"),
    ]
    return out


def test_need_marks_reads_of_edited_files_and_names_in_use() -> None:
    messages = _session(14)
    # a recent call uses a name the read of m3.py showed
    messages += [assistant(None, shell("s1", "grep -n helper_3_7 pkg")), result("s1", "hit")]
    run = Run(ctx(messages), prune.Config(), prune.NAMESPACE)
    reads = {o.action.target: o.result_index for o in run.obs if o.action.kind == "read"}
    judged = need.judge(messages, run.obs, reads.values())
    # edited in part after the read: the read still shows the rest of the file
    assert "being edited" in judged[reads["pkg/m0.py"]].why
    rewritten = [
        *messages,
        assistant(None, call("w1", "Write", file_path="pkg/m1.py", content="x = 1\n")),
        result("w1", "ok"),
    ]
    rerun = Run(ctx(rewritten), prune.Config(), prune.NAMESPACE)
    again = need.judge(rewritten, rerun.obs, reads.values())
    assert not again[reads["pkg/m1.py"]].needed  # rewritten whole: stale (superseded instead)
    assert judged[reads["pkg/m3.py"]].needed and "recent calls" in judged[reads["pkg/m3.py"]].why
    assert not judged[reads["pkg/m5.py"]].needed
    # the chance of reuse comes from the measured pack, by kind, need and age
    assert all(0 < judged[i].reuse <= 1 for i in reads.values())


def test_a_compaction_the_budget_does_not_force_leaves_needed_results_whole() -> None:
    messages = _session(16)
    messages += [assistant(None, shell("s1", "grep -n helper_2_7 pkg")), result("s1", "hit")]
    run = Run(ctx(messages), prune.Config(), prune.NAMESPACE)
    sizes = run.sizes()
    unforced = run.plan(sizes, drops=False)
    forced = run.plan(sizes, drops=True)
    needed = next(o.result_index for o in run.obs if o.action.target == "pkg/m2.py")
    assert needed not in {s.first for s in unforced if s.stage == "mask"}
    # forced: whichever of two reads as old the copy model (``copy_odds``) calls less likely
    # copied from per token goes first (masked, or its turn dropped)

    def removed_at(i: int) -> int:
        return next(k for k, s in enumerate(forced) if i in s.messages)

    other = next(o.result_index for o in run.obs if o.action.target == "pkg/m3.py")
    judged = need.judge(messages, run.obs, [needed, other])
    first, second = sorted((needed, other), key=lambda i: judged[i].odds / sizes[i])
    assert judged[first].odds / sizes[first] < judged[second].odds / sizes[second]
    assert removed_at(first) < removed_at(second)
    stages = [s.stage for s in forced]
    assert stages.index("mask") > max(
        (i for i, s in enumerate(stages) if s == "shrink"), default=-1
    )


def test_a_masked_result_keeps_its_digest_and_how_to_get_it_back() -> None:
    messages = _session(30)
    budget = int(TOKENS.count_messages(messages) * 0.4)
    # turns kept: the masks' digests alone (a forced compaction may drop spent turns first)
    out = prune.apply(ctx(messages, budget=budget, now=NOW), prune.Config(drop_turns=False))
    masked = [
        text_of(m["content"])
        for m in out.messages
        if m["role"] == "tool" and text_of(m["content"]).startswith(PLACEHOLDER_PREFIX)
    ]
    assert masked
    line = next(t for t in masked if "older than" in t)
    assert "path: pkg/" in line and "it showed: helper_" in line


def test_dropped_runs_name_what_they_showed_unless_an_older_overlay_dropped_without() -> None:
    msgs = [assistant(None, shell("c1", "ls")), result("c1", "src/app/main.py\nREADME.md")]
    first = overlay.dropped_text(msgs, drop_names.NAMES_FIRST)
    assert "they showed: src/app/main.py, README.md" in first
    assert "showed" not in overlay.dropped_text(msgs, drop_names.NAMES_NONE)
    old = overlay.Overlay.load({"edits": {}, "dropped": ["a"], "compactions": 1}, {"a"})
    assert old.names == drop_names.NAMES_NONE and "names" not in old.to_json()
    assert overlay.Overlay.load({}, set()).names == drop_names.NAMES_WIDE
    # an overlay whose runs were named the first way keeps it, stored as before
    stored = {"edits": {}, "dropped": ["a"], "compactions": 1, "names": True}
    kept = overlay.Overlay.load(stored, {"a"})
    assert kept.names == drop_names.NAMES_FIRST and kept.to_json()["names"] is True
    assert overlay.dropped_text(msgs, kept.names) == first
    now = overlay.Overlay({}, ["a"], 1, drop_names.NAMES_IN_ORDER)
    assert overlay.Overlay.load(now.to_json(), {"a"}).names == drop_names.NAMES_IN_ORDER
    assert overlay.dropped_text(msgs, now.names).endswith("README.md) to fit the token budget]")
    # a new overlay names what its compactions chose (``test_drop_names``)
    assert overlay.Overlay({}, ["a"], 1).names == drop_names.NAMES_WIDE


def test_a_dropped_runs_line_names_what_it_showed_in_order_not_paths_first() -> None:
    """Identifiers are not crowded out by the paths after them; the line stays as bounded."""
    lines = [f"def handler_{i}(request):  # in src/views_{i}.py" for i in range(300)]
    run = [assistant(None, shell("c1", "grep -rn def src")), result("c1", "\n".join(lines))]
    named = overlay.dropped_text(run, drop_names.NAMES_IN_ORDER).split("they showed: ")[1]
    assert named.startswith("handler_0, src/views_0.py, handler_1, src/views_1.py")
    old_way = overlay.dropped_text(run, drop_names.NAMES_FIRST).split("they showed: ")[1]
    assert "handler_" not in old_way  # ten paths first, the identifiers never reached
    assert len(named.split(", ")) == len(old_way.split(", ")) == 10  # 8 + 2 per result
    # the first way's bytes, pinned: a session whose overlay named runs so replays them unchanged
    views = ", ".join(f"src/views_{i}.py" for i in range(10))
    assert overlay.dropped_text(run, drop_names.NAMES_FIRST) == (
        f"{PLACEHOLDER_PREFIX} dropped 2 earlier messages (1 assistant, 1 tool; tool calls: "
        f"bash×1; they showed: {views}) to fit the token budget]"
    )
    assert digest.in_order("\n".join(lines), 48, 50) == [
        "handler_0",
        "src/views_0.py",
        "handler_1",
        "handler_2",  # src/views_1.py would not fit
    ]
    long_first = "x" * 60 + "/blob.bin\n" + "\n".join(lines[:3])
    assert digest.in_order(long_first, 48, 50)[0] == "handler_0"  # a long word is skipped


def test_a_session_held_at_the_budget_compacts_once_per_several_requests() -> None:
    """Each request adds a read; the budget is reached and then held: forced compactions leave
    room for several requests of growth, so they come at most once per five requests."""
    messages: list[dict[str, Any]] = [user("Port the module")]
    state = SessionState()
    budget = 6_000
    compactions = []
    now = NOW
    for k in range(60):
        body = "\n".join(f"row {k}.{i} of the table with several words" for i in range(40))
        messages = [*messages, assistant(None, call(f"c{k}", "Read", file_path=f"t{k}.txt")),
                    result(f"c{k}", body)]  # fmt: skip
        now += 5
        facts = CacheFacts(last_at=now - 5 if k else None)
        out = prune.apply(
            ctx(messages, budget=budget, now=now, state=state, cache=facts), prune.Config()
        )
        state = out.state
        if out.report["prune"]["compacted"]:
            compactions.append(k)
        assert TOKENS.count_messages(out.messages) <= budget
    assert len(compactions) >= 2
    gaps = [b - a for a, b in itertools.pairwise(compactions)]
    assert min(gaps) >= 5, compactions


def test_only_a_whole_write_makes_earlier_reads_stale() -> None:
    def supersedes(write: dict[str, Any]) -> bool:
        messages = [user("t"), *_session(1)[1:3], write, result("w", "ok")]
        run = Run(ctx(messages), prune.Config(), prune.NAMESPACE)
        return any(i == 2 for i, _ in prune_stages.supersede(run.obs, set(), messages))

    path = "pkg/m0.py"
    assert supersedes(assistant(None, call("w", "Write", file_path=path, content="x = 1\n")))
    assert supersedes(assistant(None, shell("w", f"cat > {path} <<'EOF'\nx = 1\nEOF")))
    assert not supersedes(
        assistant(None, call("w", "Edit", file_path=path, old_str="a", new_str="b"))
    )
    assert not supersedes(assistant(None, shell("w", f"sed -i 's/a/b/' {path}")))
    assert not supersedes(assistant(None, shell("w", f"echo x >> {path}")))


def test_a_warm_request_replays_the_block_and_says_nothing_of_the_working_set() -> None:
    """A block said the working set on a cold start; the next request, warm and unchanged,
    carries that block as it was and adds no "changed since" note (the working set is not
    "closed" for not being said)."""
    first = inject.apply(
        ctx(LONG, now=NOW, state=SessionState(GOAL), cache=CacheFacts(last_at=0.0)),
        SAY_ALL,
    )
    assert _has_block(first.messages)
    warm = CacheFacts(last_at=NOW)
    second = inject.apply(ctx(LONG, now=NOW + 5, state=first.state, cache=warm), SAY_ALL)
    assert second.messages == first.messages
    assert "changed since" not in text_of(second.messages[-1]["content"])
