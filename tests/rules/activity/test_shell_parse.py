"""Shell command lines -> file/folder effects: quoting, chains, cd, heredocs, redirections."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rules.activity import shell_lex, shell_parse
from rules.activity.shell_lex import split_commands, split_uncached, tokenize
from rules.activity.shell_parse import analyse, load_verbs, resolve_path
from rules.activity.system_paths import listed_exists
from rules.workspace.observe import KnownTypes

C, D, M, MV, CP, OP = "create", "delete", "modify", "move", "copy", "open"
F, DIR = "file", "folder"

# (command, cwd, expected effects as (action, type, path[, source]), expected cwd after)
CASES = [
    ("mkdir ~/Desktop/123", None, [(C, DIR, "~/Desktop/123")], None),
    ("mkdir -p a/b c", "/w", [(C, DIR, "/w/a/b"), (C, DIR, "/w/c")], "/w"),
    ("mkdir -m 755 out", "/w", [(C, DIR, "/w/out")], "/w"),
    ('mkdir "my folder"', "/w", [(C, DIR, "/w/my folder")], "/w"),
    ("mkdir 'x y' z\\ w", "/w", [(C, DIR, "/w/x y"), (C, DIR, "/w/z w")], "/w"),
    ("mkdir -- -weird", "/w", [(C, DIR, "/w/-weird")], "/w"),
    ("touch a.txt b/c.md", "/w", [(C, F, "/w/a.txt"), (C, F, "/w/b/c.md")], "/w"),
    ("touch -d yesterday stamp", "/w", [(C, F, "/w/stamp")], "/w"),
    ("rm old.log", "/w", [(D, F, "/w/old.log")], "/w"),
    ("rm -rf build", "/w", [(D, DIR, "/w/build")], "/w"),
    ("rm -r dist/app.tar.gz", "/w", [(D, F, "/w/dist/app.tar.gz")], "/w"),
    ("rm -f *.pyc", "/w", [(D, F, "/w/*.pyc")], "/w"),
    ("rmdir empty", "/w", [(D, DIR, "/w/empty")], "/w"),
    ("unlink tmp.sock", "/w", [(D, F, "/w/tmp.sock")], "/w"),
    ("cp a.py b.py", "/w", [(CP, F, "/w/b.py", "/w/a.py")], "/w"),
    (
        "cp a.py b.py lib/",
        "/w",
        [(CP, F, "/w/lib/a.py", "/w/a.py"), (CP, F, "/w/lib/b.py", "/w/b.py")],
        "/w",
    ),
    ("cp notes.md docs/", "/w", [(CP, F, "/w/docs/notes.md", "/w/notes.md")], "/w"),
    (
        "cp -t dest x.c y.c",
        "/w",
        [(CP, F, "/w/dest/x.c", "/w/x.c"), (CP, F, "/w/dest/y.c", "/w/y.c")],
        "/w",
    ),
    ("cp -r src backup", "/w", [(CP, DIR, "/w/backup", "/w/src")], "/w"),
    ("mv a.txt b.txt", "/w", [(MV, F, "/w/b.txt", "/w/a.txt")], "/w"),
    ("mv build dist", "/w", [(MV, DIR, "/w/dist", "/w/build")], "/w"),
    ("git mv docs/a.md docs/b.md", "/w", [(MV, F, "/w/docs/b.md", "/w/docs/a.md")], "/w"),
    ("git rm -r old", "/w", [(D, DIR, "/w/old")], "/w"),
    ("git rm --cached secret.env", "/w", [], "/w"),
    ("echo hi > out.txt", "/w", [(C, F, "/w/out.txt")], "/w"),
    ("echo more >> log.txt 2>&1", "/w", [(C, F, "/w/log.txt")], "/w"),
    ("make 2> err.log", "/w", [(C, F, "/w/err.log")], "/w"),
    ("ls > /dev/null 2>&1", "/w", [], "/w"),
    ("echo hi | tee a.txt", "/w", [(C, F, "/w/a.txt")], "/w"),
    ("tee -a log.txt < in.txt", "/w", [(C, F, "/w/log.txt")], "/w"),
    ("sed -i 's/a/b/' x.py y.py", "/w", [(M, F, "/w/x.py"), (M, F, "/w/y.py")], "/w"),
    ("sed -i.bak -e 's/a/b/' x.py", "/w", [(M, F, "/w/x.py")], "/w"),
    ("sed -i '' 's/a/b/' x.py", "/w", [(M, F, "/w/x.py")], "/w"),
    ("sed -n '1,5p' x.py", "/w", [], "/w"),
    ("perl -pi -e 's/a/b/' conf.ini", "/w", [(M, F, "/w/conf.ini")], "/w"),
    (
        "cat > app.py <<'EOF'\nimport os\nmkdir = 1  # not a command\nrm -rf /\nEOF",
        "/w",
        [(C, F, "/w/app.py")],
        "/w",
    ),
    (
        "cat <<EOF > cfg.yaml\nkey: value\nEOF\ntouch done",
        "/w",
        [(C, F, "/w/cfg.yaml"), (C, F, "/w/done")],
        "/w",
    ),
    (
        "cat <<-END >> notes.md\n\tline\n\tEND\nrm notes.md",
        "/w",
        [(C, F, "/w/notes.md"), (D, F, "/w/notes.md")],
        "/w",
    ),
    ("cd /tmp && mkdir x", "/w", [(C, DIR, "/tmp/x")], "/tmp"),
    ("cd sub; touch f", "/w", [(C, F, "/w/sub/f")], "/w/sub"),
    ("cd .. && mkdir up", "/w/a", [(C, DIR, "/w/up")], "/w"),
    ("cd && mkdir home_dir", "/w", [(C, DIR, "~/home_dir")], "~"),
    ("cd ~/proj && touch README.md && cd - ", "/w", [(C, F, "~/proj/README.md")], "/w"),
    ("(cd sub && touch f) && touch g", "/w", [(C, F, "/w/sub/f"), (C, F, "/w/g")], "/w"),
    ("mkdir -p a && cd a && mkdir b", None, [(C, DIR, "a"), (C, DIR, "a/b")], "a"),
    ("ls missing || mkdir missing", "/w", [], "/w"),
    ("mkdir x || true", "/w", [(C, DIR, "/w/x")], "/w"),
    ("test -d out &&\n  rm -rf out", "/w", [(D, DIR, "/w/out")], "/w"),
    ("bash -c 'cd /a && rm -r old'", "/w", [(D, DIR, "/a/old")], "/w"),
    ("sudo FOO=1 mkdir /opt/app", "/w", [(C, DIR, "/opt/app")], "/w"),
    # a prefix's options, and their values, are no program (`-u` was read as the command)
    ("sudo -u www-data mkdir /srv/cache", "/w", [(C, DIR, "/srv/cache")], "/w"),
    ("sudo -E -- touch /etc/app.conf", "/w", [(C, F, "/etc/app.conf")], "/w"),
    ("nice -n 10 env -i A=1 mkdir out", "/w", [(C, DIR, "/w/out")], "/w"),
    ("for f in *.py; do cp $f backup/; done", "/w", [], "/w"),
    ("cp a.py b.py $DEST", "/w", [], "/w"),
    ('cd "$(dirname "$0")" && touch z', "/w", [(C, F, "z")], None),
    ("rm -f $TMPFILE keep.txt", "/w", [(D, F, "/w/keep.txt")], "/w"),
    ("mkdir -p $HOME/.cache/x", "/w", [(C, DIR, "~/.cache/x")], "/w"),
    ('echo "a && mkdir no" > "q.txt"', "/w", [(C, F, "/w/q.txt")], "/w"),
    ("mkdir a # mkdir b", "/w", [(C, DIR, "/w/a")], "/w"),
    ("grep -r foo . | head", "/w", [], "/w"),
    ("python -c 'import os; os.mkdir(\"x\")'", "/w", [(C, DIR, "/w/x")], "/w"),  # Python's
    ("python -c 'print(\"mkdir x\")'", "/w", [], "/w"),
    ("echo $(mkdir inside) > out", "/w", [(C, F, "/w/out")], "/w"),
    (
        "mkdir a && touch a/b && cp a/b a/c && mv a/c a/d && rm a/b",
        "/w",
        [
            (C, DIR, "/w/a"),
            (C, F, "/w/a/b"),
            (CP, F, "/w/a/c", "/w/a/b"),
            (MV, F, "/w/a/d", "/w/a/c"),
            (D, F, "/w/a/b"),
        ],
        "/w",
    ),
    (
        "mkdir out && cp report.csv out",
        "/w",
        [(C, DIR, "/w/out"), (CP, F, "/w/out/report.csv", "/w/report.csv")],
        "/w",
    ),
    ("code .", "/w/proj", [(OP, DIR, "/w/proj")], "/w/proj"),
    ("if [ ! -d logs ]; then mkdir logs; fi", "/w", [(C, DIR, "/w/logs")], "/w"),
]


def _tuples(outcome_effects: tuple) -> list[tuple]:  # type: ignore[type-arg]
    out = []
    for e in outcome_effects:
        out.append((e.action, e.type, e.path) + ((e.source,) if e.source else ()))
    return out


@pytest.mark.parametrize(
    ("command", "cwd", "effects", "cwd_after"), CASES, ids=[c[0][:40] for c in CASES]
)
def test_effects(
    command: str, cwd: str | None, effects: list[tuple[str, ...]], cwd_after: str | None
) -> None:
    outcome = analyse(command, cwd, load_verbs())
    assert _tuples(outcome.effects) == effects
    assert outcome.cwd == cwd_after


def test_table_is_large_enough() -> None:
    assert len(CASES) >= 40


# Writing is creating, also after a cd earlier in the same command (issue 14, class 4): each
# form of writing a file, with the file it must record under /x.
WRITES_AFTER_CD = [
    ("cd /x && cat > f.conf <<'EOF'\na > b\ncd /y\nEOF", "/x/f.conf"),  # the body is not run
    ("cd /x && cat > f.conf << 'EOF'\nx\nEOF", "/x/f.conf"),
    ('cd /x && cat > f.conf <<"EOF"\nx\nEOF', "/x/f.conf"),
    ("cd /x && cat <<-EOF > f.conf\n\tx\n\tEOF", "/x/f.conf"),
    ("cd /x && cat>f.conf<<EOF\nx\nEOF", "/x/f.conf"),
    ("cd /x && tee f.conf <<EOF\nx\nEOF", "/x/f.conf"),
    ("cd /x && tee f.conf > /dev/null <<EOF\nx\nEOF", "/x/f.conf"),
    ("cd /x && sudo tee f.conf <<EOF\nx\nEOF", "/x/f.conf"),
    ("cd /x && echo hi | tee -a f.conf", "/x/f.conf"),
    ("cd /x && python - <<'EOF' > f.conf\nprint(1)\nEOF", "/x/f.conf"),
    ("cd /x && echo a >> f.conf", "/x/f.conf"),
    ("cd /x && { echo a; echo b; } > f.conf", "/x/f.conf"),
    ("cd /x\ncat > f.conf <<EOF\nhi\nEOF\ncd /z", "/x/f.conf"),
    ("(cd /x && echo a > f.conf)", "/x/f.conf"),
    ("pushd /x && echo a > f.conf && popd", "/x/f.conf"),
    ("bash -c 'cd /x && echo a > f.conf'", "/x/f.conf"),
    ("cd /x && cat > f.conf <<EOF && echo done\nhi\nEOF", "/x/f.conf"),
]


@pytest.mark.parametrize(
    ("command", "path"), WRITES_AFTER_CD, ids=[c[:40] for c, _ in WRITES_AFTER_CD]
)
def test_a_write_after_cd_records_the_file_there(command: str, path: str) -> None:
    effects = _tuples(analyse(command, "/home/u", load_verbs()).effects)
    assert effects == [(C, F, path)]


def test_several_made_by_one_command_after_cd() -> None:
    """``cd src && mkdir a b``: both recorded, relative to src (resolve_refs then sees a tie)."""
    outcome = analyse("cd src && mkdir a b", "/w", load_verbs())
    assert _tuples(outcome.effects) == [(C, DIR, "/w/src/a"), (C, DIR, "/w/src/b")]


@pytest.mark.parametrize(
    ("path", "cwd", "expected"),
    [
        ("x", "/a/b", "/a/b/x"),
        ("./x/../y", "/a", "/a/y"),
        ("/abs/./p", "/a", "/abs/p"),
        ("~/x", "/a", "~/x"),
        ("rel/p", None, "rel/p"),
        ("$HOME/x", "/a", "~/x"),
    ],
)
def test_resolve_path(path: str, cwd: str | None, expected: str) -> None:
    assert resolve_path(path, cwd) == expected


def test_lexer_keeps_quoted_operators_inside_words() -> None:
    assert tokenize("echo 'a;b' \"c && d\"") == [("w", "echo"), ("w", "a;b"), ("w", "c && d")]


def test_connectors_are_recorded() -> None:
    cmds = split_commands("a && b || c; d | e")
    assert [(c.argv[0], c.connector) for c in cmds] == [
        ("a", ""),
        ("b", "&&"),
        ("c", "||"),
        ("d", ";"),
        ("e", "|"),
    ]


def test_known_folder_makes_copy_go_inside() -> None:
    outcome = analyse("cp a.txt out", "/w", load_verbs(), known={"/w/out": "folder"})
    assert _tuples(outcome.effects) == [(CP, F, "/w/out/a.txt", "/w/a.txt")]


def test_known_file_redirect_is_a_modification() -> None:
    outcome = analyse("echo x > a.txt", "/w", load_verbs(), known={"/w/a.txt": "file"})
    assert _tuples(outcome.effects) == [(M, F, "/w/a.txt")]


PIECES = [
    *"ab /.~-'\"\\$()`;&|<>#\n\t=",
    "mkdir ",
    "rm -rf ",
    "cd ",
    "cp ",
    "mv ",
    "<<EOF",
    "EOF",
    "touch ",
    "bash -c ",
    "sed -i ",
    "2>&1",
    "$(",
    "||",
    "&&",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=30).map("".join))
def test_any_text_parses_without_raising(command: str) -> None:
    outcome = analyse(command, "/w", load_verbs())
    for e in outcome.effects:
        assert e.action in {"create", "delete", "copy", "move", "modify", "open"}
        assert e.type in {"file", "folder"} and isinstance(e.path, str)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.sampled_from(PIECES), max_size=12).map("".join), max_size=6))
def test_split_commands_kept_by_text_is_the_split_afresh(commands: list[str]) -> None:
    """The readers of a request share one split per command text: the kept answer is the
    split of the text (asked again, in any order) and cannot be changed by a reader."""
    for command in [*commands, *reversed(commands)]:
        kept = split_commands(command)
        assert kept == split_uncached(command)
        assert isinstance(kept, tuple)
    if commands:
        assert split_commands(commands[0]) is split_commands(commands[0])


class _Copied:
    """What a command line's walk knew before it overlaid the caller's mapping: a copy, of the
    paths of known kind and of those listed with their kind unknown ("?")."""

    def __init__(self, base: Any) -> None:
        self.types: dict[str, str] = dict(base)
        self.untyped = {p for p in PATHS if p not in self.types and listed_exists(base, p)}
        self.set_here: set[str] = set()

    def get(self, path: str) -> str | None:
        return self.types.get(path)

    def __contains__(self, path: str) -> bool:
        return path in self.types

    def exists(self, path: str) -> bool:
        return path in self.types or path in self.untyped

    def listed_folder(self, path: str) -> bool:
        return self.get(path) is None and self.exists(path) and "." not in path.rsplit("/")[-1]

    def __setitem__(self, path: str, typ: str) -> None:
        self.types[path] = typ
        self.untyped.discard(path)
        self.set_here.add(path)

    def made(self, path: str) -> bool:
        return path in self.set_here and path in self.types

    def remove(self, path: str) -> None:
        self.types.pop(path, None)
        self.untyped.discard(path)


WORDS = ["a", "b", "a/b", "out", "x.txt", "a.txt"]
MOVES = ["mkdir -p ", "rm -rf ", "rm ", "cd ", "cp ", "cp -r ", "mv ", "touch ", "echo x > ",
         "echo x >> ",
         "git mv ", "rmdir ", "tee ", "sed -i s/a/b/ ", "cat "]  # fmt: skip
LINE = st.lists(
    st.tuples(st.sampled_from(MOVES), st.lists(st.sampled_from(WORDS), max_size=3)).map(
        lambda p: p[0] + " ".join(p[1])
    ),
    max_size=6,
).map(lambda parts: " && ".join(parts))
PATHS = [f"/w/{w}" for w in WORDS] + [f"/w/a/{w}" for w in WORDS]
KNOWN = st.dictionaries(
    st.sampled_from(PATHS),
    st.sampled_from(["file", "folder", "?"]),
    max_size=8,
)


@settings(max_examples=300, deadline=None)
@given(command=LINE, known=KNOWN, as_map=st.booleans())
def test_the_known_paths_overlaid_are_the_known_paths_copied(
    command: str, known: dict[str, str], as_map: bool
) -> None:
    """A walk reads the caller's known paths through its own additions and removals (not a
    copy of a map of hundreds): the effects are those of a walk over a copy, for a plain
    mapping and for the workspace map's nodes (whose "?" entries exist, their kind unknown)."""
    base: Any = (
        KnownTypes({p: ["d" if t == "folder" else ("?" if t == "?" else "f"), "", 0]
                    for p, t in known.items()})
        if as_map
        else {p: t for p, t in known.items() if t != "?"}
    )  # fmt: skip
    got = analyse(command, "/w", load_verbs(), base)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(shell_parse, "LineKnown", _Copied)
        want = analyse(command, "/w", load_verbs(), base)
    assert got == want


@settings(max_examples=500, deadline=None)
@given(
    st.lists(
        st.one_of(st.sampled_from(PIECES), st.text(alphabet="ab#$\\\"' \t\r\n\x0b\u00a0é")),
        max_size=30,
    ).map("".join)
)
def test_runs_of_plain_characters_are_lexed_as_one_by_one(text: str) -> None:
    """The lexer takes a run of characters that start nothing at once: the tokens are those of
    taking them one at a time (the same patterns without ``+``)."""
    got = tokenize(text)
    with pytest.MonkeyPatch.context() as m:
        for name in ("_PLAIN", "_QUOTED_PLAIN"):
            one = getattr(shell_lex, name).pattern.removesuffix("+")
            m.setattr(shell_lex, name, re.compile(one))
        want = tokenize(text)
    assert got == want


def test_the_kept_splits_are_bounded_by_what_they_hold() -> None:
    """A split of one-character commands holds ~80 bytes a character: each is charged its text
    and what its split holds, the cache at most 8 M; a split larger than that is never kept, and
    a text is read within ``MAX_COMMAND_CHARS``."""
    from rules.activity.shell_lex import MAX_COMMAND_CHARS, _split_kept, split_commands
    from rules.text_cache import charge

    _split_kept.cache_clear()
    for k in range(20):  # 20 distinct texts of ~20,000 characters, each split ~3 M held
        split_commands(f"echo {k};" + "x;" * 10_000)
    held = _split_kept.cache_chars()
    assert 0 < held <= 8_000_000
    assert held >= charge(split_commands("echo 19;" + "x;" * 10_000))  # the newest is kept
    _split_kept.cache_clear()
    longest = "x;" * (MAX_COMMAND_CHARS // 2 - 1)
    split_commands(longest)  # the longest text read: its split is kept, within the bound
    assert 0 < _split_kept.cache_chars() <= 8_000_000
    _split_kept.cache_clear()


def test_brace_expansion_is_bounded_per_line() -> None:
    """A 41 KB line of ``{a,b}{a,b}…`` words expanded each 32 ways: 42,000 effects and a second
    of the event loop in the request that first carried it. Past ``MAX_EXPANDED`` words a line,
    a word goes as written."""
    from rules.activity.shell_parse import MAX_EXPANDED

    words = 700
    outcome = analyse("mkdir " + " ".join(["{a,b}" * 6] * words), "/w", load_verbs())
    assert len(outcome.effects) <= MAX_EXPANDED + words
    assert outcome.effects[0].path == "/w/aaaaaa"  # the first words expanded as bash does
    assert outcome.effects[-1].path == "/w/" + "{a,b}" * 6  # the last as written


@pytest.mark.parametrize(
    ("command", "cwd", "expected"),
    [
        ("mv tmp/notes.txt .", "/w/app", [(MV, F, "/w/app/notes.txt", "/w/app/tmp/notes.txt")]),
        ("cp -r tmp/lib ..", "/w/app", [(CP, DIR, "/w/lib", "/w/app/tmp/lib")]),
        ("mv tmp/a.txt ~", "/w/app", [(MV, F, "~/a.txt", "/w/app/tmp/a.txt")]),
        ("mv tmp/a.txt /w", "/w/app", [(MV, F, "/w/a.txt", "/w/app/tmp/a.txt")]),
        ("cp tmp/a.txt /w/app", "/w/app", [(CP, F, "/w/app/a.txt", "/w/app/tmp/a.txt")]),
    ],
    ids=["dot", "dotdot", "home", "a-parent-of-cwd", "cwd-by-name"],
)
def test_a_copy_into_the_working_folder_or_one_that_holds_it_goes_inside(
    command: str, cwd: str, expected: list[tuple[str, ...]]
) -> None:
    """``mv notes.txt .`` was recorded as moving the file onto the working folder itself, so
    "the file I just moved" pointed at the folder."""
    outcome = analyse(command, cwd, load_verbs())
    assert _tuples(outcome.effects) == expected


def test_making_what_exists_makes_nothing() -> None:
    """``mkdir -p`` on a folder there, ``touch`` on a file there: neither was made by it."""
    known = {"/w/src": "folder", "/w/a.txt": "file"}
    outcome = analyse("mkdir -p src out && touch a.txt b.txt", "/w", load_verbs(), known=known)
    assert _tuples(outcome.effects) == [(C, DIR, "/w/out"), (C, F, "/w/b.txt")]


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("mv out /tmp", [(MV, DIR, "/tmp/out", "/w/app/out")]),
        ("mv out /var/tmp/", [(MV, DIR, "/var/tmp/out", "/w/app/out")]),
        ("cp -r src /tmp", [(CP, DIR, "/tmp/src", "/w/app/src")]),
        ("cp run.sh /usr/local/bin", [(CP, F, "/usr/local/bin/run.sh", "/w/app/run.sh")]),
        ("mv notes.txt /home/dev", [(MV, F, "/home/dev/notes.txt", "/w/app/notes.txt")]),
        # a path below them is named as written: a rename
        ("mv out /tmp/out2", [(MV, DIR, "/tmp/out2", "/w/app/out")]),
    ],
)
def test_a_copy_into_a_folder_every_system_has_goes_inside(
    command: str, expected: list[tuple[str, ...]]
) -> None:
    """``mv out /tmp`` was read as renaming ``out`` to ``/tmp``, so "the folder you just
    created" pointed at /tmp."""
    outcome = analyse(command, "/w/app", load_verbs())
    assert _tuples(outcome.effects) == expected


@pytest.mark.parametrize(
    ("command", "action"),
    [
        ("echo 'export PATH=$PATH:/opt/bin' >> /home/u/.bashrc", M),
        ("echo 'export A=1' >> ~/.zshrc", M),
        ("echo '*.log' >> .gitignore", M),
        ("echo x >> /etc/hosts", M),
        ("mkdir out && echo x >> out/.keep", C),  # its folder made by the same line
        ("echo started >> ~/app/logs/run.log", C),  # ~ is the home the project lies in
        ("echo done >> results.log", C),  # a new log in the project: made by the append
        ("echo x > /home/u/new.txt", C),  # no append: made
    ],
)
def test_an_append_to_a_dotfile_or_outside_the_project_changes_a_file_that_was_there(
    command: str, action: str
) -> None:
    """``>> ~/.bashrc`` was read as making .bashrc, so "the file you created" pointed at it."""
    effect = analyse(command, "/home/u/app", load_verbs()).effects[-1]
    assert effect.action == action
