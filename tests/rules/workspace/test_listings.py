"""rules.workspace.listings: each listing format the corpus' agents print, parsed into entries."""

from __future__ import annotations

import pytest

from rules.workspace import listings
from rules.workspace.listings import Entry
from tests.support.cpu_clock import cpu_timer

LS_LONG = """total 24
drwxr-xr-x  4 root root 4096 Nov 28 10:48 .
drwxr-xr-x  6 root root 4096 Nov 28 10:48 ..
drwxr-xr-x  2 root root 4096 Nov 28 10:48 src
-rw-r--r--  1 root root  131 Nov 28 10:48 setup.py
lrwxrwxrwx  1 root root    7 Nov 28 10:48 latest -> src
"""
LS_RECURSIVE = """pkg:
__init__.py  core.py
sub

pkg/sub:
deep.py
"""
TREE = """.
├── README.md
├── src
│   ├── app.py
│   └── util
│       └── io.py
└── tests
    └── test_app.py

3 directories, 4 files
"""
CLAUDE_LS = """- /home/u/proj/
  - README.md
  - src/
    - main.py
  - tests/
    - test_main.py

NOTE: do any of the files above seem malicious?"""
GEMINI_LS = "Directory listing for /home/u/proj:\n[DIR] src\n[DIR] tests\nREADME.md\npyproject.toml"
GIT_STATUS_LONG = """On branch feature/login
Changes not staged for commit:
  (use "git add <file>..." to update what will be committed)
\tmodified:   src/app.py
\tdeleted:    old.py

Untracked files:
  (use "git add <file>..." to include in what will be committed)
\tnotes.md

no changes added to commit (use "git add" and/or "git commit -a")
"""
GIT_STATUS_SHORT = "## main...origin/main [ahead 1]\n M src/app.py\n?? new.txt\nR  a.py -> b.py\n"


def test_ls_long_gives_kinds_and_skips_dot_entries() -> None:
    got = listings.ls_entries(LS_LONG, "/p", "/p")
    assert Entry("/p/src", "d") in got and Entry("/p/setup.py", "f") in got
    assert Entry("/p/latest", "?") in got  # a symlink: its name, not its target
    assert all(e.path not in ("/p/.", "/p/..") for e in got)


def test_ls_recursive_headers_place_entries_under_them() -> None:
    got = {e.path for e in listings.ls_entries(LS_RECURSIVE, "/p/pkg", "/p")}
    assert {"/p/pkg/__init__.py", "/p/pkg/core.py", "/p/pkg/sub", "/p/pkg/sub/deep.py"} <= got


def test_ls_classify_suffixes() -> None:
    got = listings.ls_entries("bin/  run.sh*  data.csv\n", "/p", "/p")
    assert got == [Entry("/p/bin", "d"), Entry("/p/run.sh", "f"), Entry("/p/data.csv", "?")]


def test_tree_nests_and_marks_folders() -> None:
    got = listings.tree_entries(TREE)
    assert Entry("src", "d") in got and Entry("src/util", "d") in got
    assert Entry("src/util/io.py", "?") in got and Entry("tests/test_app.py", "?") in got
    assert not any("directories" in e.path for e in got)


def test_claude_code_ls_tool() -> None:
    got = listings.claude_ls_entries(CLAUDE_LS)
    assert Entry("/home/u/proj/src", "d") in got
    assert Entry("/home/u/proj/src/main.py", "f") in got
    assert Entry("/home/u/proj/tests/test_main.py", "f") in got


def test_gemini_list_directory() -> None:
    base, got = listings.dir_listing_entries(GEMINI_LS)
    assert base == "/home/u/proj"
    assert Entry("src", "d") in got and Entry("pyproject.toml", "f") in got


def test_path_lines_skip_noise_and_prose() -> None:
    text = "./a/b.py\n./c/\nfind: './x': Permission denied\n[Command finished with exit code 0]"
    assert listings.path_lines(text) == [Entry("./a/b.py", "?"), Entry("./c", "d")]


def test_grep_hits_once_each() -> None:
    """``path:line:`` hits; a context line (``path-4-text``) is ambiguous and not read."""
    text = "src/a.py:12:def f():\nsrc/a.py:30:    f()\nlib/b.py:4:x\nlib/c.py-4-ctx\nno hit"
    assert listings.grep_hits(text) == ["src/a.py", "lib/b.py"]


@pytest.mark.parametrize(
    ("text", "branch", "dirty"),
    [
        (
            GIT_STATUS_LONG,
            "feature/login",
            (("M", "src/app.py"), ("D", "old.py"), ("??", "notes.md")),
        ),
        (GIT_STATUS_SHORT, "main", (("M", "src/app.py"), ("??", "new.txt"), ("R", "b.py"))),
        ("On branch main\nnothing to commit, working tree clean\n", "main", ()),
    ],
)
def test_git_status_forms(text: str, branch: str, dirty: tuple[tuple[str, str], ...]) -> None:
    facts = listings.git_status(text)
    assert facts.branch == branch and facts.dirty == dirty


def test_git_branch_current() -> None:
    assert listings.git_branch("  main\n* fix/bug-12\n  dev\n") == "fix/bug-12"
    assert listings.git_branch("* (HEAD detached at 1a2b3c)\n  main\n") is None


@pytest.mark.parametrize(
    "parse",
    [
        lambda t: listings.ls_entries(t, "/p", "/p"),
        listings.tree_entries,
        listings.claude_ls_entries,
        listings.path_lines,
        listings.grep_hits,
        listings.git_status,
    ],
)
def test_adversarial_output_is_read_in_bounded_time(parse) -> None:  # type: ignore[no-untyped-def]
    """Client text: a huge output, long lines of spaces, colons and tree marks."""
    nasty = ("-rw-r--r-- " + " 1" * 5000 + "\n") * 50 + ("│   " * 3000 + "\n") * 50
    nasty += ("a:" * 20_000 + "\n") * 50 + "x\n" * 1_000_000
    with cpu_timer() as took:  # this thread's CPU: the suite runs on two workers
        parse(nasty)
    assert took.seconds < 1.0
