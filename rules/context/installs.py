"""Open "No module named X" failures an install closed: a successful ``pip install X`` (``pip3``,
``python -m pip``, ``uv pip``, ``uv add``, ``poetry add``, ``conda install``) makes a rerun
import X, and the agent rarely reruns the very command that failed. In the corpus 70 such
diagnostics stayed open after the install, pointing the agent at a fixed failure."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from rules.activity.run_class import name_of, program
from rules.activity.shell_lex import split_commands

_MISSING = re.compile(r"No module named '(?P<module>[A-Za-z_][\w.]{0,100})'")
_SPEC_END = re.compile(r"[\[<>=!~;@ ]")
# options that take a value (a file, a URL, a path), pip's and the others'
_VALUED = frozenset(
    {"-r", "--requirement", "-c", "--constraint", "-e", "--editable", "-i", "--index-url",
     "--extra-index-url", "-f", "--find-links", "-t", "--target", "--prefix", "--root", "-n",
     "--name", "-p", "--prefix-path", "--python", "--group", "-G"}
)  # fmt: skip
_FILES = (".whl", ".txt", ".gz", ".zip", ".toml", ".cfg", ".in")  # a file installed from
_INSTALLERS = {("pip", "install"), ("uv", "add"), ("poetry", "add"), ("conda", "install")}


def installed(command: str) -> frozenset[str]:
    """The packages ``command`` installs, as import names are compared (lower case, ``-`` and
    ``.`` as ``_``)."""
    if "install" not in command and " add" not in command:
        return frozenset()
    out: set[str] = set()
    for cmd in split_commands(command):
        argv = list(program(cmd.argv))
        if len(argv) > 2 and name_of(argv[0]) == "python" and argv[1] == "-m":
            argv = argv[2:]  # python -m pip install x
        if len(argv) > 2 and name_of(argv[0]) == "uv" and argv[1] == "pip":
            argv = argv[1:]  # uv pip install x
        if len(argv) < 3 or (name_of(argv[0]), argv[1]) not in _INSTALLERS:
            continue
        words = iter(argv[2:])
        for word in words:
            if word in _VALUED:  # -r requirements.txt, -i URL: not a package
                next(words, None)
            elif word and word[0] not in "-." and "/" not in word and not word.endswith(_FILES):
                out.add(_norm(_SPEC_END.split(word, maxsplit=1)[0]))
    return frozenset(n for n in out if n)


def without_installed(runs: Mapping[str, Any], names: frozenset[str]) -> dict[str, Any]:
    """``runs`` less the "No module named" diagnostics of ``names``; a run left with none goes."""
    out: dict[str, Any] = {}
    for key, run in runs.items():
        kept = [d for d in run.get("diagnostics") or [] if not _missing_one_of(d, names)]
        if kept:
            out[key] = run if len(kept) == len(run["diagnostics"]) else {**run, "diagnostics": kept}
    return out


def _missing_one_of(diagnostic: Mapping[str, Any], names: frozenset[str]) -> bool:
    m = _MISSING.search(str(diagnostic.get("message") or ""))
    return m is not None and _norm(m["module"].split(".")[0]) in names


def _norm(name: str) -> str:
    return name.lower().replace("-", "_").replace(".", "_")
