"""track_entities: success detection, file-tool schemas, the per-session cache (TTL, capacity,
first-seen time, dedupe), cwd across calls, the rule's contract, extra packs, history restore."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from rules.activity.file_tools import file_tool_effect, load_tools, succeeded
from rules.activity.shell_lex import MAX_COMMAND_CHARS, split_commands
from rules.base import SessionState
from rules.entities import cache as entity_cache
from rules.entities import resolve_refs, track_entities
from rules.report import MAX_REPORTED_ENTITIES
from tests.support.cpu_clock import cpu_timer
from tests.support.factories import assistant, call, ctx, result, shell, system, user

CFG = track_entities.Config()


def run(
    messages: list[dict[str, Any]],
    state: SessionState | None = None,
    now: float = 1000.0,
    cfg: track_entities.Config = CFG,
):  # type: ignore[no-untyped-def]
    return track_entities.apply(ctx(messages, now=now, state=state), cfg)


def paths(state: SessionState) -> list[tuple[str, str, str]]:
    return [(e["action"], e["type"], e["path"]) for e in state.get("entities") or []]


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("", True),
        ("[Command finished with exit code 0]", True),
        ("ls: x\n[Command finished with exit code 2]", False),
        ("<returncode>0</returncode>\n<output>\n</output>", True),
        ("<returncode>1</returncode>\n<output>mkdir: cannot create directory</output>", False),
        (
            "<returncode>0</returncode><output>ls: cannot access 'x': No such file or directory",
            True,
        ),  # the explicit exit code decides
        ("mkdir: cannot create directory 'a': File exists", False),
        ("rm: cannot remove 'x': No such file or directory", False),
        ("bash: foo: command not found", False),
        ("touch: cannot touch '/root/x': Permission denied", False),
        ("Error: file not found", False),
        ("Interrupted by user", False),
        ("No (tell Claude what to do differently)", False),
        ("File created successfully at: /w/a.py", True),
        ("(No content)", True),
        ("Exit code: 1", False),
        ("fatal: a branch named 'feat/x' already exists", False),
        ('docker: Error response from daemon: Conflict. The name "/web" is in use', False),
        ("[1] 4242\nOSError: [Errno 98] Address already in use", False),
        ('Traceback (most recent call last):\n  File "x.py", line 1', False),
        ("npm ERR! code E404", False),
        ("Error: listen EADDRINUSE: address already in use :::3000", False),
        ('def f(x):\n    """Raises:\n        ValueError: if x is bad."""', True),  # a docstring
        ("Switched to a new branch 'feat/x'", True),
    ],
)
def test_success_detection(text: str, ok: bool) -> None:
    assert succeeded(load_tools(), text) is ok


@pytest.mark.parametrize(
    ("name", "args", "result_text", "expected"),
    [
        ("Write", {"file_path": "/w/a.py", "content": "x"}, "", ("create", "file", "/w/a.py")),
        ("write_file", {"file_path": "notes.md"}, "", ("create", "file", "/w/notes.md")),
        (
            "Edit",
            {"file_path": "/w/a.py", "old_string": "a", "new_string": "b"},
            "",
            ("modify", "file", "/w/a.py"),
        ),
        ("replace", {"file_path": "/w/a.py"}, "", ("modify", "file", "/w/a.py")),
        ("Read", {"file_path": "/w/a.py"}, "1\tx", ("read", "file", "/w/a.py")),
        ("read_file", {"file_path": "/w/b.py"}, "x", ("read", "file", "/w/b.py")),
        (
            "str_replace_editor",
            {"command": "create", "path": "/w/n.py", "file_text": "x"},
            "",
            ("create", "file", "/w/n.py"),
        ),
        (
            "str_replace_editor",
            {"command": "str_replace", "path": "/w/n.py"},
            "",
            ("modify", "file", "/w/n.py"),
        ),
        (
            "str_replace_editor",
            {"command": "view", "path": "/w/n.py"},
            "x",
            ("read", "file", "/w/n.py"),
        ),
        (
            "str_replace_editor",
            {"command": "view", "path": "/w/pkg"},
            "Here's the files and directories up to 2 levels deep in /w/pkg",
            ("read", "folder", "/w/pkg"),
        ),
        ("LS", {"path": "/w/src"}, "- a.py", ("open", "folder", "/w/src")),
        ("list_directory", {"path": "src"}, "a.py", ("open", "folder", "/w/src")),
        ("open", {"path": "src/app.py"}, "[File: ...]", ("open", "file", "/w/src/app.py")),
        ("create", {"filename": "reproduce.py"}, "", ("create", "file", "/w/reproduce.py")),
        ("delete_file", {"path": "/w/old.txt"}, "", ("delete", "file", "/w/old.txt")),
        ("create_directory", {"path": "/w/new"}, "", ("create", "folder", "/w/new")),
        ("edit_file", {"target_file": "~/x.md"}, "", ("modify", "file", "~/x.md")),
    ],
)
def test_file_tool_schemas(
    name: str, args: dict[str, Any], result_text: str, expected: tuple[str, str, str]
) -> None:
    effect = file_tool_effect(load_tools(), name, args, result_text, "/w", {})
    assert effect is not None
    assert (effect.action, effect.type, effect.path) == expected


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("Grep", {"pattern": "x"}),
        ("think", {"thought": "hm"}),
        ("WebFetch", {"url": "http://x"}),
        ("TodoWrite", {"todos": []}),
    ],
)
def test_non_file_tools_give_nothing(name: str, args: dict[str, Any]) -> None:
    assert file_tool_effect(load_tools(), name, args, "", "/w", {}) is None


def _convo(*steps: tuple[str, str, str], final_user: str = "thanks") -> list[dict[str, Any]]:
    """(call id, command, result) steps as bash calls, each answered, then a user message."""
    msgs: list[dict[str, Any]] = [system(), user("go")]
    for cid, cmd, res in steps:
        msgs += [assistant(None, shell(cid, cmd)), result(cid, res)]
    msgs.append(user(final_user))
    return msgs


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        ([("c1", "mkdir ~/Desktop/123", "")], [("create", "folder", "~/Desktop/123")]),
        ([("c1", "mkdir x", "mkdir: cannot create directory 'x': File exists")], []),
        ([("c1", "rm y", "<returncode>1</returncode>")], []),
        ([("c1", "cd /srv", ""), ("c2", "touch a.txt", "")], [("create", "file", "/srv/a.txt")]),
        (
            [("c1", "cd /srv && mkdir d", ""), ("c2", "cd d && touch f", "")],
            [("create", "folder", "/srv/d"), ("create", "file", "/srv/d/f")],
        ),
        (
            [("c1", "mkdir out", ""), ("c2", "cp a.csv out", "")],
            [("create", "folder", "out"), ("copy", "file", "out/a.csv")],
        ),
        (
            [("c1", "ls", "x\n(Current directory: /repo)\nbash-$"), ("c2", "rm reproduce.py", "")],
            [("delete", "file", "/repo/reproduce.py")],
        ),
        ([("c1", "touch a", ""), ("c2", "touch a", "")], [("create", "file", "a")]),
    ],
)
def test_tracking_table(steps: list[tuple[str, str, str]], expected: list[tuple]) -> None:  # type: ignore[type-arg]
    out = run(_convo(*steps))
    assert paths(out.state) == expected


def test_unanswered_call_is_not_tracked_until_answered() -> None:
    msgs = [user("go"), assistant(None, shell("c1", "mkdir later"))]
    first = run(msgs)
    assert paths(first.state) == []
    answered = [*msgs, result("c1", "")]
    second = run(answered, state=first.state, now=1010.0)
    assert paths(second.state) == [("create", "folder", "later")]
    assert second.state.get("entities")[0]["first_seen"] == 1010.0


def test_first_seen_is_kept_and_memory_outlives_truncation() -> None:
    msgs = _convo(("c1", "mkdir keep", ""))
    first = run(msgs, now=1000.0)
    again = run(msgs, state=first.state, now=1100.0)
    assert again.state.get("entities")[0]["first_seen"] == 1000.0
    truncated = [system(), user("what did you do?")]  # the agent dropped its own history
    later = run(truncated, state=again.state, now=1200.0)
    assert paths(later.state) == [("create", "folder", "keep")]


def test_ttl_expires_events() -> None:
    first = run(_convo(("c1", "mkdir old", "")), now=1000.0)
    later = run([user("hi")], state=first.state, now=1000.0 + 3601)
    assert paths(later.state) == []


def test_capacity_keeps_the_newest() -> None:
    cfg = track_entities.Config(max_entities=3)
    steps = [(f"c{i}", f"touch f{i}", "") for i in range(6)]
    out = run(_convo(*steps), cfg=cfg)
    assert [p for _, _, p in paths(out.state)] == ["f3", "f4", "f5"]


def test_default_capacity_is_20() -> None:
    steps = [(f"c{i}", f"touch f{i}", "") for i in range(25)]
    out = run(_convo(*steps))
    assert len(paths(out.state)) == 20


def test_capacity_is_per_kind_a_burst_of_files_keeps_the_branch() -> None:
    files = " ".join(f"f{i}.txt" for i in range(25))
    steps = [
        ("c0", "git checkout -b feat/x", "Switched to a new branch 'feat/x'"),
        ("c1", "mkdir out", ""),
        ("c2", f"touch {files}", ""),
    ]
    kept = paths(run(_convo(*steps)).state)
    assert ("create", "branch", "branch:feat/x") in kept
    assert ("create", "folder", "out") in kept
    assert [p for _, t, p in kept if t == "file"] == [f"f{i}.txt" for i in range(5, 25)]


def test_capacity_bounds_all_kinds_together() -> None:
    events = [
        {"path": f"k{k}:{i}", "action": "create", "type": f"k{k}", "id": str(i)}
        for k in range(20)
        for i in range(5)
    ]
    kept = entity_cache.add([], events, 3)
    assert len(kept) == 3 * entity_cache.KINDS_KEPT
    assert kept == [e for e in events if int(e["id"]) >= 2][-len(kept) :]  # the newest, in order


def test_same_call_id_with_new_arguments_is_a_new_call() -> None:
    first = run(_convo(("dup", "touch a", "")))
    second = run(_convo(("dup", "touch a", ""), ("dup", "touch b", "")), state=first.state)
    assert [p for _, _, p in paths(second.state)] == ["a", "b"]


def test_contract_same_list_idempotent_and_report() -> None:
    msgs = _convo(("c1", "mkdir ~/x", ""))
    out = run(msgs)
    assert out.messages is msgs
    assert out.report["entities"] == [
        {"type": "folder", "name": "x", "path": "~/x", "action": "create", "call_id": "c1"}
    ]
    twice = run(msgs, state=out.state)
    assert twice.state == out.state and twice.report["entities"] == []
    assert run(msgs).state == out.state  # deterministic


def test_no_calls_leaves_state_object_alone() -> None:
    state = SessionState({"other": 1})
    out = run([user("hi")], state=state)
    assert out.messages is not None and out.state.get("other") == 1
    assert out.report["entities"] == []


def test_extra_pack_adds_a_shell_tool(tmp_path: Path) -> None:
    pack = tmp_path / "mine.yaml"
    pack.write_text("tools:\n  shell_tools: [my_runner]\n", encoding="utf-8")
    cfg = track_entities.Config(extra_packs=(str(pack),))
    msgs = [
        user("go"),
        assistant(None, call("c1", "my_runner", command="mkdir z")),
        result("c1", ""),
        user("ok"),
    ]
    assert paths(run(msgs, cfg=cfg).state) == [("create", "folder", "z")]
    assert paths(run(msgs).state) == []  # the built-in pack does not know my_runner


def test_bad_pack_file_fails_at_config_time(tmp_path: Path) -> None:
    """When the rule's config is validated (at start-up), never per request. How settings name
    the option: tests/proxy/test_settings_packs.py."""
    with pytest.raises(ValidationError, match=r"missing\.yaml"):
        track_entities.Config(extra_packs=(str(tmp_path / "missing.yaml"),))
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "references:\n  kinds: {x: 0.5}\n  languages:\n    en:\n      patterns:\n"
        "        - {kind: nope, re: 'a'}\n",
        encoding="utf-8",
    )
    with pytest.raises(ValidationError, match="unknown kind 'nope'"):
        resolve_refs.Config(extra_packs=(str(bad),))


# ----- history restore (opt-in) -----

RESTORE = track_entities.Config(restore_history=True)


def test_lone_newest_message_gets_stored_turns_prepended() -> None:
    turn1 = [
        system("S"),
        user("make dir"),
        assistant(None, shell("c1", "mkdir d")),
        result("c1", ""),
    ]
    first = run(turn1, cfg=RESTORE)
    turn2 = [system("S"), user("now delete it")]
    second = run(turn2, state=first.state, cfg=RESTORE)
    assert second.messages == [*turn1, user("now delete it")]
    assert second.report["history_restored"] == 3
    # a retry of the same lone message does not duplicate it
    third = run(turn2, state=second.state, cfg=RESTORE)
    assert third.messages == second.messages


def test_a_system_notice_after_the_lone_message_stays_after_it() -> None:
    """Claude Code sends its environment notice as a system message after the prompt: the
    stored turns go before the prompt, the notice stays where the client put it."""
    turn1 = [user("make dir"), assistant(None, shell("c1", "mkdir d")), result("c1", "")]
    first = run(turn1, cfg=RESTORE)
    turn2 = [system("S"), user("now delete it"), system("# Environment")]
    second = run(turn2, state=first.state, cfg=RESTORE)
    assert second.messages == [system("S"), *turn1, *turn2[1:]]


def test_restore_is_off_by_default_and_ignores_full_histories() -> None:
    turn1 = [user("a"), assistant("b")]
    first = run(turn1, cfg=RESTORE)
    assert run([user("c")], state=first.state).messages == [user("c")]  # option off
    full = [user("a"), assistant("b"), user("c")]
    assert run(full, state=first.state, cfg=RESTORE).messages is full


def test_stored_turns_lose_a_secret_a_command_printed_alone() -> None:
    secret = "Zq8vLp2mWx4nR7tY"
    turn = [
        user("connect to the db"),
        assistant(None, shell("c1", "op read op://prod/db/password")),
        result("c1", f"{secret}\n"),
    ]
    stored = run(turn, cfg=RESTORE).state.get("history")
    assert stored is not None and len(stored) == 3
    assert secret not in str(stored)


def test_restore_is_bounded() -> None:
    cfg = track_entities.Config(restore_history=True, restore_max_messages=4)
    msgs = [x for i in range(10) for x in (user(f"q{i}"), assistant(f"a{i}"))]
    out = run(msgs, cfg=cfg)
    stored = out.state.get("history")
    assert stored == msgs[-4:] and stored[0]["role"] == "user"


def test_calls_older_than_the_seen_window_are_not_read_again() -> None:
    cfg = track_entities.Config(max_seen_calls=10)
    reads = [(f"k{i}", f"cat /w/f{i}", "x") for i in range(1, 15)]
    steps = [("k0", "mkdir /w/old_dir", ""), *reads]
    msgs = _convo(*steps)
    first = run(msgs, now=1000.0, cfg=cfg)
    assert paths(first.state)[0] == ("create", "folder", "/w/old_dir")
    later = run([*msgs, user("again")], state=first.state, now=5000.0, cfg=cfg)
    assert later.report["entities"] == []
    assert [e for e in later.state.get("entities") or [] if e["path"] == "/w/old_dir"] == []


def test_call_answered_after_a_newer_one_is_still_read() -> None:
    both = assistant(None, shell("a", "mkdir first"), shell("b", "mkdir second"))
    msgs = [user("go"), both, result("b", "")]  # a client sent b's result before a's
    first = run(msgs)
    assert paths(first.state) == [("create", "folder", "second")]
    answered = [user("go"), both, result("a", ""), result("b", ""), user("next")]
    second = run(answered, state=first.state, now=1010.0)
    assert [p for _, _, p in paths(second.state)] == ["second", "first"]
    assert run(answered, state=second.state, now=1020.0).report["entities"] == []


def test_many_new_effects_in_one_request_take_linear_time() -> None:

    steps = [
        (f"k{i}", "mkdir -p " + " ".join(f"d{i}_{j}" for j in range(10)), "") for i in range(1000)
    ]
    msgs = _convo(*steps)  # 10,000 new effects on a cold start
    with cpu_timer() as took:
        out = run(msgs, cfg=track_entities.Config(max_entities=10_000))
    assert took.seconds < 3.0  # quadratic: ~16 s
    assert len(paths(out.state)) == 10_000


def test_lone_surrogates_are_tolerated() -> None:
    import json

    import orjson

    def odd(cid: str, arguments: str) -> dict[str, Any]:
        return {"id": cid, "type": "function", "function": {"name": "bash", "arguments": arguments}}

    escaped = json.dumps({"command": "mkdir dir\udcff"})  # orjson refuses lone surrogates
    raw = '{"command": "mkdir raw\udcff"}'  # the surrogate itself, not its escape
    msgs = [user("go \udcff"), assistant(None, odd("c1", escaped)), result("c1", "")]
    msgs += [assistant(None, odd("c2", raw)), result("c2", "")]
    msgs += [assistant(None, shell("c3", "touch f.py")), result("c3", "\udcff"), user("ok")]
    out = run(msgs)
    orjson.dumps(out.state.to_json())  # storable
    assert [p for _, _, p in paths(out.state)] == ["dir?", "raw?", "f.py"]


def test_one_call_making_thousands_reports_a_bounded_list() -> None:
    """The log row's list is bounded whatever one call makes: the first, and how many more."""
    command = " && ".join(f"mkdir -p /w/d{i}" for i in range(1_000))
    out = run([user("go"), assistant(None, shell("c1", command)), result("c1", "")])
    assert len(out.report["entities"]) == MAX_REPORTED_ENTITIES
    assert out.report["entities"][0]["path"] == "/w/d0"
    assert out.report["entities_more"] == 1_000 - MAX_REPORTED_ENTITIES


def test_a_command_line_is_read_within_a_bound() -> None:
    """Past ``MAX_COMMAND_CHARS`` a command line is read up to its last separator within them:
    a million ``; rm -rf b`` costs what 50,000 characters do, on every request that holds it."""
    head = "mkdir -p /w/first"
    tail = "; rm -rf b" * (MAX_COMMAND_CHARS // 10 + 10) + "; mkdir -p /w/past_the_bound"
    commands = split_commands(head + tail)
    assert commands[0].argv == ("mkdir", "-p", "/w/first")
    assert len(commands) < MAX_COMMAND_CHARS // 10 + 1
    assert all("/w/past_the_bound" not in c.argv for c in commands)
    unbroken = "echo " + "x" * MAX_COMMAND_CHARS  # no separator within the bound: nothing read
    assert split_commands(unbroken) == ()
    out = run([user("go"), assistant(None, shell("c1", head + tail)), result("c1", "")])
    assert ("create", "folder", "/w/first") in paths(out.state)
