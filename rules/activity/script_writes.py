"""Files a Python script an agent wrote and ran writes: the commonest way mini-swe-agent and its
kin change a file is ``cat > fix.py <<'EOF' … open('pkg/mod.py', 'w') … EOF`` then ``python
fix.py`` (or ``python -c "…"``, ``python - <<'EOF'``), and a working set that read only
redirections, ``tee`` and ``sed -i`` left the fixed file out of "Changed files" in 61 of 104
such runs of the corpus, listing the scratch scripts instead.

Read from a script's text: ``open(P, 'w')`` (any mode that writes: ``w``, ``a``, ``x``, ``+``),
``Path(P).write_text(…)`` / ``.write_bytes(…)``, with ``P`` a string literal or a name bound to
one (``path = 'pkg/mod.py'``); and a name bound to a Path of one written through
(``p = Path('pkg/mod.py')`` … ``p.write_text(…)``, ``p.open('w')``). Every pattern is bounded
and anchored on a literal: linear."""

from __future__ import annotations

import posixpath
import re

from rules.activity.shell_lex import split_commands

MAX_SCRIPT_CHARS = 200_000  # of a script read for what it writes
MAX_TARGETS = 8  # files one script is taken to write
_STR = r"(?P<q>['\"])(?P<lit>[^'\"\n]{1,300})(?P=q)"
_OPEN = re.compile(
    r"\bopen\(\s{0,4}(?:" + _STR + r"|(?P<name>[A-Za-z_]\w{0,40}))\s{0,4},\s{0,4}"
    r"(?:mode\s{0,2}=\s{0,2})?(?P<q2>['\"])(?P<mode>[rwxabt+]{1,4})(?P=q2)"
)
_PATH_WRITE = re.compile(
    r"\bPath\(\s{0,4}(?:" + _STR + r"|(?P<name>[A-Za-z_]\w{0,40}))\s{0,4}\)\s{0,4}"
    r"\.write_(?:text|bytes)\("
)
# a name bound to a literal, or to a Path of one (``p = Path('a.py')``), on its own line or
# after a ``;`` (``python -c "p = 'a.py'; open(p, 'w')"``)
_BOUND = re.compile(
    r"(?:^|;)[ \t]{0,40}(?P<name>[A-Za-z_]\w{0,40})[ \t]{0,4}=[ \t]{0,4}"
    r"(?:(?:pathlib\.)?Path\([ \t]{0,4})?" + _STR,
    re.M,
)
# a write through a name: ``p.write_text(…)``, ``p.open('w')`` (its binding says to what)
_NAME_WRITE = re.compile(
    r"\b(?P<name>[A-Za-z_]\w{0,40})\.(?:write_(?:text|bytes)\(|open\(\s{0,4}"
    r"(?:mode\s{0,2}=\s{0,2})?(?P<q2>['\"])(?P<mode>[rwxabt+]{1,4})(?P=q2))"
)
# a heredoc's head: `cat > f.py <<'EOF'`, `cat <<EOF > f.py`, `python - <<'EOF'`, `python3 <<EOF`
_HEREDOC = re.compile(r"<<-?[ \t]{0,4}(?P<dq>['\"]?)(?P<delim>[A-Za-z_]\w{0,40})(?P=dq)")
PYTHON = re.compile(r"^python(?:3(?:\.\d{1,2})?)?$")


def script_writes(script: str) -> list[str]:
    """The files ``script`` (Python) opens for writing, as it names them."""
    script = script[:MAX_SCRIPT_CHARS]
    if "open(" not in script and ".write_" not in script:
        return []
    bound: dict[str, str] = {}
    for m in _BOUND.finditer(script):
        bound.setdefault(m["name"], m["lit"])
    out: list[str] = []
    for m in _OPEN.finditer(script):
        mode = m["mode"]
        if any(c in mode for c in "wax+"):
            out.append(m["lit"] or bound.get(m["name"] or "", ""))
    for m in _PATH_WRITE.finditer(script):
        out.append(m["lit"] or bound.get(m["name"] or "", ""))
    for m in _NAME_WRITE.finditer(script):
        if m["mode"] is None or any(c in m["mode"] for c in "wax+"):
            out.append(bound.get(m["name"], ""))
    paths = (posixpath.normpath(p) for p in out if p)  # `./pkg/a.py` is `pkg/a.py`
    return [p for p in dict.fromkeys(paths) if not p.startswith("/dev/")][:MAX_TARGETS]


def in_folder(folder: str | None, path: str) -> str:
    """``path`` normalised, from ``folder`` when it is relative and the folder absolute (the
    ``cd /testbed`` before it on its line)."""
    if folder and folder.startswith("/") and not path.startswith(("/", "~")):
        path = posixpath.join(folder, path)
    return posixpath.normpath(path)


def _cd_in(words: list[str]) -> str | None:
    """The folder the last ``cd DIR`` of ``words`` (a heredoc's line head) went to."""
    at = len(words) - 1 - words[::-1].index("cd") if "cd" in words else -1
    return words[at + 1] if 0 <= at < len(words) - 1 else None


def heredocs(command: str) -> list[tuple[str, str]]:
    """Each heredoc of ``command`` as (its line's head, its body): the head is the text before
    ``<<`` on its line (``cat > fix.py``, ``python -``)."""
    out: list[tuple[str, str]] = []
    at = 0
    while len(out) < 16:
        m = _HEREDOC.search(command, at)
        if m is None:
            break
        line_start = command.rfind("\n", 0, m.start()) + 1
        line_end = command.find("\n", m.end())
        if line_end < 0:
            break
        head = command[line_start : m.start()] + " " + command[m.end() : line_end]
        delim = m["delim"]
        end = command.find("\n" + delim + "\n", line_end)
        if end < 0:  # the last line: the delimiter ends the command
            stripped = command.rstrip()
            end = len(stripped) - len(delim) - 1 if stripped.endswith("\n" + delim) else -1
        if end < 0:
            break
        out.append((head.strip(), command[line_end + 1 : end]))
        at = end + 1
    return out


def written_scripts(command: str) -> dict[str, list[str]]:
    """The Python scripts ``command`` writes by heredoc (``cat > fix.py <<'EOF'``), each with
    the files it writes when run. A script's name is normalised, and made absolute by the
    ``cd /dir`` before it on its line (``ran_scripts`` names it so too)."""
    out: dict[str, list[str]] = {}
    for head, body in heredocs(command):
        target = cat_target(head)
        if target is not None and target.endswith(".py"):
            out[target] = script_writes(body)
    return out


def cat_target(head: str) -> str | None:
    """The file a heredoc's line head writes by ``cat > f`` (``cd /repo && cat > fix.py``),
    normalised, absolute after a ``cd /dir`` on the line; None for another head."""
    for sep in ">;|&()":  # ``cd /repo;cat > f``: a separator is a word of its own
        head = head.replace(sep, f" {sep} ")
    words = head.split()
    if "cat" not in words:
        return None
    cat = len(words) - words[::-1].index("cat")
    folder, words = _cd_in(words[:cat]), words[cat:]
    if ">" not in words:
        return None
    after = [w for w in words[words.index(">") + 1 :] if w != ">"]  # `>>` appends
    return in_folder(folder, after[0]) if after else None


def ran_scripts(command: str) -> list[str]:
    """The script files ``command`` runs with Python (``python fix.py``), normalised (from the
    absolute folder a ``cd`` before it on the line went to)."""
    out = []
    folder: str | None = None
    for cmd in split_commands(command[:MAX_SCRIPT_CHARS]):
        argv = cmd.argv
        if argv[:1] == ("cd",):
            folder = in_folder(folder, argv[1]) if len(argv) > 1 else None
        elif len(argv) > 1 and PYTHON.match(posixpath.basename(argv[0])):
            script = next((a for a in argv[1:] if not a.startswith("-")), None)
            if script is not None and script.endswith(".py") and "-c" not in argv[1:2]:
                out.append(in_folder(folder, script))
    return out


def inline_writes(command: str) -> list[str]:
    """Files Python run inline by ``command`` writes: ``python -c "…"``, ``python - <<'EOF'``."""
    out: list[str] = []
    for cmd in split_commands(command[:MAX_SCRIPT_CHARS]):
        argv = cmd.argv
        if len(argv) > 2 and PYTHON.match(posixpath.basename(argv[0])) and argv[1] == "-c":
            out += script_writes(argv[2])
    for head, body in heredocs(command):
        words = head.split()
        if any(PYTHON.match(posixpath.basename(w)) for w in words[:8]):  # `cd x && python -`
            out += script_writes(body)
    return list(dict.fromkeys(out))[:MAX_TARGETS]
