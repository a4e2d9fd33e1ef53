"""bin/test runs the files tests/serial.txt lists alone, after the rest: each exists (a renamed
one would run on the two workers, beside other tests, or not at all), and its tests are marked
``serial``, so the parallel run leaves them out."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import SERIAL_FILES

ROOT = Path(__file__).resolve().parents[1]


def test_the_listed_files_exist_and_bin_test_runs_them() -> None:
    assert len(SERIAL_FILES) >= 5
    assert [f for f in sorted(SERIAL_FILES) if not (ROOT / f).is_file()] == []
    assert "tests/serial.txt" in (ROOT / "bin" / "test").read_text()


def test_their_tests_are_marked_serial(request: pytest.FixtureRequest) -> None:
    session = request.session
    marked = {i.nodeid.partition("::")[0] for i in session.items if i.get_closest_marker("serial")}
    assert marked <= SERIAL_FILES
    assert request.node.get_closest_marker("serial") is None
