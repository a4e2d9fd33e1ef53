"""Claude Code's and Codex's tools as the chat view shows them (see the protocol adapters): the
Codex output header, apply_patch parsing, argv commands, how observations key each tool (prune's
supersede), exit codes and is_error, diagnostics under the header, and the working set."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rules.activity import diagnostics
from rules.activity.agent_tools import (
    MAX_PATCH_FILES,
    PatchOp,
    argv_script,
    cell_script,
    command_value,
    output_body,
    output_header,
    parse_patch,
    patch_in_script,
    patch_succeeded,
)
from rules.activity.observations import Action, classify, exit_code, observations
from rules.context import prune_stages, working_set
from tests.support.cpu_clock import cpu_timer
from tests.support.factories import assistant, call, ctx, result, user

PATCH = (
    "*** Begin Patch\n"
    "*** Add File: a/b.py\n"
    "+print('hi')\n"
    "*** Update File: c.py\n"
    "*** Move to: d.py\n"
    "@@ def f():\n"
    "-    return 1\n"
    "+    return 2\n"
    "*** Update File: u.py\n"
    "@@\n"
    " x = 1\n"
    "-y = 2\n"
    "+y = 3\n"
    "*** End of File\n"
    "*** Delete File: e.py\n"
    "*** End Patch"
)
PATCH_OPS = (
    PatchOp("create", "a/b.py"),
    PatchOp("move", "d.py", "c.py"),
    PatchOp("modify", "u.py"),
    PatchOp("delete", "e.py"),
)
CODEX_OK = (
    "Chunk ID: 1a2b\nWall time: 0.0102 seconds\nProcess exited with code 0\n"
    "Original token count: 3\nOutput:\nhello\n"
)
PATCH_OK = (
    "Exit code: 0\nWall time: 0 seconds\nOutput:\n"
    "Success. Updated the following files:\nA a/b.py\nM c.py\nD e.py\n"
)
PYTEST_FAIL = (
    "tests/test_calc.py F\n"
    "FAILED tests/test_calc.py::test_div - assert 2.0 == 3\n"
    "========================= 1 failed, 2 passed in 0.05s ==========================\n"
)


def codex_output(body: str, code: int | None = 0) -> str:
    status = (
        f"Process exited with code {code}"
        if code is not None
        else "Process running with session ID 7"
    )
    return (
        f"Chunk ID: 9f\nWall time: 1.2000 seconds\n{status}\n"
        f"Original token count: {len(body) // 4}\nOutput:\n{body}"
    )


# ----- the Codex output header -----


@pytest.mark.parametrize(
    ("text", "code", "body"),
    [
        (CODEX_OK, 0, "hello\n"),
        (codex_output("boom\n", 2), 2, "boom\n"),
        (codex_output("partial\n", None), None, "partial\n"),
        ("Chunk ID: a\nWall time: 0.1 seconds\nProcess exited with code 0\nOutput:\n", 0, ""),
        (PATCH_OK, 0, "Success. Updated the following files:\nA a/b.py\nM c.py\nD e.py\n"),
        ("Exit code: 1\nWall time: 3 seconds\nTotal output lines: 9\nOutput:\nx", 1, "x"),
        ("Exit code: 1\nsomething went wrong", 1, "something went wrong"),  # no Output: line
        ("Exit code: 127", 127, ""),
        ("Exit code: 0\r\nWall time: 0 seconds\r\nOutput:\r\nok", 0, "ok"),
        ('{"output":"done\\n","metadata":{"exit_code":1,"duration_seconds":0.5}}', 1, "done\n"),
        ('{"output":"done","metadata":{}}', None, "done"),
    ],
)
def test_output_header(text: str, code: int | None, body: str) -> None:
    header = output_header(text)
    assert header is not None
    assert (header.exit_code, header.body) == (code, body)
    assert output_body(text) == body


@pytest.mark.parametrize(
    "text",
    [
        "",
        "hello",
        "Exit code 1\nTraceback ...",  # Claude Code's Bash: read by the exit-code patterns
        " Chunk ID: 1\nOutput:\n",  # not at the very start
        '{"output": 1}',
        '{"output":"x"',  # cut JSON
        "Wall time: " + "9" * 500 + "\nOutput:\nx",  # a line too long for a header
    ],
)
def test_not_a_header(text: str) -> None:
    header = output_header(text)
    assert header is None or header.exit_code is None


def test_header_lines_are_bounded() -> None:
    text = "Wall time: 1 seconds\n" * 50 + "Output:\nx"
    header = output_header(text)
    assert header is not None and header.exit_code is None
    assert header.body.startswith("Wall time")  # stopped after the first few lines


# ----- apply_patch -----


@pytest.mark.parametrize(
    ("text", "ops"),
    [
        (PATCH, PATCH_OPS),
        ("*** Begin Patch\n*** Add File: n.py\n+x\n*** End Patch\n", (PatchOp("create", "n.py"),)),
        (
            "*** Begin Patch\n*** Delete File: old.txt\n*** End Patch",
            (PatchOp("delete", "old.txt"),),
        ),
        (
            "*** Begin Patch\n*** Update File: src/m.rs\n*** Move to: src/n.rs\n*** End Patch",
            (PatchOp("move", "src/n.rs", "src/m.rs"),),
        ),
        # a Move to: line only right after its Update File: line
        (
            "*** Begin Patch\n*** Update File: a.py\n@@\n-a\n+b\n*** Move to: z.py\n*** End Patch",
            (PatchOp("modify", "a.py"),),
        ),
        # content lines holding markers are content (+, - or a blank first)
        (
            "*** Begin Patch\n*** Add File: doc.md\n+*** Delete File: x\n+*** Add File: y\n"
            "*** Update File: t.txt\n@@\n *** Add File: ctx\n-*** Update File: q\n+z\n"
            "*** End Patch",
            (PatchOp("create", "doc.md"), PatchOp("modify", "t.txt")),
        ),
        # headers after *** End Patch, or before *** Begin Patch, are not read
        (
            "*** Add File: before.py\n*** Begin Patch\n*** Add File: in.py\n+x\n*** End Patch\n"
            "*** Add File: after.py\n",
            (PatchOp("create", "in.py"),),
        ),
        # blanks around markers and paths; CRLF line ends; a file named twice counts once
        (
            "  *** Begin Patch  \r\n*** Update File:  a b.py \r\n@@\r\n-x\r\n+y\r\n"
            "*** Update File: a b.py\r\n@@\r\n-y\r\n+z\r\n*** End Patch\r\n",
            (PatchOp("modify", "a b.py"),),
        ),
        ("*** Add File: x.py\n+x\n", ()),  # no *** Begin Patch: Codex refuses it
        ("*** Begin Patch\n*** Add File: \n+x\n*** End Patch", ()),  # no path
        ("*** Begin Patch", ()),
        ("", ()),
        ("*** Begin Patch\n*** Update File: last.py", (PatchOp("modify", "last.py"),)),
    ],
)
def test_parse_patch(text: str, ops: tuple[PatchOp, ...]) -> None:
    assert parse_patch(text) == ops


def test_patch_files_are_capped() -> None:
    text = "*** Begin Patch\n" + "".join(f"*** Delete File: f{i}\n" for i in range(5000))
    assert len(parse_patch(text)) == MAX_PATCH_FILES


def test_large_patch_is_linear() -> None:
    body = "".join(f"+line {i} *** not a header\n" for i in range(120_000))  # ~3.3 MB
    text = f"*** Begin Patch\n*** Add File: big.txt\n{body}*** Delete File: gone\n*** End Patch"
    with cpu_timer() as took:
        ops = parse_patch(text)
    assert ops == (PatchOp("create", "big.txt"), PatchOp("delete", "gone"))
    assert took.seconds < 1.0


_MARKERS = st.sampled_from(
    [
        "*** Begin Patch", "*** End Patch", "*** Add File: ", "*** Update File: ",
        "*** Delete File: ", "*** Move to: ", "*** End of File", "@@", "+", "-", " ", "\n",
        "\r\n", "a.py", "*** ", "***", "<<'EOF'", "apply_patch", "EOF", "\x00", "é",
    ]
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(_MARKERS, st.text(max_size=12)), max_size=40).map("".join))
def test_patch_parsing_never_raises(text: str) -> None:
    ops = parse_patch(text)
    assert all(op.action in ("create", "modify", "move", "delete") and op.path for op in ops)
    assert all(op.source for op in ops if op.action == "move")
    patch_succeeded(text)
    output_header(text)
    patch_in_script(text)
    classify("apply_patch", json.dumps({"input": text}))
    classify("exec_command", json.dumps({"cmd": text, "workdir": "/w"}))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_never_raises(text: str) -> None:
    parse_patch(text)
    parse_patch("*** Begin Patch\n" + text)
    output_header(text)
    output_header("Exit code: " + text)
    patch_succeeded(text)
    diagnostics.parse("Chunk ID: 1\n" + text, None)


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        (PATCH_OK, True),
        ("Success. Updated the following files:\nA x.py\n", True),
        (
            "Exit code: 1\nWall time: 0 seconds\nOutput:\nFailed to find expected lines in c.py",
            False,
        ),
        ("apply_patch verification failed: Failed to find expected lines in /w/c.py", False),
        ("Exit code: 0\nWall time: 0 seconds\nOutput:\n", True),  # the exit code decides
        ("", False),  # no evidence of success
        ("error: invalid patch", False),
        ("Done", False),
    ],
)
def test_patch_success(text: str, ok: bool) -> None:
    assert patch_succeeded(text) is ok


@pytest.mark.parametrize(
    ("script", "found"),
    [
        (f"apply_patch <<'EOF'\n{PATCH}\nEOF\n", True),
        (f"cd sub && apply_patch <<EOF\n{PATCH}\nEOF", True),
        (f"cat > p.txt <<'EOF'\n{PATCH}\nEOF", False),  # writing a patch to a file
        (f"echo '{PATCH}'", False),  # the marker not at a line start
        ("apply_patch <<'EOF'\nhello\nEOF", False),
    ],
)
def test_patch_in_script(script: str, found: bool) -> None:
    assert (patch_in_script(script) is not None) is found


# ----- argv commands -----


@pytest.mark.parametrize(
    ("value", "command"),
    [
        (["bash", "-lc", "mkdir x && cd x"], "mkdir x && cd x"),
        (["/bin/zsh", "-c", "ls"], "ls"),
        (["bash", "-lc"], "bash -lc"),
        (["mkdir", "-p", "a b"], "mkdir -p 'a b'"),
        (["ls -la"], "ls -la"),
        ("pytest -q", "pytest -q"),
        ("   ", None),
        ([], None),
        (["ls", 1], None),
        (None, None),
    ],
)
def test_command_value(value: Any, command: str | None) -> None:
    assert command_value(value) == command


def test_argv_script_quotes_back() -> None:
    assert argv_script(["touch", "it's.txt"]) == "touch 'it'\"'\"'s.txt'"


# ----- observations: what prune and the working set see -----

R, W, L, RUN, OTHER = "read", "write", "list", "run", "other"


@pytest.mark.parametrize(
    ("name", "args", "kind", "target", "writes"),
    [
        # Claude Code
        ("Bash", {"command": "pytest -q", "description": "tests"}, RUN, "pytest -q", ()),
        ("Bash", {"command": "cat src/a.py"}, R, "src/a.py", ()),
        ("Write", {"file_path": "/w/a.py", "content": "x"}, W, "/w/a.py", ("/w/a.py",)),
        (
            "Edit",
            {"file_path": "/w/a.py", "old_string": "a", "new_string": "b"},
            W,
            "/w/a.py",
            ("/w/a.py",),
        ),
        ("Read", {"file_path": "/w/a.py", "offset": 10, "limit": 20}, R, "/w/a.py", ()),
        # Codex exec_command: the workdir is part of a run's and a listing's key
        (
            "exec_command",
            {"cmd": "pytest -q", "workdir": "/repo"},
            RUN,
            "cd /repo && pytest -q",
            (),
        ),
        ("exec_command", {"cmd": "pytest -q"}, RUN, "pytest -q", ()),
        ("exec_command", {"cmd": "ls src", "workdir": "/repo"}, L, "ls /repo/src", ()),
        ("exec_command", {"cmd": "ls", "workdir": "/repo"}, L, "ls /repo", ()),
        ("exec_command", {"cmd": "ls /etc", "workdir": "/repo"}, L, "ls /etc", ()),
        (
            "exec_command",
            {"cmd": "find . -name '*.py'", "workdir": "/my repo"},
            L,
            "cd '/my repo' && find . -name '*.py'",
            (),
        ),
        # reads and writes keep paths as written: apply_patch names them relative too
        ("exec_command", {"cmd": "sed -n '1,80p' src/a.py", "workdir": "/repo"}, R, "src/a.py", ()),
        (
            "exec_command",
            {"cmd": "cat > notes.md <<'EOF'\nhi\nEOF", "workdir": "/repo"},
            W,
            "notes.md",
            ("notes.md",),
        ),
        # the older shell tool: argv
        ("shell", {"command": ["bash", "-lc", "cat ./x.py"], "workdir": "/r"}, R, "x.py", ()),
        ("shell", {"command": ["cargo", "test"], "workdir": "/r"}, RUN, "cd /r && cargo test", ()),
        # apply_patch, however it is sent
        (
            "apply_patch",
            {"input": PATCH},
            W,
            "a/b.py",
            ("a/b.py", "c.py", "d.py", "u.py", "e.py"),
        ),
        ("apply_patch", {"patch": PATCH}, W, "a/b.py", ("a/b.py", "c.py", "d.py", "u.py", "e.py")),
        (
            "shell",
            {"command": ["apply_patch", PATCH], "workdir": "/r"},
            W,
            "a/b.py",
            ("a/b.py", "c.py", "d.py", "u.py", "e.py"),
        ),
        (
            "exec_command",
            {"cmd": f"apply_patch <<'EOF'\n{PATCH}\nEOF\n", "workdir": "/r"},
            W,
            "a/b.py",
            ("a/b.py", "c.py", "d.py", "u.py", "e.py"),
        ),
        ("apply_patch", {"input": "*** Begin Patch\n*** End Patch"}, OTHER, "", ()),
    ],
)
def test_classify(
    name: str, args: dict[str, Any], kind: str, target: str, writes: tuple[str, ...]
) -> None:
    action = classify(name, json.dumps(args))
    assert (action.kind, action.target, action.writes) == (kind, target, writes)
    assert isinstance(action, Action) and action.tool == name


def test_shell_command_keeps_the_script_for_read_ranges() -> None:
    action = classify("shell", json.dumps({"command": ["bash", "-lc", "sed -n '5,9p' a.py"]}))
    assert action.command == "sed -n '5,9p' a.py"
    assert prune_stages._shell_range(action.command) == (5, 9)


@pytest.mark.parametrize(
    ("text", "code"),
    [
        (CODEX_OK, 0),
        (codex_output("[Command finished with exit code 0]\n", 3), 3),  # the header decides
        (codex_output("<returncode>4</returncode>\n", None), 4),  # still running: the output
        (PATCH_OK, 0),
        ("Exit code 1\nnpm ERR! missing script", 1),  # Claude Code's Bash
        ("ok", None),
        ('{"output":"x","metadata":{"exit_code":5}}', 5),
    ],
)
def test_exit_code(text: str, code: int | None) -> None:
    assert exit_code(text) == code


def _obs_of(*msgs: dict[str, Any]) -> list[Any]:
    return observations(list(msgs))


def test_is_error_and_failed_patches_mark_the_observation() -> None:
    msgs = [
        user("go"),
        assistant(
            None,
            call("e1", "Edit", file_path="/w/a.py", old_string="x", new_string="y"),
            call("p1", "apply_patch", input=PATCH),
            call("p2", "apply_patch", input=PATCH),
            call("r1", "Read", file_path="/w/a.py"),
        ),
        {
            **result("e1", "<tool_use_error>String to replace not found</tool_use_error>"),
            "is_error": True,
        },
        result("p1", "apply_patch verification failed: Failed to find expected lines"),
        result("p2", PATCH_OK),
        result("r1", "1\tx"),
    ]
    assert [(o.call_id, o.failed) for o in _obs_of(*msgs)] == [
        ("e1", True),
        ("p1", True),
        ("p2", False),
        ("r1", False),
    ]


def _supersede(*msgs: dict[str, Any]) -> list[tuple[int, str]]:
    messages = list(msgs)
    return prune_stages.supersede(observations(messages), set(), messages)


def test_supersede_keys_claude_code_tools() -> None:
    msgs = [
        user("go"),
        assistant(None, call("r1", "Read", file_path="/w/a.py")),
        result("r1", "1\told"),
        assistant(None, call("r2", "Read", file_path="/w/b.py", offset=1, limit=10)),
        result("r2", "1\tb"),
        assistant(None, call("r3", "Read", file_path="/w/b.py")),
        result("r3", "1\tb\n2\tc"),
        assistant(None, call("e1", "Edit", file_path="/w/a.py", old_string="o", new_string="n")),
        result("e1", "The file /w/a.py has been updated."),
        assistant(None, call("b1", "Bash", command="pytest -q")),
        result("b1", "Exit code 1\n1 failed"),
        assistant(None, call("b2", "Bash", command="pytest  -q")),
        result("b2", "1 passed"),
    ]
    superseded = {msgs[i]["tool_call_id"]: why for i, why in _supersede(*msgs)}
    # the Edit changed part of a.py: the read still shows the rest, so it stays
    assert set(superseded) == {"r2", "b1"}
    assert "read" in superseded["r2"]
    whole = [*msgs, assistant(None, call("w1", "Write", file_path="/w/a.py", content="n\n")),
             result("w1", "File created")]  # fmt: skip
    rewritten = {whole[i]["tool_call_id"]: why for i, why in _supersede(*whole)}
    assert "write" in rewritten["r1"]


def test_supersede_keys_codex_tools() -> None:
    def ex(cid: str, cmd: str, wd: str = "/repo") -> dict[str, Any]:
        return assistant(None, call(cid, "exec_command", cmd=cmd, workdir=wd))

    patch = "*** Begin Patch\n*** Update File: src/a.py\n@@\n-x\n+y\n*** End Patch"
    msgs = [
        user("go"),
        ex("s1", "sed -n '1,50p' src/a.py"),
        result("s1", codex_output("x\n")),
        ex("t1", "pytest -q"),
        result("t1", codex_output(PYTEST_FAIL, 1)),
        ex("t2", "pytest -q", "/repo/sub"),  # another directory: another run
        result("t2", codex_output(PYTEST_FAIL, 1)),
        ex("l1", "ls src"),
        result("l1", codex_output("a.py\n")),
        assistant(None, call("p1", "apply_patch", input=patch)),
        result("p1", PATCH_OK),
        ex("t3", "pytest -q"),
        result("t3", codex_output("1 passed\n")),
        ex("l2", "ls", "/repo/src"),
        result("l2", codex_output("a.py\n")),
    ]
    superseded = {msgs[i]["tool_call_id"] for i, _ in _supersede(*msgs)}
    assert superseded == {"t1", "l1"}  # the patch changed part of a.py: its read stays


def test_diagnostics_read_the_output_after_the_header() -> None:
    outcome = diagnostics.parse(codex_output(PYTEST_FAIL, 1), None)
    assert outcome.verdict == "fail" and outcome.is_test_failure
    assert [d["file"] for d in outcome.diagnostics] == ["tests/test_calc.py"]
    assert diagnostics.parse(codex_output("", 0), None).verdict == "pass"  # from the header
    assert diagnostics.parse(codex_output("", 2), None).verdict == "fail"
    # the header itself is never a diagnostic, whatever it says
    header_only = "Chunk ID: e1\nWall time: 0.5 seconds\nProcess exited with code 1\nOutput:\n"
    assert diagnostics.parse(header_only, None).diagnostics == ()


# ----- the working set -----


def _ledger(*msgs: dict[str, Any]) -> dict[str, Any]:
    out = working_set.apply(ctx(*msgs), working_set.Config())
    ledger: dict[str, Any] = out.state.get(working_set.NAMESPACE)
    return ledger


CLAUDE = [
    user("fix it"),
    assistant(None, call("w1", "Write", file_path="/w/new.py", content="x = 1\n")),
    result("w1", "File created successfully at: /w/new.py"),
    assistant(None, call("e1", "Edit", file_path="/w/a.py", old_string="a", new_string="b")),
    result("e1", "The file /w/a.py has been updated. Here's the result of running `cat -n`"),
    assistant(None, call("e2", "Edit", file_path="/w/b.py", old_string="a", new_string="b")),
    {
        **result("e2", "<tool_use_error>File has not been read yet.</tool_use_error>"),
        "is_error": True,
    },
    assistant(None, call("b1", "Bash", command="python -m pytest -q")),
    {**result("b1", "Exit code 1\n" + PYTEST_FAIL), "is_error": True},
]
CODEX = [
    user("fix it"),
    assistant(None, call("p1", "apply_patch", input=PATCH)),
    result("p1", PATCH_OK),
    assistant(None, call("p2", "apply_patch", input=PATCH.replace("u.py", "bad.py"))),
    result("p2", "apply_patch verification failed: Failed to find expected lines in bad.py"),
    assistant(None, call("x1", "exec_command", cmd="pytest -q", workdir="/repo")),
    result("x1", codex_output(PYTEST_FAIL, 1)),
]


@pytest.mark.parametrize(
    ("messages", "changed", "open_files"),
    [
        (CLAUDE, ["/w/new.py", "/w/a.py"], ["tests/test_calc.py"]),
        # the patch's deleted file and its move's source are gone, as after rm and mv
        (CODEX, ["a/b.py", "d.py", "u.py"], ["tests/test_calc.py"]),
    ],
)
def test_working_set(
    messages: list[dict[str, Any]], changed: list[str], open_files: list[str]
) -> None:
    ledger = _ledger(*messages)
    assert ledger["changed"] == changed
    assert [w["path"] for w in ledger["writes"]] == changed[-3:]
    opened = working_set.open_diagnostics(ledger)
    assert [d["file"] for d in opened] == open_files


def test_codex_passing_run_closes_the_failure() -> None:
    passing = [
        assistant(None, call("x2", "exec_command", cmd="pytest -q", workdir="/repo")),
        result("x2", codex_output("3 passed in 0.1s\n", 0)),
    ]
    assert working_set.open_diagnostics(_ledger(*CODEX, *passing)) == []
    elsewhere = [
        assistant(None, call("x2", "exec_command", cmd="pytest -q", workdir="/other")),
        result("x2", codex_output("3 passed in 0.1s\n", 0)),
    ]
    assert len(working_set.open_diagnostics(_ledger(*CODEX, *elsewhere))) == 1


def test_a_notebook_cell_reads_as_the_command_line_doing_the_same() -> None:
    code = "import os\nout = 'plots'\n%matplotlib inline\n!mkdir -p data/raw\nos.makedirs(out)"
    assert cell_script(code) == (
        "python -c 'import os\nout = '\"'\"'plots'\"'\"''\n"
        "mkdir -p data/raw\n"
        "python -c 'os.makedirs(out)'"
    )
    assert cell_script("%cd /workspace/app\n!touch a.txt") == "cd /workspace/app\ntouch a.txt"
    assert cell_script("%%bash\nmkdir -p out\n") == "mkdir -p out\n"
    assert cell_script("%pip install requests\n\n") is None
