"""What coding-agent CLIs' own tool shapes say, beyond a plain command line or file path:

- the header Codex puts in front of a command's output (``Chunk ID: …``, ``Wall time: …``,
  ``Process exited with code N``, ``Original token count: …``, ``Output:``; older versions and
  ``apply_patch``: ``Exit code: N``, ``Wall time: …``, ``Output:``; older still, a JSON object
  ``{"output": …, "metadata": {"exit_code": N}}``): the exit code, and the output after it;
- Codex's ``apply_patch`` text (``*** Add File: p``, ``*** Update File: p`` [``*** Move to: q``],
  ``*** Delete File: p``), sent as a custom tool's ``{"input": …}``, a function's ``{"input"}`` /
  ``{"patch"}``, an argv ``["apply_patch", patch]`` or a shell heredoc ``apply_patch <<'EOF'``;
- the command of a shell tool given as argv (``["bash", "-lc", "mkdir x"]`` runs the script);
- a notebook cell a code tool ran (OpenHands' ``execute_ipython_cell {"code": …}``), as the
  command line that runs the same: its Python as ``python -c``, its ``!cmd`` lines and a
  ``%%bash`` cell as shell lines, ``%cd dir`` as ``cd dir``.

Client text, read on every request: each parse is linear, bounded and cached per text."""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Mapping
from typing import Any, NamedTuple

import orjson

from rules.text_cache import text_cache

MAX_HEADER_LINES = 8  # a header has at most 6 lines; anything longer is output, not a header
MAX_HEADER_LINE_CHARS = 200
MAX_JSON_OUTPUT_CHARS = 2_000_000  # the old JSON shape is parsed only up to this size
MAX_PATCH_CHARS = 4_000_000  # a patch is read up to here (a bigger one: its first files only)
MAX_PATCH_FILES = 1_000  # file headers read from one patch
PATCH_MARK = "*** Begin Patch"
PATCH_PROGRAMS = frozenset({"apply_patch", "applypatch"})
# argv[0] of a shell whose ``-c SCRIPT`` (or ``-lc``, ``-ic`` …) is the command line itself
SHELL_PROGRAMS = frozenset({"bash", "sh", "zsh", "dash", "ksh", "fish"})

_HEADER_KEYS = (
    "Chunk ID:",
    "Wall time:",
    "Process exited with code ",
    "Process running with session ID ",
    "Original token count:",
    "Exit code:",
    "Total output lines:",
)


class OutputHeader(NamedTuple):
    """A command result's header: its exit code (None while the process still runs) and the
    output it introduces."""

    exit_code: int | None
    body: str
    running: bool = False  # "Process running with session ID 3": the harness stopped waiting


def _int(text: str) -> int | None:
    text = text.strip()
    digits = text[1:] if text.startswith("-") else text
    if not (digits.isascii() and digits.isdigit()) or len(digits) > 12:  # "²" is a digit too
        return None
    return int(text)


def output_header(text: str) -> OutputHeader | None:
    """The header of a Codex-style command result, or None when ``text`` does not start with
    one. Only its first few lines are read (the JSON shape: the whole object, when small)."""
    if text.startswith('{"output"'):
        return _json_output(text)
    if not text.startswith(_HEADER_KEYS):
        return None  # most results: no lookup, nothing held in the cache
    return _parse_header(text)


@text_cache(max_chars=8_000_000)
def _parse_header(text: str) -> OutputHeader:
    code: int | None = None
    running = False
    pos = 0
    for _ in range(MAX_HEADER_LINES):
        end = text.find("\n", pos, pos + MAX_HEADER_LINE_CHARS)
        if end < 0:
            end = len(text) if len(text) - pos <= MAX_HEADER_LINE_CHARS else -1
        if end < 0:
            break  # a line too long for a header line
        line = text[pos:end].rstrip("\r")
        nxt = end + 1
        if line.rstrip() == "Output:":
            return OutputHeader(code, text[nxt:], running)
        if line.startswith("Process exited with code "):
            code = _int(line[len("Process exited with code ") :])
        elif line.startswith("Process running with session ID "):
            running = True
        elif line.startswith("Exit code:"):
            code = _int(line[len("Exit code:") :])
        elif not line.startswith(_HEADER_KEYS):
            return OutputHeader(code, text[pos:], running)  # no "Output:" line: the rest is output
        if nxt >= len(text):
            return OutputHeader(code, "", running)
        pos = nxt
    return OutputHeader(code, text[pos:], running)


@text_cache(max_chars=8_000_000, max_text_chars=MAX_JSON_OUTPUT_CHARS)
def _json_output(text: str) -> OutputHeader | None:
    """``{"output": "...", "metadata": {"exit_code": 0, ...}}`` (Codex's shell, 2025)."""
    if len(text) > MAX_JSON_OUTPUT_CHARS or not text.rstrip().endswith("}"):
        return None
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("output"), str):
        return None
    meta = data.get("metadata")
    raw = meta.get("exit_code") if isinstance(meta, dict) else None
    code = raw if isinstance(raw, int) and not isinstance(raw, bool) else None
    return OutputHeader(code, data["output"])


def output_body(text: str) -> str:
    """``text`` without a Codex-style header (the output alone)."""
    header = output_header(text)
    return text if header is None else header.body


# ----- shell tools given argv, and their working directory -----


def argv_script(argv: list[str]) -> str:
    """The command line an argv runs: ``["bash", "-lc", "s"]`` runs ``s``; otherwise the words
    quoted back into one line."""
    if len(argv) >= 3 and posixpath.basename(argv[0]) in SHELL_PROGRAMS:
        flag = argv[1]
        if flag.startswith("-") and not flag.startswith("--") and flag.endswith("c"):
            return argv[2]
    if len(argv) == 1:
        return argv[0]  # a whole command line in one element
    return shlex.join(argv)


def command_value(value: Any) -> str | None:
    """A ``command``/``cmd`` argument as a command line: a string, or an argv list."""
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        script = argv_script(value)
        return script if script.strip() else None
    return None


MAX_CELL_LINES = 2_000  # lines of a notebook cell read (a longer one: its first ones)


def cell_script(code: str) -> str | None:
    """The command line doing what a notebook cell does: runs of Python lines as ``python -c``,
    in order with its shell escapes (``!mkdir -p out``), ``%cd dir`` and a ``%%bash`` /
    ``%%sh`` cell's body; other magics are left out. None for an empty cell."""
    lines = code.split("\n", MAX_CELL_LINES)[:MAX_CELL_LINES]
    if lines and lines[0].strip() in ("%%bash", "%%sh", "%%script bash", "%%script sh"):
        body = "\n".join(lines[1:])
        return body if body.strip() else None
    out: list[str] = []
    python: list[str] = []

    def flush() -> None:
        if any(line.strip() for line in python):
            out.append("python -c " + shlex.quote("\n".join(python)))
        python.clear()

    for line in lines:
        bare = line.strip()
        if bare.startswith("!"):
            flush()
            out.append(bare[1:])
        elif bare.startswith("%cd "):
            flush()
            out.append("cd " + bare[4:].strip())
        elif bare.startswith("%"):
            continue  # %pip, %matplotlib inline, %%time …: no file of the cell's
        else:
            python.append(line)
    flush()
    return "\n".join(out) or None


def workdir(args: Mapping[str, Any], keys: tuple[str, ...]) -> str | None:
    """The directory a call runs in, when its arguments name one (Codex's ``workdir``)."""
    for key in keys:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


# ----- apply_patch -----


class PatchOp(NamedTuple):
    """One file header of a patch: ``create`` (Add File), ``modify`` (Update File), ``move``
    (Update File + Move to: ``path`` is the new name, ``source`` the old one), ``delete``."""

    action: str
    path: str
    source: str | None = None


PATCH_KEYS = ("input", "patch")


def patch_argument(args: Mapping[str, Any], keys: tuple[str, ...] = PATCH_KEYS) -> str | None:
    """The patch text of an ``apply_patch`` call's arguments (``input`` or ``patch``)."""
    for key in keys:
        value = args.get(key)
        if isinstance(value, str) and PATCH_MARK in value:
            return value
    return None


def patch_in_argv(value: Any) -> str | None:
    """The patch of ``["apply_patch", patch]`` (Codex's older shell tool)."""
    if (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(v, str) for v in value)
        and posixpath.basename(value[0]) in PATCH_PROGRAMS
        and PATCH_MARK in value[1]
    ):
        return str(value[1])
    return None


def patch_in_script(script: str) -> str | None:
    """The patch of a shell script running ``apply_patch <<'EOF' … EOF`` (the heredoc body
    holds ``*** Begin Patch``), else None. The heredoc text is returned as is: the patch parser
    reads from ``*** Begin Patch`` to ``*** End Patch``."""
    mark = script.find(PATCH_MARK)
    if mark < 0:
        return None
    line_start = script.rfind("\n", 0, mark) + 1
    if script[line_start:mark].strip():
        return None  # the marker is not at the start of a line
    words = script[:line_start].split()
    for i, word in enumerate(words):
        if posixpath.basename(word) in PATCH_PROGRAMS and any(
            w.startswith("<<") for w in words[i + 1 : i + 3]
        ):
            return script[line_start:]
    return None


_ADD, _UPDATE, _DELETE, _MOVE, _END = (
    "*** Add File:",
    "*** Update File:",
    "*** Delete File:",
    "*** Move to:",
    "*** End Patch",
)


@text_cache(max_chars=8_000_000, max_text_chars=MAX_PATCH_CHARS)
def parse_patch(text: str) -> tuple[PatchOp, ...]:
    """The file headers of an ``apply_patch`` text, in order, paths as written. Never raises.

    Only lines starting with ``*** `` are looked at (found with ``str.find``: a file's content
    lines start with ``+``, ``-`` or a blank, so they are skipped at C speed); reading starts at
    ``*** Begin Patch`` and stops at ``*** End Patch``, after MAX_PATCH_FILES headers or at
    MAX_PATCH_CHARS."""
    if len(text) > MAX_PATCH_CHARS:
        text = text[:MAX_PATCH_CHARS]
    begin = _line_at(text, PATCH_MARK, 0)
    if begin < 0:
        return ()
    ops: list[PatchOp] = []
    pending: tuple[str, int] | None = None  # an Update's path and where its next line starts
    pos = text.find("\n", begin)
    while pos >= 0 and len(ops) < MAX_PATCH_FILES:
        start = text.find("\n*** ", pos)
        if start < 0:
            break
        start += 1
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        line = text[start:end].strip()
        pos = end if end < len(text) else -1
        if pending is not None:
            path, next_line = pending
            pending = None
            if start == next_line and line.startswith(_MOVE):
                dest = line[len(_MOVE) :].strip()
                ops.append(PatchOp("move", dest, path) if dest else PatchOp("modify", path))
                continue
            ops.append(PatchOp("modify", path))
        if line == _END:
            break
        for marker, action in ((_ADD, "create"), (_UPDATE, "modify"), (_DELETE, "delete")):
            if line.startswith(marker):
                path = line[len(marker) :].strip()
                if path and action == "modify":
                    pending = (path, end + 1)
                elif path:
                    ops.append(PatchOp(action, path))
                break
    if pending is not None:
        ops.append(PatchOp("modify", pending[0]))
    return tuple(dict.fromkeys(ops))  # a file named twice counts once


def _line_at(text: str, mark: str, start: int) -> int:
    """Where the first line that is ``mark`` (blanks around it allowed) starts, or -1."""
    pos = text.find(mark, start)
    while pos >= 0:
        line_start = text.rfind("\n", 0, pos) + 1
        line_end = text.find("\n", pos)
        line_end = len(text) if line_end < 0 else line_end
        if not text[line_start:pos].strip() and text[pos:line_end].strip() == mark:
            return line_start
        pos = text.find(mark, line_end)
    return -1


def patch_succeeded(result: str) -> bool:
    """An ``apply_patch`` result shows success: an exit code of 0 in its header, or, without
    one, output that starts with ``Success.`` (Codex's "Success. Updated the following files").
    Anything else (``apply_patch verification failed: …``, an empty result) is a failure."""
    header = output_header(result)
    if header is not None and header.exit_code is not None:
        return header.exit_code == 0
    body = result if header is None else header.body
    return body[:256].lstrip().startswith("Success.")
