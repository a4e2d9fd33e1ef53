"""track_entities over the real trace corpus: every mkdir/touch/rm/mv/cp in a successful shell
call produces an event of the right action with a normalised path (absolute when the command or
an earlier ``cd`` makes it known), plus a hand-verified sample. Whole corpus, ~3 s."""

from __future__ import annotations

import posixpath
from functools import lru_cache
from typing import Any

import pytest

from rules.activity.failed_chain import ran_before_failure
from rules.activity.file_tools import load_tools, shell_command, succeeded
from rules.activity.shell_lex import split_commands
from rules.entities import track_entities
from rules.messages import call_arguments, call_id, call_name, iter_tool_pairs, text_of
from tests.support.factories import ctx
from tests.support.traces import iter_conversations

CFG = track_entities.Config(max_entities=10_000, ttl_seconds=1e12)
EXPECTED_ACTION = {"mkdir": "create", "touch": "create", "rm": "delete", "mv": "move", "cp": "copy"}


@lru_cache(maxsize=1)
def corpus_events() -> tuple[dict[str, Any], ...]:
    """Per conversation: its messages and the events recorded per call id (from the report,
    so repeated writes to one path, which the cache folds together, all count)."""
    out = []
    for conv in iter_conversations():
        msgs = conv["messages"]
        res = track_entities.apply(ctx(msgs, session_id=conv["id"]), CFG)
        by_call: dict[str, list[dict[str, Any]]] = {}
        for e in res.report["entities"]:
            by_call.setdefault(e["call_id"], []).append(e)
        out.append({"id": conv["id"], "messages": msgs, "events": by_call})
    return tuple(out)


def _verb_commands(command: str) -> list[tuple[str, list[str]]]:
    """(verb, operands) for each file verb run at command position (not after ``||``, not git rm
    --cached, operands without shell expansions, cp/mv with a destination)."""
    found = []
    for cmd in split_commands(command):
        argv = list(cmd.argv)
        while argv and (argv[0] in ("sudo", "env", "command") or "=" in argv[0]):
            argv = argv[1:]
        if argv[:1] == ["git"]:
            argv = argv[1:]
        if not argv or argv[0] not in EXPECTED_ACTION or cmd.connector == "||":
            continue
        if "--cached" in argv:
            continue
        operands = [a for a in argv[1:] if a and not a.startswith("-")]
        if any("$" in a or "`" in a for a in operands) or not operands:
            continue
        if argv[0] in ("mv", "cp") and len(operands) < 2:
            continue
        found.append((argv[0], operands))
    return found


def test_every_file_verb_in_a_successful_call_is_tracked(traces_path) -> None:  # type: ignore[no-untyped-def]
    tools = load_tools()
    checked = 0
    missing = []
    for conv in corpus_events():
        msgs, events = conv["messages"], conv["events"]
        absolute_cwd = False
        for _, call, answer in iter_tool_pairs(msgs):
            command = shell_command(tools, call_name(call), call_arguments(call))
            if command is None or answer is None:
                continue
            ok = succeeded(tools, text_of(msgs[answer].get("content")))
            verbs = _verb_commands(command) if ok else []
            got = events.get(call_id(call), [])
            for verb, operands in verbs:
                checked += 1
                if not any(e["action"] == EXPECTED_ACTION[verb] for e in got):
                    missing.append((conv["id"], call_id(call), command[:120]))
                abs_known = absolute_cwd or all(o.startswith(("/", "~")) for o in operands)
                for e in (e for e in got if e["type"] in ("file", "folder")):  # paths only
                    assert e["path"] == posixpath.normpath(e["path"]), e
                    if abs_known:
                        assert e["path"].startswith(("/", "~")), (conv["id"], command[:120], e)
            if not ok:  # failed calls make nothing; a server whose call is still running
                # (exit -1: the harness stopped waiting, as OpenHands does) did start; what the
                # leading commands of a failed `&&` chain did stands (`cp a b && patch …`)
                text = text_of(msgs[answer].get("content"))
                ran = ran_before_failure(command, text)
                assert ran is not None or all(e["type"] == "process" for e in got), (
                    conv["id"],
                    command[:120],
                )
            absolute_cwd = absolute_cwd or (
                ok
                and any(
                    c.argv[:1] == ("cd",) and len(c.argv) > 1 and c.argv[1].startswith(("/", "~"))
                    for c in split_commands(command)
                )
            )
    assert checked >= 300  # the corpus has a few hundred such commands
    assert missing == []


DJANGO = "mswea-pr816/deepseek_chat_test_1-100/django__django-"
# Hand-verified: (conversation, call id, expected events as (action, type, path[, from])).
SAMPLE = [
    (
        "openhands/evaluation/benchmarks/multi_swe_bench/examples/output.jsonl/ponylang__ponyc-4588",
        "toolu_39",
        [("create", "folder", "/workspace/ponylang__ponyc__0.1/build/build_release")],
    ),
    (
        "openhands/trajs/wrong_initial_state.json",
        "toolu_01PuY3mXrE6fm3j52GscR4rj",
        [("move", "file", "/workspace/2048.py", "/workspace/game_2048.py")],
    ),
    # SWE-agent: the cwd comes from the "(Current directory: /OQuPy)" footer of earlier results
    ("adp/nebius_SWE-agent-trajectories/1", "syn_12", [("delete", "file", "/OQuPy/reproduce.py")]),
    (
        "swe-agent/trajectories/demonstrations/replay__marshmallow-code__marshmallow-1867__function_"
        "calling__install-1/marshmallow-code__marshmallow-1867.traj",
        "call_5iDdbOYybq7L19vqXmR0DPaU",
        [("delete", "file", "/testbed/reproduce.py")],
    ),
    (
        "adp/swe-play-trajectories/0",
        "syn_19",
        [("delete", "file", "/workspace/test_cpu_implementation.py")],
    ),
    # the user rejected these calls ("No (tell Claude what to do differently)")
    ("bookminder/day-002/s0", "syn_8", []),
    ("bookminder/day-004/s0", "syn_38", []),
    # `cp x docs/` copies into the folder, after an earlier `cd` into the project
    (
        "bookminder/day-003/s0",
        "syn_45",
        [
            (
                "copy",
                "file",
                "/Users/palimondo/Developer/BookMinder/docs/python_best_practices.md",
                "/Users/palimondo/Developer/BookMinder/python_best_practices.md",
            )
        ],
    ),
    (
        DJANGO + "15213",
        "call_00_17u6FYOYTbjOeBX14r0RTHPQ",
        [
            (
                "copy",
                "file",
                "/testbed/django/db/models/sql/where.py",
                "/testbed/django/db/models/sql/where.py.backup",
            )
        ],
    ),
    (
        DJANGO + "15498",
        "call_00_rpJTOk5qFjXl6QqqwGl5LVlS",
        [("modify", "file", "/testbed/django/views/static.py")],
    ),
    (
        DJANGO + "14915",
        "call_00_GHLAlQwhuBJjsnK8wlCj6jeM",
        [("create", "file", "/testbed/reproduce_issue.py")],
    ),  # cat > … << 'EOF' heredoc
]


@pytest.mark.parametrize(
    ("conv_id", "cid", "expected"),
    SAMPLE,
    ids=[f"{c[0].rsplit('/', 1)[-1][:30]}-{c[1][:12]}" for c in SAMPLE],
)
def test_hand_verified_sample(traces_path, conv_id: str, cid: str, expected: list[tuple]) -> None:  # type: ignore[no-untyped-def, type-arg]
    conv = next(c for c in corpus_events() if c["id"] == conv_id)
    assert any(call_id(c) == cid for _, c, _ in iter_tool_pairs(conv["messages"]))
    got = [
        (e["action"], e["type"], e["path"]) + ((e["from"],) if "from" in e else ())
        for e in conv["events"].get(cid, [])
    ]
    assert got == expected
