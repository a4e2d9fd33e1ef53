"""track_entities on Claude Code's and Codex's tools as the chat view shows them: Bash, Write,
Edit, Read and ``is_error``; exec_command and the older shell tool (``cmd``/argv, ``workdir``,
the exit code in Codex's output header); apply_patch (add, update, move, delete), however sent."""

from __future__ import annotations

from typing import Any

import pytest

from rules.activity.file_tools import call_succeeded, load_tools, succeeded
from rules.activity.shell_parse import analyse, load_verbs
from rules.base import SessionState
from rules.entities import track_entities
from tests.support.factories import assistant, call, ctx, result, system, user

C, D, M, MV, R = "create", "delete", "modify", "move", "read"
F, DIR = "file", "folder"

PATCH = (
    "*** Begin Patch\n"
    "*** Add File: a/b.py\n+print('hi')\n"
    "*** Update File: c.py\n*** Move to: d.py\n@@\n-x\n+y\n"
    "*** Update File: u.py\n@@\n-x\n+y\n"
    "*** Delete File: e.py\n"
    "*** End Patch"
)
PATCH_OK = (
    "Exit code: 0\nWall time: 0 seconds\nOutput:\n"
    "Success. Updated the following files:\nA a/b.py\nM d.py\nM u.py\nD e.py\n"
)


def codex(body: str = "", code: int | None = 0) -> str:
    status = (
        f"Process exited with code {code}"
        if code is not None
        else "Process running with session ID 3"
    )
    head = f"Chunk ID: 1a2b\nWall time: 0.0102 seconds\n{status}\nOriginal token count: 0"
    return f"{head}\nOutput:\n{body}"


def failed(content: str) -> dict[str, Any]:
    """A tool result the Anthropic adapter flagged ``is_error: true``."""
    return {"role": "tool", "tool_call_id": "", "content": content, "is_error": True}


# (name, arguments, result: text or a message dict without its id) per step
Step = tuple[str, dict[str, Any], Any]


def convo(*steps: Step) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [system(), user("go")]
    for i, (name, args, res) in enumerate(steps):
        cid = f"c{i}"
        msgs.append(assistant(None, call(cid, name, **args)))
        msgs.append({**res, "tool_call_id": cid} if isinstance(res, dict) else result(cid, res))
    msgs.append(user("and now?"))
    return msgs


def tracked(*steps: Step, state: SessionState | None = None) -> list[tuple[str, ...]]:
    out = track_entities.apply(ctx(convo(*steps), now=1000.0, state=state), track_entities.Config())
    return [
        (e["action"], e["type"], e["path"], *([e["from"]] if "from" in e else []))
        for e in out.state.get("entities") or []
    ]


CASES: list[tuple[str, list[Step], list[tuple[str, ...]]]] = [
    # ----- Claude Code -----
    (
        "bash",
        [("Bash", {"command": "mkdir -p /w/pkg && touch /w/pkg/__init__.py"}, "")],
        [(C, DIR, "/w/pkg"), (C, F, "/w/pkg/__init__.py")],
    ),
    (
        "bash cd persists",
        [("Bash", {"command": "cd /w"}, ""), ("Bash", {"command": "rm old.txt"}, "")],
        [(D, F, "/w/old.txt")],
    ),
    (
        "bash exit code",
        [("Bash", {"command": "mkdir /x"}, "Exit code 1\nmkdir: /x: Permission denied")],
        [],
    ),
    ("bash is_error", [("Bash", {"command": "mkdir y"}, failed("Exit code 1"))], []),
    ("bash is_error without text", [("Bash", {"command": "mkdir y"}, failed(""))], []),
    (
        "write",
        [
            (
                "Write",
                {"file_path": "/w/a.py", "content": "x"},
                "File created successfully at: /w/a.py",
            )
        ],
        [(C, F, "/w/a.py")],
    ),
    (
        "write twice",
        [
            ("Write", {"file_path": "/w/a.py", "content": "x"}, ""),
            ("Write", {"file_path": "/w/a.py", "content": "y"}, ""),
        ],
        [(C, F, "/w/a.py"), (M, F, "/w/a.py")],
    ),
    (
        "edit",
        [
            (
                "Edit",
                {"file_path": "/w/a.py", "old_string": "a", "new_string": "b"},
                "The file /w/a.py has been updated.",
            )
        ],
        [(M, F, "/w/a.py")],
    ),
    (
        "edit replace_all",
        [
            (
                "Edit",
                {"file_path": "/w/a.py", "old_string": "a", "new_string": "b", "replace_all": True},
                "",
            )
        ],
        [(M, F, "/w/a.py")],
    ),
    (
        "edit is_error",
        [
            (
                "Edit",
                {"file_path": "/w/a.py", "old_string": "a", "new_string": "b"},
                failed("<tool_use_error>File has not been read yet.</tool_use_error>"),
            )
        ],
        [],
    ),
    (
        "read",
        [("Read", {"file_path": "/w/a.py", "offset": 1, "limit": 5}, "     1\tx")],
        [(R, F, "/w/a.py")],
    ),
    ("read is_error", [("Read", {"file_path": "/w/zz.py"}, failed("File does not exist."))], []),
    # ----- Codex exec_command -----
    (
        "exec workdir",
        [("exec_command", {"cmd": "mkdir out && touch out/a.txt", "workdir": "/repo"}, codex())],
        [(C, DIR, "/repo/out"), (C, F, "/repo/out/a.txt")],
    ),
    ("exec no workdir", [("exec_command", {"cmd": "touch a.txt"}, codex())], [(C, F, "a.txt")]),
    (
        "exec relative workdir",
        [
            ("Bash", {"command": "cd /srv"}, ""),
            ("exec_command", {"cmd": "rm x.log", "workdir": "logs"}, codex()),
        ],
        [(D, F, "/srv/logs/x.log")],
    ),
    (
        "exec cd does not persist",
        [
            ("exec_command", {"cmd": "cd sub && touch a", "workdir": "/repo"}, codex()),
            ("exec_command", {"cmd": "touch b", "workdir": "/repo"}, codex()),
            ("Bash", {"command": "touch c"}, ""),
        ],
        [(C, F, "/repo/sub/a"), (C, F, "/repo/b"), (C, F, "c")],
    ),
    ("exec failed", [("exec_command", {"cmd": "mkdir d", "workdir": "/r"}, codex("", 1))], []),
    (
        "exec header decides",
        [
            (
                "exec_command",
                {"cmd": "rm -f gone.txt", "workdir": "/r"},
                codex("rm: cannot remove 'x': No such file or directory\n", 0),
            )
        ],
        [(D, F, "/r/gone.txt")],
    ),
    (
        "exec header decides failure",
        [
            (
                "exec_command",
                {"cmd": "touch t", "workdir": "/r"},
                codex("[Command finished with exit code 0]\n", 2),
            )
        ],
        [],
    ),
    (
        "exec running",
        [
            (
                "exec_command",
                {"cmd": "mkdir srv && ./serve", "workdir": "/r"},
                codex("listening\n", None),
            )
        ],
        [(C, DIR, "/r/srv")],
    ),
    ("exec is_error", [("exec_command", {"cmd": "touch t", "workdir": "/r"}, failed(codex()))], []),
    # ----- Codex's older shell tool: argv -----
    (
        "shell bash -lc",
        [
            (
                "shell",
                {"command": ["bash", "-lc", "mkdir x && mv x y"], "workdir": "/r"},
                '{"output":"","metadata":{"exit_code":0,"duration_seconds":0.1}}',
            )
        ],
        [(C, DIR, "/r/x"), (MV, DIR, "/r/y", "/r/x")],
    ),
    (
        "shell argv",
        [
            (
                "shell",
                {"command": ["mkdir", "-p", "my dir"], "workdir": "/r"},
                "Exit code: 0\nWall time: 0 seconds\nOutput:\n",
            )
        ],
        [(C, DIR, "/r/my dir")],
    ),
    (
        "shell argv failed",
        [
            (
                "shell",
                {"command": ["rm", "x"], "workdir": "/r"},
                '{"output":"rm: x: No such file","metadata":{"exit_code":1}}',
            )
        ],
        [],
    ),
    # ----- apply_patch -----
    (
        "patch",
        [("apply_patch", {"input": PATCH}, PATCH_OK)],
        [(C, F, "a/b.py"), (MV, F, "d.py", "c.py"), (M, F, "u.py"), (D, F, "e.py")],
    ),
    (
        "patch plain success",
        [("apply_patch", {"patch": PATCH}, "Success. Updated the following files:")],
        [(C, F, "a/b.py"), (MV, F, "d.py", "c.py"), (M, F, "u.py"), (D, F, "e.py")],
    ),
    (
        "patch tracked cwd",
        [("Bash", {"command": "cd /w"}, ""), ("apply_patch", {"input": PATCH}, PATCH_OK)],
        [(C, F, "/w/a/b.py"), (MV, F, "/w/d.py", "/w/c.py"), (M, F, "/w/u.py"), (D, F, "/w/e.py")],
    ),
    (
        "patch add over known file",
        [
            ("Bash", {"command": "touch /w/n.py"}, ""),
            (
                "apply_patch",
                {"input": "*** Begin Patch\n*** Add File: /w/n.py\n+x\n*** End Patch"},
                PATCH_OK,
            ),
        ],
        [(C, F, "/w/n.py"), (M, F, "/w/n.py")],
    ),
    (
        "patch failed",
        [
            (
                "apply_patch",
                {"input": PATCH},
                "apply_patch verification failed: Failed to find expected lines in c.py",
            )
        ],
        [],
    ),
    (
        "patch exit 1",
        [
            (
                "apply_patch",
                {"input": PATCH},
                "Exit code: 1\nWall time: 0 seconds\nOutput:\nerror: invalid hunk",
            )
        ],
        [],
    ),
    ("patch no evidence", [("apply_patch", {"input": PATCH}, "")], []),
    ("patch is_error", [("apply_patch", {"input": PATCH}, failed(PATCH_OK))], []),
    (
        "patch in argv",
        [("shell", {"command": ["apply_patch", PATCH], "workdir": "/r"}, PATCH_OK)],
        [(C, F, "/r/a/b.py"), (MV, F, "/r/d.py", "/r/c.py"), (M, F, "/r/u.py"), (D, F, "/r/e.py")],
    ),
    (
        "patch heredoc",
        [
            (
                "exec_command",
                {"cmd": f"cd sub && apply_patch <<'EOF'\n{PATCH}\nEOF\n", "workdir": "/r"},
                codex("Success.\n"),
            )
        ],
        [
            (C, F, "/r/sub/a/b.py"),
            (MV, F, "/r/sub/d.py", "/r/sub/c.py"),
            (M, F, "/r/sub/u.py"),
            (D, F, "/r/sub/e.py"),
        ],
    ),
]


@pytest.mark.parametrize(("steps", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_tracking(steps: list[Step], expected: list[tuple[str, ...]]) -> None:
    assert tracked(*steps) == expected


def test_tracking_is_idempotent_and_leaves_messages_alone() -> None:
    msgs = convo(
        ("apply_patch", {"input": PATCH}, PATCH_OK),
        ("exec_command", {"cmd": "mkdir x", "workdir": "/r"}, codex()),
    )
    first = track_entities.apply(ctx(msgs, now=1000.0), track_entities.Config())
    assert first.messages is msgs
    again = track_entities.apply(ctx(msgs, now=1010.0, state=first.state), track_entities.Config())
    assert again.state == first.state and again.report["entities"] == []


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        (
            "Chunk ID: 1\nWall time: 0.1 seconds\nProcess exited with code 0\nOutput:\nError: x",
            True,
        ),
        (
            "Chunk ID: 1\nWall time: 0.1 seconds\nProcess exited with code 1\nOutput:\nall good",
            False,
        ),
        ("Chunk ID: 1\nWall time: 0.1 seconds\nProcess running with session ID 4\nOutput:\n", True),
        (
            "Chunk ID: 1\nProcess running with session ID 4\nOutput:\nbash: x: command not found",
            False,
        ),
        ("Exit code 2\nls: cannot access 'x'", False),  # Claude Code's Bash
        ('{"output":"x","metadata":{"exit_code":0}}', True),
        ('{"output":"x","metadata":{"exit_code":1}}', False),
    ],
)
def test_success_detection(text: str, ok: bool) -> None:
    assert succeeded(load_tools(), text) is ok


def test_is_error_always_fails() -> None:
    tools = load_tools()
    assert call_succeeded(tools, "Read", {"file_path": "/a"}, "fine", is_error=False)
    assert not call_succeeded(tools, "Read", {"file_path": "/a"}, "fine", is_error=True)


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("bash -lc 'mkdir a'", [(C, DIR, "/w/a")]),
        ("bash -ic 'touch b'", [(C, F, "/w/b")]),
        ("zsh -l -c 'rm c'", [(D, F, "/w/c")]),
        ("bash --login script.sh", []),
    ],
)
def test_login_shells_run_their_script(command: str, expected: list[tuple[str, ...]]) -> None:
    outcome = analyse(command, "/w", load_verbs())
    assert [(e.action, e.type, e.path) for e in outcome.effects] == expected


def test_claude_code_cwd_reset_is_followed() -> None:
    reset = "x\nShell cwd was reset to /home/me/project\n"
    steps: list[Step] = [
        ("Bash", {"command": "cd /tmp && ls"}, reset),
        ("Bash", {"command": "touch here.txt"}, ""),
    ]
    assert tracked(*steps) == [(C, F, "/home/me/project/here.txt")]
