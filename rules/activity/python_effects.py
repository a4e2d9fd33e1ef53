"""What Python run inline does to files and folders: an agent's ``python -c "import os;
os.makedirs('out/reports')"`` or ``python - <<'EOF' … EOF`` made a folder a ``mkdir`` would have,
and "delete the folder you just created" found nothing. Read from the code's text:

- made: ``os.makedirs(P)``, ``os.mkdir(P)``, ``Path(P).mkdir(…)`` (folders); ``open(P, 'w')``
  (any mode that writes), ``Path(P).write_text(…)`` / ``.write_bytes(…)`` (files);
- deleted: ``shutil.rmtree(P)``, ``os.rmdir(P)``, ``Path(P).rmdir()`` (folders);
  ``os.remove(P)``, ``os.unlink(P)``, ``Path(P).unlink()`` (files);
- copied: ``shutil.copytree(A, B)`` (a folder), ``shutil.copy(A, B)``, ``copy2``, ``copyfile``;
- moved: ``shutil.move(A, B)``, ``os.rename(A, B)``, ``os.replace(A, B)``, ``Path(A).rename(B)``.

``P`` is a string literal or a name bound to one (``out = 'build/tmp'``). Each pattern starts at a
literal call name and its repeats are bounded: linear."""

from __future__ import annotations

import bisect
import posixpath
import re

from rules.activity.script_writes import PYTHON, heredocs
from rules.activity.shell_lex import MAX_COMMAND_CHARS
from rules.text_cache import text_cache

MAX_CODE_CHARS = MAX_COMMAND_CHARS  # of a script read for what it does: what a line's read of
MAX_EFFECTS = 16  # effects one script is taken to have
MAX_RUNS = 32  # Python runs of one command line read (``python f.py; python f.py; …``)

_STR = r"(?P<q{n}>['\"])(?P<lit{n}>[^'\"\n]{{1,300}})(?P=q{n})"
_ARG = r"(?:" + _STR + r"|(?P<name{n}>[A-Za-z_]\w{{0,40}}))"
_A, _B = _ARG.format(n=1), _ARG.format(n=2)
_SP = r"\s{0,4}"


def _call(name: str, *args: str) -> str:
    """A call of ``name`` (a regex) with these arguments first, blanks bounded."""
    return r"\b" + name + r"\(" + _SP + (_SP + "," + _SP).join(args)


def _on_path(method: str, *args: str) -> str:
    """``Path(A).method(…)``."""
    return _call("Path", _A) + _SP + r"\)" + _SP + r"\." + method + r"\(" + _SP + "".join(args)


_WRITING = r"(?:mode" + _SP + "=" + _SP + r")?['\"][rbt]{0,2}[wxa]"  # open(P, 'w'), 'ab', 'x'
# (action, type, pattern): type "file", "folder" or "guess"; a pattern with a second argument
# gives the destination there (copy, move), the first being the source
_CALLS: tuple[tuple[str, str, re.Pattern[str]], ...] = tuple(
    (action, typ, re.compile(pattern))
    for action, typ, pattern in (
        ("create", "folder", _call(r"os\.(?:makedirs|mkdir)", _A)),
        ("create", "folder", _on_path("mkdir")),
        ("create", "file", _call("open", _A, _WRITING)),
        ("create", "file", _on_path("write_(?:text|bytes)")),
        ("delete", "folder", _call(r"(?:shutil\.rmtree|os\.rmdir)", _A)),
        ("delete", "folder", _on_path("rmdir")),
        ("delete", "file", _call(r"os\.(?:remove|unlink)", _A)),
        ("delete", "file", _on_path("unlink")),
        ("copy", "folder", _call(r"shutil\.copytree", _A, _B)),
        ("copy", "file", _call(r"shutil\.copy(?:2|file)?", _A, _B)),
        ("move", "guess", _call(r"(?:shutil\.move|os\.rename|os\.replace)", _A, _B)),
        ("move", "guess", _on_path("rename", _B)),
    )
)
_NEEDS = ("makedirs", "mkdir", "open(", ".write_", "rmtree", "rmdir", "remove(", "unlink",
          "copy", "move(", "rename(", "replace(")  # fmt: skip
_BOUND = re.compile(
    r"^[ \t]{0,40}(?P<name>[A-Za-z_]\w{0,40})[ \t]{0,4}=[ \t]{0,4}(?P<q>['\"])"
    r"(?P<lit>[^'\"\n]{1,300})(?P=q)",
    re.M,
)

# (action, type or "guess", path, source or None), in the order the code has them
PyEffect = tuple[str, str, str, str | None]


@text_cache(max_chars=4_000_000, max_text_chars=MAX_CODE_CHARS)
def python_effects(code: str) -> tuple[PyEffect, ...]:
    """What ``code`` (Python) does to files and folders it names, in the order it says it
    (cached: a script run again, in a line or a later request, is not read again)."""
    code = code[:MAX_CODE_CHARS]
    if not any(n in code for n in _NEEDS):
        return ()
    bound: dict[str, list[tuple[int, str]]] = {}  # name -> (where, literal), in order
    for m in _BOUND.finditer(code):
        bound.setdefault(m["name"], []).append((m.start(), m["lit"]))
    found: list[tuple[int, PyEffect]] = []
    for action, typ, pattern in _CALLS:
        for m in pattern.finditer(code):
            at = m.start()
            first = m["lit1"] or _value(bound, m["name1"], at)
            if not first or first.startswith("/dev/"):
                continue
            if "lit2" in pattern.groupindex:
                second = m["lit2"] or _value(bound, m["name2"], at)
                if second:
                    found.append((m.start(), (action, typ, second, first)))
            else:
                found.append((m.start(), (action, typ, first, None)))
    found.sort(key=lambda x: x[0])
    return tuple(e for _, e in found)[:MAX_EFFECTS]


def _value(bound: dict[str, list[tuple[int, str]]], name: str | None, at: int) -> str:
    """The literal ``name`` was last bound to before ``at`` (``path = 'a'`` … ``path = 'b'``:
    the second, after it); none when it was not bound before."""
    seen = bound.get(name or "") or ()
    i = bisect.bisect_left(seen, (at, "")) - 1
    return seen[i][1] if i >= 0 else ""


def inline_code(argv: list[str]) -> str | None:
    """The code of ``python -c CODE`` (its argv past the program), else None."""
    for i, word in enumerate(argv[1:6], start=1):
        if word == "-c":
            return argv[i + 1] if i + 1 < len(argv) else None
        if not word.startswith("-"):
            return None  # a script's name: what follows are its arguments
    return None


def reads_stdin(argv: list[str]) -> bool:
    """Whether ``python …`` runs the code on its standard input (``python -``, or no script)."""
    words = [w for w in argv[1:] if w != "-u" and not w.startswith("-W") and w != "-B"]
    return not words or words[0] == "-"


def heredoc_code(command: str) -> tuple[list[str], dict[str, str]]:
    """The Python code ``command``'s heredocs hold: those fed to Python (``python - <<'EOF'``),
    in order, and the scripts written by ``cat > fix.py <<'EOF'``, by name as written."""
    fed: list[str] = []
    scripts: dict[str, str] = {}
    for head, body in heredocs(command[:MAX_COMMAND_CHARS]):  # as far as the line is read
        words = head.replace(">", " > ").split()
        at = next((i for i, w in enumerate(words[:8]) if PYTHON.match(posixpath.basename(w))), -1)
        if at >= 0:  # `python - <<EOF` runs it; `python load.py <<EOF` reads it as data
            if reads_stdin(words[at : at + 1] + _own_words(words[at + 1 :])):
                fed.append(body)
        elif "cat" in words and ">" in words[:-1] and words[-1].endswith(".py"):
            scripts[posixpath.normpath(words[-1])] = body
    return fed, scripts


def _own_words(words: list[str]) -> list[str]:
    """A command's words up to the shell's next operator."""
    out = []
    for w in words:
        if w in ("&&", "||", ";", "|", ">", "&"):
            break
        out.append(w)
    return out
