"""Changed files as the trajectories show them: one file is one entry whatever form a call named
it by (``./pkg/a.py``, ``/testbed/pkg/a.py`` after ``cd /testbed``, ``pkg/a.py``); a script
written by one name and run by another (``cat > /testbed/fix.py`` then ``cd /testbed && python
fix.py``) still counts what it writes; a copy's destination is written (``cp a.py.final
a.py``). Modelled on the corpus's mini-swe-agent runs (django__django-11999, -12286, -11630,
-13230, -14997): the fixed file was missing, or listed twice."""

from __future__ import annotations

import time

from rules.activity.patch_files import applied_patches, diff_targets
from tests.rules.context.test_working_set import TASK, ledger_of
from tests.support.factories import assistant, result, shell


def _changed(*commands: str) -> list[str]:
    steps = []
    for i, c in enumerate(commands):
        steps += [assistant(None, shell(f"c{i}", c)), result(f"c{i}", "<returncode>0</returncode>")]
    return list(ledger_of(TASK, *steps).get("changed") or [])


SCRIPT = (
    "cat > /testbed/fix_it.py << 'EOF'\n"
    "with open('/testbed/pkg/fields.py') as f:\n    code = f.read()\n"
    "with open('/testbed/pkg/fields.py', 'w') as f:\n    f.write(code.replace('a', 'b'))\n"
    "EOF"
)


def test_a_script_written_by_its_absolute_path_and_run_after_cd() -> None:
    changed = _changed(SCRIPT, "cd /testbed && python fix_it.py")
    assert "/testbed/pkg/fields.py" in changed


def test_a_script_written_after_cd_and_run_by_its_absolute_path() -> None:
    written = SCRIPT.replace("cat > /testbed/fix_it.py", "cd /testbed && cat > fix_it.py")
    assert "/testbed/pkg/fields.py" in _changed(written, "python /testbed/fix_it.py")


def test_a_script_run_by_a_bare_name_in_the_shells_folder() -> None:
    written = SCRIPT.replace("cat > /testbed/fix_it.py", "cd /testbed && cat > fix_it.py")
    assert "/testbed/pkg/fields.py" in _changed(written, "python fix_it.py")


def test_another_script_of_the_same_name_is_not_run() -> None:
    other = "cat > /tmp/fix_it.py << 'EOF'\nprint('hi')\nEOF"
    assert "/testbed/pkg/fields.py" not in _changed(SCRIPT, other, "cd /tmp && python fix_it.py")


def test_a_scripts_targets_are_normalised() -> None:
    script = "python - <<'EOF'\nopen('./django/views.py', 'w').write('x')\nEOF"
    changed = _changed(script, "sed -i 's/a/b/' django/views.py")
    assert changed == ["django/views.py"]


def test_one_file_named_absolute_and_relative_is_one_entry() -> None:
    changed = _changed(
        "sed -i 's/a/b/' /testbed/django/db/ddl.py",
        "cd /testbed && sed -i 's/c/d/' django/db/ddl.py",
    )
    assert changed == ["django/db/ddl.py"]  # the newest form


def test_a_bare_name_is_not_taken_for_a_file_elsewhere() -> None:
    changed = _changed("git diff > /tmp/patch.txt", "git diff > patch.txt")
    assert changed == ["/tmp/patch.txt", "patch.txt"]


def test_a_copys_destination_is_changed() -> None:
    changed = _changed("cd /testbed && cp django/checks.py.final django/checks.py")
    assert changed == ["/testbed/django/checks.py"]


def test_a_folder_copied_is_no_changed_file() -> None:
    assert _changed("cp -r src /tmp/src_backup") == []


def test_a_copy_into_the_folder_it_names_is_one_entry() -> None:
    assert _changed("cp ../x.py .", "cp ./y.py ./z.py") == ["x.py", "z.py"]


def test_a_globs_copies_and_a_backup_are_no_changed_file() -> None:
    # which files a glob copied only the shell knows; a backup changes no file of the task
    assert _changed("cp src/*.py dst", "cp a.py a.py.bak", "cp /t/m.py /tmp/m.py.orig") == []
    assert _changed("cp a.py a.py.orig", "cp a.py.orig a.py") == ["a.py"]


PATCH = (
    "cat > fix.patch << 'EOF'\n"
    "--- a/django/db/backends/base/schema.py\n+++ b/django/db/backends/base/schema.py\n"
    "@@ -1,3 +1,4 @@\n+import x\n import y\n"
    "--- /dev/null\n+++ b/docs/new.txt\t2024-01-01 00:00:00\n@@ -0,0 +1 @@\n+new\n"
    "EOF"
)


def test_a_patch_file_written_then_applied() -> None:
    changed = _changed(PATCH, "cd /testbed && patch -p1 < fix.patch 2>&1")
    assert changed[-2:] == ["django/db/backends/base/schema.py", "docs/new.txt"]
    assert _changed(PATCH) == ["fix.patch"]  # written, not applied: nothing changed by it yet


def test_git_apply_and_p0() -> None:
    assert "django/db/backends/base/schema.py" in _changed(PATCH, "git apply fix.patch")
    p0 = PATCH.replace("b/django", "django")
    assert "django/db/backends/base/schema.py" in _changed(p0, "patch -p0 < fix.patch")


def test_a_patch_applied_inline() -> None:
    inline = PATCH.replace("cat > fix.patch", "cd /testbed && patch -p1")
    assert "django/db/backends/base/schema.py" in _changed(inline)


def test_a_dry_run_changes_nothing() -> None:
    assert "docs/new.txt" not in _changed(PATCH, "patch -p1 --dry-run < fix.patch")
    assert "docs/new.txt" not in _changed(PATCH, "git apply --check fix.patch")
    assert "docs/new.txt" not in _changed(PATCH, "patch -C -p1 < fix.patch")  # BSD's check


def test_git_apply_with_its_context_applies() -> None:
    assert "docs/new.txt" in _changed(PATCH, "git apply -C 1 fix.patch")
    semi = PATCH.replace("cat > fix.patch", "cd /testbed; cat > fix.patch")
    assert "docs/new.txt" in _changed(semi, "cd /testbed; patch -p1 < fix.patch")


def test_the_patch_of_that_folder_is_applied() -> None:
    other = PATCH.replace("cat > fix.patch", "cat > /tmp/fix.patch").replace("docs/new", "x/y")
    changed = _changed(
        PATCH.replace("cat >", "cd /testbed && cat >"),
        other,
        "cd /testbed && patch -p1 < fix.patch",
    )
    assert "docs/new.txt" in changed and "x/y.txt" not in changed


def test_patch_reading_is_bounded_on_hostile_text() -> None:
    started = time.process_time()
    diff_targets("+++ " + "a" * 500_000)
    diff_targets("\n+++ \t" * 100_000)
    applied_patches("patch -p1 < f; " * 5_000)
    assert time.process_time() - started < 1.0


def test_commands_on_separate_lines_are_separate() -> None:
    changed = _changed("cp /t/a.py /t/b.py\ncp /t/a.py.fixed /t/a.py\npython test_fix.py")
    assert changed == ["/t/b.py", "/t/a.py"]
