"""A file an agent changes by a Python script it wrote and ran is a changed file: ``cat >
fix.py <<'EOF' … open('pkg/mod.py', 'w') … EOF`` then ``python fix.py`` (in that command or a
later one), ``python -c "…"``, ``python - <<'EOF'``. The working set listed only the scratch
scripts, and in 61 of 104 mini-swe-agent runs of the corpus missed the file the task changed."""

from __future__ import annotations

import time

import pytest

from rules.activity.script_writes import heredocs, inline_writes, script_writes, written_scripts
from tests.rules.context.test_working_set import TASK, ledger_of
from tests.support.factories import assistant, result, shell

FIX = """cd /testbed && cat > fix.py << 'EOF'
import re
with open('pkg/mod.py', 'r') as f:
    content = f.read()
target = "pkg/other.py"
with open(target, "w") as g:
    g.write(content)
with open('pkg/mod.py', 'w') as f:
    f.write(re.sub('1', 'right', content))
EOF"""


def _ran(*commands: str, code: int = 0) -> list[str]:
    steps = []
    for i, c in enumerate(commands):
        steps += [assistant(None, shell(f"c{i}", c)), result(f"c{i}", f"done\nExit code: {code}")]
    return ledger_of(TASK, *steps)["changed"]


def test_a_script_written_and_run_in_one_command() -> None:
    assert {"pkg/mod.py", "pkg/other.py"} <= set(_ran(FIX + "\npython fix.py"))


def test_a_script_written_then_run_later() -> None:
    changed = _ran(FIX, "cd /testbed && python fix.py 2>&1 | tail -5")
    assert {"pkg/mod.py", "pkg/other.py"} <= set(changed)
    assert "pkg/mod.py" not in _ran(FIX)  # written, not run: nothing changed by it yet


def test_a_failed_run_changes_nothing_through_it() -> None:
    assert "pkg/mod.py" not in _ran(FIX + "\npython fix.py", code=1)


@pytest.mark.parametrize(
    "command",
    [
        "python -c \"open('pkg/mod.py','w').write('x')\"",
        "cd /testbed && python3 - <<'PY'\nfrom pathlib import Path\n"
        "Path('pkg/mod.py').write_text('x')\nPY",
        # a name bound to a Path, then written through it (on its own line or after a `;`)
        "python3 -c \"from pathlib import Path; p = Path('pkg/mod.py'); "
        "p.write_text(p.read_text().replace('a', 'b'))\"",
        "python - <<'EOF'\nimport pathlib\nsrc = pathlib.Path('pkg/mod.py')\n"
        "text = src.read_text()\nsrc.write_text(text.replace('a', 'b'))\nEOF",
        "python - <<'EOF'\nfrom pathlib import Path\nf = Path('pkg/mod.py')\n"
        "with f.open('w') as out:\n    out.write('x')\nEOF",
        "python -c \"import sys; p = 'pkg/mod.py'; open(p, 'w').write('x')\"",
    ],
)
def test_inline_python(command: str) -> None:
    assert "pkg/mod.py" in _ran(command)


def test_reads_are_not_writes() -> None:
    assert script_writes("open('a.py').read(); open('b.py', 'rb'); open(p, 'r')") == []
    assert script_writes("p = Path('a.py'); p.read_text(); p.open('r'); q.write_text('x')") == []
    assert inline_writes("python -c \"print(open('a.py').read())\"") == []
    assert written_scripts("cat > notes.txt <<'EOF'\nopen('a.py', 'w')\nEOF") == {}


def test_bounded_on_hostile_text() -> None:
    started = time.process_time()
    script_writes("open(" * 50_000 + "x = '" * 20_000)
    heredocs("cat > a.py <<EOF\n" * 20_000)
    assert time.process_time() - started < 1.0


@pytest.mark.parametrize("sep", [";", " ; ", "&&", " && "])
def test_a_script_written_after_cd_with_any_separator(sep: str) -> None:
    written = FIX.replace("cd /testbed && ", f"cd /testbed{sep}")
    changed = _ran(written, f"cd /testbed{sep}python fix.py")
    assert {"pkg/mod.py", "pkg/other.py"} <= set(changed)
