"""What Python run inline does to files and folders (``python_effects``), and what rsync copies
where (``rsync_copies``), read from the code and the operands alone."""

from __future__ import annotations

import posixpath
import time

import pytest

from rules.activity.python_effects import (
    MAX_EFFECTS,
    heredoc_code,
    inline_code,
    python_effects,
    reads_stdin,
)
from rules.activity.rsync_copies import rsync_copies


@pytest.mark.parametrize(
    ("code", "effects"),
    [
        ("import os; os.makedirs('out/a', exist_ok=True)", [("create", "folder", "out/a", None)]),
        ('os.mkdir("x")', [("create", "folder", "x", None)]),
        ("d = 'cache/v2'\nPath(d).mkdir(parents=True)", [("create", "folder", "cache/v2", None)]),
        ("with open('r.csv', 'w') as f: pass", [("create", "file", "r.csv", None)]),
        ("open('log.txt', mode='ab').write(b'x')", [("create", "file", "log.txt", None)]),
        ("Path('a.json').write_text('{}')", [("create", "file", "a.json", None)]),
        ("shutil.rmtree('build')", [("delete", "folder", "build", None)]),
        (
            "os.remove('a.pyc'); Path('b.tmp').unlink()",
            [("delete", "file", "a.pyc", None), ("delete", "file", "b.tmp", None)],
        ),
        ("shutil.copytree('src', 'bak/src')", [("copy", "folder", "bak/src", "src")]),
        ("shutil.copy2('a.cfg', 'a.cfg.bak')", [("copy", "file", "a.cfg.bak", "a.cfg")]),
        ("os.rename('a.txt', 'b.txt')", [("move", "guess", "b.txt", "a.txt")]),
        ("Path('old').rename('new')", [("move", "guess", "new", "old")]),
        # read, printed or unknown: nothing
        ("print(open('setup.cfg').read())", []),
        ("open(p, 'r')", []),
        ("os.makedirs(os.path.join(root, 'x'))", []),  # a path only Python computes
        ("print('os.makedirs(')", []),
        ("open('/dev/null', 'w')", []),
    ],
)
def test_what_python_does(code: str, effects: list[tuple[str, str, str, str | None]]) -> None:
    assert list(python_effects(code)) == effects


def test_effects_come_in_the_codes_order_and_are_bounded() -> None:
    code = "os.remove('b')\nos.makedirs('a')\n"
    assert [e[2] for e in python_effects(code)] == ["b", "a"]
    many = "".join(f"os.makedirs('d{i}')\n" for i in range(100))
    assert len(python_effects(many)) == MAX_EFFECTS


def test_where_the_code_is() -> None:
    assert inline_code(["python3", "-c", "x=1"]) == "x=1"
    assert inline_code(["python", "-u", "-c", "x=1"]) == "x=1"
    assert inline_code(["python", "run.py", "-c", "x"]) is None  # the script's own -c
    assert reads_stdin(["python", "-"]) and reads_stdin(["python3"])
    assert not reads_stdin(["python", "fix.py"])
    command = (
        "cat > fix.py <<'EOF'\nos.makedirs('a')\nEOF\npython fix.py\n"
        "python3 - <<EOF\nos.makedirs('b')\nEOF"
    )
    fed, scripts = heredoc_code(command)
    assert fed == ["os.makedirs('b')"]
    assert scripts == {"fix.py": "os.makedirs('a')"}


def _copies(*ops: str, known: dict[str, str] | None = None) -> list[tuple[str, str, str]]:
    types = known or {}
    return rsync_copies(
        [], list(ops), lambda p: posixpath.normpath(posixpath.join("/w", p)), types.get
    )


def test_rsync_follows_the_trailing_slash() -> None:
    assert _copies("src/", "bak/src/") == [("folder", "/w/bak/src", "/w/src")]
    assert _copies("src", "bak/") == [("folder", "/w/bak/src", "/w/src")]
    assert _copies("a.txt", "b.txt") == [("file", "/w/b.txt", "/w/a.txt")]
    assert _copies("a.txt", "out/") == [("file", "/w/out/a.txt", "/w/a.txt")]
    assert _copies("a.txt", "out", known={"/w/out": "folder"}) == [
        ("file", "/w/out/a.txt", "/w/a.txt")
    ]
    assert _copies("dist/", "deploy@web1:/srv/app/") == []  # another machine's
    assert _copies("web1:/srv/logs/", "logs/") == []
    assert _copies("only") == []


def test_a_script_run_thousands_of_times_in_a_line_is_read_once() -> None:
    from rules.activity.shell_parse import analyse, load_verbs

    code = "open('out.txt', 'w')\n" + "x = 1  # filler line of python code\n" * 600
    line = "cat > f.py <<'EOF'\n" + code + "EOF\n" + "python f.py; " * 2_000
    started = time.thread_time()
    effects = analyse(line, "/w", load_verbs()).effects
    assert time.thread_time() - started < 0.5  # 18 s for a 45 KiB line when each run read it
    assert [(e.action, e.path) for e in effects][:2] == [
        ("create", "/w/f.py"),
        ("create", "/w/out.txt"),
    ]


def test_a_name_is_read_as_bound_where_the_call_is() -> None:
    code = "path = 'data/raw.csv'\nrows = open(path).read()\npath = 'data/clean.csv'\n"
    code += "open(path, 'w').write(rows)\n"
    assert list(python_effects(code)) == [("create", "file", "data/clean.csv", None)]
    later = "os.makedirs(out)\nout = 'dist'\n"  # bound only after the call: unknown there
    assert list(python_effects(later)) == []


def test_a_heredoc_a_script_reads_as_data_is_no_code() -> None:
    fed, _ = heredoc_code(
        "python load.py <<EOF\nos.makedirs('x')\nEOF\npython3 - <<EOF\nos.mkdir('y')\nEOF"
    )
    assert fed == ["os.mkdir('y')"]


def test_an_rsync_dry_run_copies_nothing() -> None:
    resolve = lambda p: "/w/" + p  # noqa: E731
    assert rsync_copies(["-avn"], ["src/", "bak/"], resolve, {}.get) == []
    assert rsync_copies(["--dry-run"], ["src/", "bak/"], resolve, {}.get) == []
    assert rsync_copies(["-av"], ["src/", "bak/"], resolve, {}.get) == [
        ("folder", "/w/bak/", "/w/src/")
    ]
