"""A file the agent changed and then deleted or reverted is changed no longer: the scratch
``reproduce.py`` removed at the end stayed listed in "Changed files" beside the real fix (21 of
160 corpus conversations), and so did a file put back with ``git checkout --``."""

from __future__ import annotations

import pytest

from rules.context.undone_writes import undone_paths
from tests.rules.context.test_working_set import TASK, ledger_of
from tests.support.factories import assistant, call, result, shell


def _edits(*paths: str) -> list:
    out = []
    for i, p in enumerate(paths):
        out += [
            assistant(None, call(f"e{i}", "Write", file_path=p, content="x")),
            result(f"e{i}", "ok"),
        ]
    return out


@pytest.mark.parametrize(
    ("command", "left"),
    [
        ("rm /testbed/reproduce.py /testbed/edge_cases.py", ["/testbed/fix.py"]),
        ("cd /testbed && rm reproduce.py edge_cases.py", ["/testbed/fix.py"]),
        ("git checkout -- /testbed/fix.py", ["/testbed/reproduce.py", "/testbed/edge_cases.py"]),
        ("cd /testbed && git restore fix.py", ["/testbed/reproduce.py", "/testbed/edge_cases.py"]),
        (
            "git restore --staged /testbed/fix.py",
            ["/testbed/reproduce.py", "/testbed/edge_cases.py", "/testbed/fix.py"],
        ),
        ("ls /testbed", ["/testbed/reproduce.py", "/testbed/edge_cases.py", "/testbed/fix.py"]),
        # a find that deletes by name: of the changed files, those it matches
        ("cd /testbed && find . -name 'reproduce.py' -delete",
         ["/testbed/edge_cases.py", "/testbed/fix.py"]),
        ("find /testbed -maxdepth 1 -name '*_cases.py' -exec rm {} +",  # -maxdepth: not read
         ["/testbed/reproduce.py", "/testbed/edge_cases.py", "/testbed/fix.py"]),
        ("find /testbed -name '*_cases.py' -exec rm -f {} \\;",
         ["/testbed/reproduce.py", "/testbed/fix.py"]),
        ("cd /testbed && git checkout HEAD -- fix.py", ["/testbed/reproduce.py",
                                                        "/testbed/edge_cases.py"]),
        # another revision's file: changed from HEAD still (it was taken back)
        *[
            (f"cd /testbed && {c}",
             ["/testbed/reproduce.py", "/testbed/edge_cases.py", "/testbed/fix.py"])
            for c in ("git checkout HEAD~1 -- fix.py", "git checkout a1b2c3d fix.py",
                      "git restore --source=HEAD~2 fix.py", "git restore -s v1.2 fix.py")
        ],
    ],
)
def test_a_deleted_or_reverted_file_leaves_the_changed_files(command: str, left: list[str]) -> None:
    ledger = ledger_of(
        TASK,
        *_edits("/testbed/reproduce.py", "/testbed/edge_cases.py", "/testbed/fix.py"),
        assistant(None, shell("r", command)),
        result("r", "Exit code: 0"),
    )
    assert sorted(ledger["changed"]) == sorted(left)
    assert all(w["path"] in left for w in ledger["writes"])


def test_a_failed_removal_takes_nothing_back() -> None:
    ledger = ledger_of(
        TASK,
        *_edits("/testbed/reproduce.py"),
        assistant(None, shell("r", "rm /testbed/reproduce.py")),
        result("r", "rm: cannot remove '/testbed/reproduce.py': Permission denied\nExit code: 1"),
    )
    assert ledger["changed"] == ["/testbed/reproduce.py"]


def test_a_move_takes_its_source() -> None:
    assert undone_paths("mv a.py.new a.py").files == ("a.py.new",)
    assert undone_paths("git checkout HEAD -- x.py y.py").files == ("x.py", "y.py")
    assert not undone_paths("git checkout main")


FILES = ("/testbed/pkg/a.py", "/testbed/pkg/sub/b.py", "/testbed/reproduce.py")


@pytest.mark.parametrize(
    ("command", "left"),
    [
        ("git checkout .", list(FILES)),  # a folder an earlier call's cd may have chosen
        ("cd /testbed && git checkout -- .", []),
        ("git reset --hard", []),
        ("git reset --hard HEAD~1", []),
        ("cd /testbed && git restore pkg", ["/testbed/reproduce.py"]),
        ("git checkout HEAD -- /testbed/pkg/", ["/testbed/reproduce.py"]),
        ("cd /testbed/pkg && git checkout .", ["/testbed/reproduce.py"]),
        ("git checkout pkg/sub/b.py", ["/testbed/pkg/a.py", "/testbed/reproduce.py"]),
        (
            "cd /testbed && git checkout ./pkg/a.py",
            ["/testbed/pkg/sub/b.py", "/testbed/reproduce.py"],
        ),
        ("rm -rf /testbed/pkg/sub", ["/testbed/pkg/a.py", "/testbed/reproduce.py"]),
        ("git checkout main", list(FILES)),  # a branch switched to, no path
        ("git checkout -b fix/pkg", list(FILES)),
        ("git reset --soft HEAD~1", list(FILES)),
        ("git restore --staged .", list(FILES)),
        ("cd /testbed && git checkout --theirs pkg/a.py", list(FILES)),  # a merge's side chosen
        ("git restore --ours /testbed/pkg/a.py", list(FILES)),
        ("rm -rf pkg", list(FILES)),  # a relative folder of a folder the line does not name
        ("cd /testbed && python -c \"import os; os.remove('reproduce.py')\"", list(FILES[:2])),
    ],
)
def test_a_folder_or_the_tree_taken_back_takes_the_files_under_it(
    command: str, left: list[str]
) -> None:
    ledger = ledger_of(
        TASK, *_edits(*FILES), assistant(None, shell("r", command)), result("r", "Exit code: 0")
    )
    assert sorted(ledger["changed"]) == sorted(left)
    assert all(w["path"] in left for w in ledger["writes"])


@pytest.mark.parametrize(
    ("command", "now"),
    [
        ("mv /testbed/pkg/a.py /testbed/pkg/c.py", "/testbed/pkg/c.py"),
        ("cd /testbed && git mv pkg/a.py pkg/sub/", "/testbed/pkg/sub/a.py"),
        ("cd /testbed && git mv setup.cfg pyproject.cfg", "/testbed/pyproject.cfg"),  # git's rename
    ],
)
def test_a_moved_change_is_changed_under_its_new_name(command: str, now: str) -> None:
    ledger = ledger_of(
        TASK, *_edits(*FILES), assistant(None, shell("r", command)), result("r", "Exit code: 0")
    )
    assert now in ledger["changed"]
    assert "/testbed/pkg/a.py" not in ledger["changed"] or "setup.cfg" in command
    assert ledger["writes"][-1]["path"] == now


@pytest.mark.parametrize(
    "command",
    [
        "mv /tmp/a.log /tmp/b.log",
        "cd /testbed && mv node_modules node_modules.bak",
        # a glob's moves: which files, only the shell knows (``docs/ui/apple/*.jpg`` was listed)
        "cd /testbed/docs && git mv *.jpg ui/apple/",
        "cd /testbed && git mv pkg/*.py pkg/sub/",
    ],
)
def test_a_move_of_what_the_agent_did_not_change_changes_nothing(command: str) -> None:
    ledger = ledger_of(
        TASK, *_edits(*FILES), assistant(None, shell("r", command)), result("r", "Exit code: 0")
    )
    assert sorted(ledger["changed"]) == sorted(FILES)


def test_deep_paths_and_many_names_take_linear_time() -> None:
    import time

    from rules.context.undone_writes import Undone, without

    deep = ["/r/" + "/".join("d" * 1 for _ in range(2_000)) + f"/f{i}.py" for i in range(20)]
    names = Undone(files=tuple(f"q{i}" for i in range(256)), folders=("pkg", "/r/x"))
    started = time.thread_time()
    assert without(deep, names) == deep
    assert time.thread_time() - started < 0.5  # 18 s a call before


def _patch(call_id: str, body: str) -> list:
    patch = f"*** Begin Patch\n{body}*** End Patch\n"
    return [
        assistant(None, call(call_id, "apply_patch", input=patch)),
        result(call_id, "Success. Updated the following files:\nM x"),
    ]


def test_a_file_apply_patch_deleted_or_moved_away_leaves_the_changed_files() -> None:
    """Codex's ``*** Delete File:`` is a delete, as ``rm`` is, and ``*** Move to:`` a move: the
    scratch file deleted and the source moved away were listed as changed files."""
    ledger = ledger_of(
        TASK,
        *_patch("a", "*** Add File: scratch.py\n+print(1)\n*** Add File: src/m.py\n+x = 1\n"),
        *_patch("b", "*** Delete File: scratch.py\n"),
        *_patch("c", "*** Update File: src/m.py\n*** Move to: src/n.py\n@@\n-x = 1\n+x = 2\n"),
    )
    assert ledger["changed"] == ["src/n.py"]
    assert [w["path"] for w in ledger["writes"]] == ["src/n.py"]
