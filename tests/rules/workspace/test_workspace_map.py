"""workspace_map: the map built from tool traffic in the shapes the corpus' agents send it
(mini-swe-agent's ``cd /testbed && …``, Claude Code's file tools, Codex's ``workdir`` and
``apply_patch``, Gemini CLI's tools, OpenHands' editor), bounded, redacted, read once; and what
inject says of it."""

from __future__ import annotations

from typing import Any

import orjson

from rules.base import CacheFacts, SessionState
from rules.context import inject
from rules.workspace import render, workspace_map
from tests.support.factories import apply_rules, assistant, call, ctx, result, shell, system, user

CFG = workspace_map.Config()


def run(*pairs: tuple[dict[str, Any], str], cfg: workspace_map.Config = CFG, **kw: Any) -> Any:
    """The map after one request made of ``(call, its result)`` pairs."""
    messages: list[dict[str, Any]] = [system(), user("fix the bug")]
    for c, text in pairs:
        messages += [assistant(None, c), result(c["id"], text)]
    out = workspace_map.apply(ctx(messages, now=1_000.0, **kw), cfg)
    return out.state.get(workspace_map.NAMESPACE) or {}


def nodes(wsmap: dict[str, Any]) -> dict[str, list[Any]]:
    return dict(wsmap.get("nodes") or {})


def ok(output: str = "") -> str:
    return f"<returncode>0</returncode>\n<output>\n{output}</output>"


TRACEBACK = """Traceback (most recent call last):
  File "/testbed/reproduce.py", line 3, in <module>
    from django.db.models import query
  File "/testbed/django/db/models/query.py", line 41, in <module>
    raise ValueError("boom")
  File "/usr/lib/python3.9/importlib/__init__.py", line 127, in import_module
ValueError: boom
"""


def test_mini_swe_agent_chain_shapes() -> None:
    found = "./django/db/models/query.py\n./django/db/models/sql/compiler.py\n"
    wsmap = run(
        (shell("c1", "cd /testbed && find . -name '*.py' -path '*models*' | head -5"), ok(found)),
        (shell("c2", "cd /testbed && sed -n '1,50p' django/db/models/query.py"), ok("x = 1\n")),
        (shell("c3", "cd /testbed && cat > reproduce.py << 'EOF'\nprint(1)\nEOF"), ok()),
        (
            shell("c4", "cd /testbed && python reproduce.py"),
            f"<returncode>1</returncode>\n{TRACEBACK}",
        ),
        (shell("c5", "cd /testbed && sed -i 's/a/b/' django/db/models/query.py"), ok()),
    )
    got = nodes(wsmap)
    assert got["/testbed/django/db/models/query.py"][1] == "lrw"  # listed, read, written
    assert got["/testbed/django/db/models/sql/compiler.py"][1] == "l"
    assert "c" in got["/testbed/reproduce.py"][1]
    assert not any(p.startswith("/usr/lib") for p in got)  # outside the project: not kept
    assert wsmap["cwd"] == "/testbed"


def test_deleted_and_moved_paths_leave_the_map() -> None:
    wsmap = run(
        (shell("c1", "cd /testbed && ls"), ok("build\nsetup.py\nreproduce.py\nold.py\n")),
        (shell("c2", "cd /testbed && rm reproduce.py && rm -rf build"), ok()),
        (shell("c3", "cd /testbed && mv old.py new.py"), ok()),
    )
    got = nodes(wsmap)
    assert "/testbed/setup.py" in got and "/testbed/new.py" in got
    assert not {"/testbed/reproduce.py", "/testbed/build", "/testbed/old.py"} & set(got)
    assert "m" in got["/testbed/new.py"][1]


def test_claude_code_file_tools_and_git() -> None:
    ls_out = "- /home/u/app/\n  - pyproject.toml\n  - src/\n    - app/\n      - main.py\n"
    status = "On branch feature/x\nChanges not staged for commit:\n\tmodified:   src/app/main.py\n"
    wsmap = run(
        (call("t1", "LS", path="/home/u/app"), ls_out),
        (call("t2", "Read", file_path="/home/u/app/src/app/main.py"), "     1\tprint('hi')"),
        (
            call(
                "t3",
                "Edit",
                file_path="/home/u/app/src/app/main.py",
                old_string="a",
                new_string="b",
            ),
            "The file /home/u/app/src/app/main.py has been updated.",
        ),
        (call("t4", "Bash", command="cd /home/u/app && git status"), status),
    )
    got = nodes(wsmap)
    assert got["/home/u/app/src"][0] == "d"
    assert got["/home/u/app/src/app/main.py"][1] == "lrw"
    assert wsmap["git"]["branch"] == "feature/x"
    assert wsmap["git"]["dirty"] == [["M", "/home/u/app/src/app/main.py"]]
    items = render.section_items(wsmap)
    assert ("Project", "python (pyproject.toml) in /home/u/app") in items
    assert ("Folders touched", "src/app") in items
    assert any(k == "Git" and "branch feature/x" in v and "src/app/main.py" in v for k, v in items)


def test_codex_workdir_and_apply_patch() -> None:
    patch = (
        "*** Begin Patch\n*** Add File: pkg/new.go\n+package pkg\n"
        "*** Update File: pkg/old.go\n*** Move to: pkg/renamed.go\n@@\n-a\n+b\n*** End Patch"
    )
    wsmap = run(
        (
            call("x1", "shell", command=["bash", "-lc", "ls"], workdir="/repo"),
            '{"output": "go.mod\\npkg\\n", "metadata": {"exit_code": 0}}',
        ),
        (call("x2", "shell", command=["apply_patch", patch], workdir="/repo"), "Success."),
    )
    got = nodes(wsmap)
    assert "/repo/go.mod" in got and "c" in got["/repo/pkg/new.go"][1]
    assert "/repo/pkg/renamed.go" in got and "/repo/pkg/old.go" not in got


def test_gemini_cli_tools() -> None:
    listing = "Directory listing for /w/site:\n[DIR] src\npackage.json\nREADME.md"
    wsmap = run(
        (call("g1", "list_directory", path="/w/site"), listing),
        (call("g2", "read_file", absolute_path="/w/site/package.json"), '{"name": "site"}'),
        (
            call("g3", "write_file", file_path="/w/site/src/index.ts", content="x"),
            "Successfully created and wrote to new file: /w/site/src/index.ts.",
        ),
    )
    got = nodes(wsmap)
    assert got["/w/site/src"][0] == "d" and "r" in got["/w/site/package.json"][1]
    assert "/w/site/src/index.ts" in got
    items = render.section_items(wsmap)
    assert any(k == "Project" and v.startswith("node (package.json") for k, v in items)


def test_openhands_view_of_a_folder_is_a_listing() -> None:
    view = (
        "Here's the files and directories up to 2 levels deep in /workspace/ponyc, excluding "
        "hidden items:\n/workspace/ponyc/\n/workspace/ponyc/Makefile\n/workspace/ponyc/src/\n"
    )
    wsmap = run((call("o1", "str_replace_editor", command="view", path="/workspace/ponyc"), view))
    got = nodes(wsmap)
    assert got["/workspace/ponyc/src"][0] == "d" and got["/workspace/ponyc/Makefile"][1] == "l"


def test_failed_calls_say_nothing() -> None:
    wsmap = run((shell("c1", "cd /t && rm a.py"), "<returncode>1</returncode>\nrm: a.py: No such"))
    assert nodes(wsmap) == {}


def test_bounded_touched_files_kept_first() -> None:
    cfg = workspace_map.Config(max_entries=10)
    many = "".join(f"f{i}.txt\n" for i in range(50))
    wsmap = run(
        (shell("c1", "cd /p && cat a.py"), ok("x")),
        (shell("c2", "cd /p && ls"), ok(many)),
        (shell("c3", "cd /p && echo x > b.py"), ok()),
        cfg=cfg,
    )
    got = nodes(wsmap)
    assert len(got) == 10 and {"/p/a.py", "/p/b.py"} <= set(got)
    assert wsmap["evicted"] == 43  # 50 listed + 2 touched + the folder, 10 kept


def test_a_path_holding_a_secret_is_never_kept() -> None:
    key = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0" * 3
    wsmap = run((shell("c1", f"cd /p && cat {key}.txt && cat ok.py"), ok("x")))
    assert set(nodes(wsmap)) == {"/p/ok.py"}
    assert key not in orjson.dumps(wsmap).decode()


def test_each_call_is_read_once_and_messages_pass_unchanged() -> None:
    messages = [
        system(),
        user("go"),
        assistant(None, shell("c1", "cd /p && cat a.py")),
        result("c1", ok("x")),
    ]
    c = ctx(messages, now=100.0)
    first = workspace_map.apply(c, CFG)
    assert first.messages is messages
    later = [*messages, assistant("done"), user("and?")]
    again = workspace_map.apply(ctx(later, now=200.0, state=first.state), CFG)
    assert again.state is first.state  # nothing new: same state, first-seen time kept
    assert nodes(again.state.get("workspace"))["/p/a.py"][2] == 100


def test_report_says_source_size_and_tree() -> None:
    messages = [
        system(),
        user("go"),
        assistant(None, shell("c1", "cd /p && cat src/a.py")),
        result("c1", ok("x")),
    ]
    out = workspace_map.apply(ctx(messages, now=100.0), CFG)
    report = out.report["workspace"]
    assert report["source"] == "observed" and report["files"] == 1 and report["bytes"] > 0
    assert report["left_out"] == {"evicted": 0}
    assert report["tree"] == ["src/  (seen 0s ago)", "  a.py r"]
    # a request that reads nothing new: the counts, no tree (the last change's request has it)
    later = [*messages, assistant("done"), user("and?")]
    again = workspace_map.apply(ctx(later, now=160.0, state=out.state), CFG).report["workspace"]
    assert again["unchanged"] is True and "tree" not in again and "bytes" not in again
    assert again["files"] == 1


def _hidden_request(state: SessionState | None = None, more: tuple[str, ...] = ()) -> Any:
    """A long enough request read from a cold cache: inject says the working set. ``more``:
    commands of a later request (the conversation goes on after the first one's turns)."""
    messages: list[dict[str, Any]] = [system(), user("fix the failing test")]
    for i, cmd in enumerate(["cd /testbed && ls", "cd /testbed && cat pkg/core.py"]):
        out = ok("setup.py\npkg\n") if i == 0 else ok("x = 1\n")
        messages += [assistant(None, shell(f"c{i}", cmd)), result(f"c{i}", out)]
    messages += [assistant("looking"), user("go on")]
    for i, cmd in enumerate(more):
        messages += [assistant(None, shell(f"m{i}", cmd)), result(f"m{i}", ok("text\n"))]
    if more:
        messages += [assistant("read it"), user("and now?")]
    cold = CacheFacts(last_at=0.0, ttl_s=300.0)
    c = ctx(messages, now=10_000.0 * (1 + len(more)), cache=cold, state=state)
    # the lines said whatever the view shows (``seen``'s tests judge which the model can read)
    return apply_rules(c, (workspace_map, CFG), (inject, inject.Config(say_visible=True)))


def test_inject_says_project_and_folders_where_the_history_is_hidden() -> None:
    out = _hidden_request()
    block = out.messages[-1]["content"]
    assert "Project: python (setup.py) in /testbed" in block
    assert "Folders touched: pkg" in block


def test_bootstrap_picture_is_said_once_from_the_second_request() -> None:
    picture = {"lines": ["root /srv/app: python (pyproject.toml)", "tree: src/, tests/"], "ms": 3}
    hint = {workspace_map.BOOT_HINT: picture}
    rules = ((workspace_map, CFG), (inject, inject.Config()))
    messages = [system(), user("scaffold a CLI")]
    first = apply_rules(ctx(messages, now=1.0, hints=hint), *rules)
    assert first.messages is messages  # the first user message is never altered
    assert first.report["workspace"]["source"] == "bootstrap"
    assert first.report["workspace"]["bootstrap"] == {"ms": 3}
    second_in = [*messages, assistant("ok"), user("next")]
    second = apply_rules(ctx(second_in, now=2.0, state=first.state, hints=hint), *rules)
    block = second.messages[-1]["content"]
    assert "Workspace: root /srv/app: python (pyproject.toml)" in block
    assert "bootstrap" not in second.report["workspace"]  # kept once, not taken again
    # the next request: the block replayed in place, byte for byte; nothing new said
    third_in = [*second_in, assistant("done"), user("more")]
    third = apply_rules(ctx(third_in, now=3.0, state=second.state, hints=hint), *rules)
    assert third.messages[3]["content"] == block
    assert third.messages[-1] == third_in[-1]


def test_bootstrap_lines_are_redacted_and_bounded() -> None:
    secret = "AKIA" + "ABCDEFGHIJKLMNOP"
    picture = {"lines": [f"readme: key {secret}", "x" * 5000, *(["y"] * 40)]}
    lines = workspace_map.boot_lines(picture)
    assert lines is not None and secret not in lines[0]
    assert (
        len(lines) == workspace_map.MAX_BOOT_LINES and len(lines[1]) == workspace_map.MAX_BOOT_LINE
    )


def test_find_type_says_the_kind() -> None:
    wsmap = run((shell("c1", "cd /p && find src -type d"), ok("src\nsrc/pkg\n")))
    assert nodes(wsmap)["/p/src/pkg"][0] == "d"
    wsmap = run((shell("c1", "cd /p && find . -type f -name '*.md'"), ok("./docs/a.md\n")))
    assert nodes(wsmap)["/p/docs/a.md"][0] == "f"


def test_a_later_block_says_only_what_changed_in_the_map() -> None:
    first = _hidden_request()
    second = _hidden_request(first.state, ("cd /testbed && cat docs/guide.md",))
    block = second.messages[-1]["content"]
    assert "changed since its last note" in block
    assert "Folders touched: docs" in block
    assert "Project:" not in block and "pkg" not in block  # said before, unchanged


def test_a_failed_picture_is_reported_and_not_kept() -> None:
    picture = {"root": "/gone", "error": "root missing", "lines": [], "ms": 0.1}
    out = workspace_map.apply(
        ctx([system(), user("hi")], hints={workspace_map.BOOT_HINT: picture}), CFG
    )
    assert out.report["workspace"]["bootstrap"] == {
        "root": "/gone",
        "ms": 0.1,
        "error": "root missing",
    }
    assert out.state.get(workspace_map.NAMESPACE) is None
