"""bin/test runs the files tests/serial.txt lists alone, after the rest: each exists (a renamed
one would run on the two workers, beside other tests, or not at all)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import SERIAL_FILES

ROOT = Path(__file__).resolve().parents[1]


def test_the_listed_files_exist_and_bin_test_runs_them() -> None:
    assert len(SERIAL_FILES) >= 5
    files = {f.partition("::")[0] for f in SERIAL_FILES}
    assert [f for f in sorted(files) if not (ROOT / f).is_file()] == []
    assert "tests/serial.txt" in (ROOT / "bin" / "test").read_text()
    for entry in SERIAL_FILES:  # a single test: named in its file
        path, _, name = entry.partition("::")
        assert not name or f"def {name}(" in (ROOT / path).read_text(), entry
