"""The working set's memory of the Python scripts a session wrote (``cat > fix.py <<'EOF'``):
for each, the files it writes when run (``rules/activity/script_writes.py``), so a later
``python fix.py`` counts them as changed, whether it names the script as written, by its
absolute path (``cd /testbed``, then a relative name), or as its relative end. Bounded: the
newest ``MAX_SCRIPTS`` scripts."""

from __future__ import annotations

from typing import Any

from rules.activity.patch_files import (
    applied_patches,
    inline_patches,
    stripped,
    written_patches,
)
from rules.activity.script_writes import inline_writes, ran_scripts, written_scripts
from rules.activity.storable import MAX_PATH_CHARS
from rules.redact import redact_text

MAX_SCRIPTS = 16


def script_targets(ledger: dict[str, Any], command: str) -> tuple[str, ...]:
    """The files ``command`` (run, and successful) wrote through Python: inline (``python -c``,
    ``python - <<'EOF'``) or by running a script the session wrote, this command included.
    Notes the scripts it writes in ``ledger["scripts"]``."""
    patched = patch_targets(ledger, command) if "patch" in command or "apply" in command else []
    if "python" not in command and "<<" not in command:
        return tuple(patched)
    scripts: dict[str, list[str]] = dict(ledger.get("scripts") or {})
    written = written_scripts(command)
    for path, targets in written.items():
        path = redact_text(path)
        if len(path) <= MAX_PATH_CHARS:
            scripts.pop(path, None)
            scripts[path] = [redact_text(t) for t in targets if len(t) <= MAX_PATH_CHARS]
    if written:
        ledger["scripts"] = dict(list(scripts.items())[-MAX_SCRIPTS:])
    ran = [t for s in ran_scripts(command) for t in _targets(scripts, redact_text(s))]
    return tuple(dict.fromkeys([*inline_writes(command), *ran, *patched]))


def patch_targets(ledger: dict[str, Any], command: str) -> list[str]:
    """The files ``command`` (run, and successful) changed by applying a patch: one the session
    wrote (``cat > fix.patch <<'EOF'``, remembered in ``ledger["patches"]``, the newest
    ``MAX_SCRIPTS``), or one from a heredoc (``patch -p1 <<'EOF'``)."""
    patches: dict[str, list[str]] = dict(ledger.get("patches") or {})
    written = written_patches(command) if "<<" in command else {}
    for path, targets in written.items():
        path = redact_text(path)
        if len(path) <= MAX_PATH_CHARS:
            patches.pop(path, None)
            patches[path] = [redact_text(t) for t in targets if len(t) <= MAX_PATH_CHARS]
    if written:
        ledger["patches"] = dict(list(patches.items())[-MAX_SCRIPTS:])
    out = inline_patches(command) if "<<" in command else []
    for name, strip in applied_patches(command):
        found = _targets(patches, redact_text(name))
        out += stripped(found, strip)
    return out


def _targets(scripts: dict[str, list[str]], script: str) -> list[str]:
    """What the script run as ``script`` writes: the one of that name, else the only one whose
    name it ends, absolute, or whose relative name ends it (``cat > /testbed/fix.py`` run as
    ``python fix.py`` in the shell's folder, ``cat > fix.py`` run as ``python /testbed/fix.py``)."""
    if script in scripts:
        return scripts[script]
    tail, absolute = "/" + script, script.startswith("/")
    named = [
        s
        for s in scripts
        if (s[:1] == "/" and s.endswith(tail)) or (absolute and script.endswith("/" + s))
    ]
    return scripts[named[0]] if len(named) == 1 else []
