"""Files a unified diff changes when it is applied: ``patch -p1 < fix.patch``, ``git apply
fix.patch`` of a patch the session wrote by heredoc (``cat > fix.patch <<'EOF'``), or one applied
inline (``patch -p1 <<'EOF'``). Thirteen mini-swe-agent runs of the corpus put a fix in place so;
the working set listed the patch file, not the file it fixed.

The files are the ``+++`` lines' paths (not ``/dev/null``), less the leading names ``-pN`` strips
(``git apply``: 1 unless told; ``patch`` without ``-p``: the file's own name). A dry run
(``--dry-run``, ``--check``) changes nothing. Every pattern is anchored on a literal: linear."""

from __future__ import annotations

import posixpath
import re

from rules.activity.script_writes import MAX_SCRIPT_CHARS, cat_target, heredocs, in_folder
from rules.activity.shell_lex import split_commands

MAX_TARGETS = 32  # files one patch is taken to change
_PLUS = re.compile(r"^\+\+\+ (?P<path>[^\t\n]{1,1000})", re.M)
# what makes a run change nothing: ``patch``'s dry run (``-C``, BSD's), ``git apply``'s reports
# (its ``-C N`` is the context it needs, not a check)
_PATCH_DRY = frozenset({"--dry-run", "--check", "-C"})
_GIT_DRY = frozenset({"--check", "--stat", "--numstat", "--summary"})
_STRIP = re.compile(r"-p(\d{1,2})$")


def diff_targets(text: str) -> list[str]:
    """The ``+++`` paths of a unified diff, as it names them (``b/pkg/a.py``)."""
    out = []
    for m in _PLUS.finditer(text[:MAX_SCRIPT_CHARS]):
        path = m["path"].strip()
        if path and path != "/dev/null":
            out.append(path)
    return list(dict.fromkeys(out))[:MAX_TARGETS]


def stripped(paths: list[str], strip: int | None) -> list[str]:
    """``paths`` less ``strip`` leading names (None: the file's own name), normalised."""
    out = []
    for path in paths:
        names = path.split("/")
        kept = names[-1:] if strip is None else names[strip:]
        if kept and kept[-1]:
            out.append(posixpath.normpath("/".join(kept)))
    return out


def written_patches(command: str) -> dict[str, list[str]]:
    """The patch files ``command`` writes by heredoc (``cat > fix.patch <<'EOF'``), each with
    the ``+++`` paths it holds, as written (the strip is the applying command's)."""
    out: dict[str, list[str]] = {}
    for head, body in heredocs(command):
        target = cat_target(head)
        if target is not None and "+++ " in body:
            paths = diff_targets(body)
            if paths:
                out[target] = paths
    return out


def _dry(argv: tuple[str, ...]) -> bool:
    """Whether a ``patch`` or ``git apply`` run only checks or reports."""
    if posixpath.basename(argv[0]) == "patch":
        return bool(_PATCH_DRY.intersection(argv))
    return argv[:2] == ("git", "apply") and bool(_GIT_DRY.intersection(argv))


def _strip_of(argv: tuple[str, ...], default: int | None) -> int | None:
    for i, word in enumerate(argv):
        m = _STRIP.match(word)
        if m:
            return int(m.group(1))
        if word == "-p" and i + 1 < len(argv) and argv[i + 1].isdigit():
            return int(argv[i + 1])
    return default


def applied_patches(command: str) -> list[tuple[str, int | None]]:
    """The patch files ``command`` applies, each with its strip: ``patch -pN < f``, ``patch
    -pN -i f``, ``git apply [-pN] f``; a dry run is none. A file is named from the absolute
    folder a ``cd`` before it on the line went to."""
    out: list[tuple[str, int | None]] = []
    folder: str | None = None
    for cmd in split_commands(command[:MAX_SCRIPT_CHARS]):
        argv = cmd.argv
        if argv[:1] == ("cd",):
            folder = in_folder(folder, argv[1]) if len(argv) > 1 else None
        if not argv or _dry(argv):
            continue
        if posixpath.basename(argv[0]) == "patch":
            named = [t for op, t in cmd.redirects if op == "<"]
            if "-i" in argv[:-1]:
                named.append(argv[argv.index("-i") + 1])
            out += [(in_folder(folder, f), _strip_of(argv, None)) for f in named]
        elif argv[:2] == ("git", "apply") and "-R" not in argv and "--reverse" not in argv:
            files = [w for w in argv[2:] if not w.startswith("-") and not w.isdigit()]
            out += [(in_folder(folder, f), _strip_of(argv, 1)) for f in files]
    return out


def inline_patches(command: str) -> list[str]:
    """The files a patch applied from a heredoc changes (``patch -p1 <<'EOF'``)."""
    out: list[str] = []
    for head, body in heredocs(command):
        for cmd in split_commands(head):
            argv = cmd.argv
            if not argv or _dry(argv):
                continue
            if posixpath.basename(argv[0]) == "patch":
                out += stripped(diff_targets(body), _strip_of(argv, None))
            elif argv[:2] == ("git", "apply"):
                out += stripped(diff_targets(body), _strip_of(argv, 1))
    return list(dict.fromkeys(out))[:MAX_TARGETS]
