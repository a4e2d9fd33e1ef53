"""Tests that read ../shared (the trace corpus beside the checkout) skip, saying so, when it is
missing: the ``needs_shared`` marker and the ``traces_path`` fixture (tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tests import conftest
from tests.support import traces


def _item(*markers: str) -> pytest.Item:
    found = {name: getattr(pytest.mark, name).mark for name in markers}
    item: pytest.Item = SimpleNamespace(get_closest_marker=found.get)  # type: ignore[assignment]
    return item


def test_a_marked_test_skips_with_the_reason_when_shared_is_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(conftest, "CORPUS", tmp_path / "shared" / "traces" / "corpus.jsonl.gz")
    with pytest.raises(pytest.skip.Exception) as info:
        conftest.pytest_runtest_setup(_item("needs_shared"))
    assert "needs ../shared beside the checkout" in str(info.value)
    assert "README" in str(info.value)
    conftest.pytest_runtest_setup(_item("slow"))  # unmarked: runs


def test_a_marked_test_runs_when_shared_is_there(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    corpus = tmp_path / "corpus.jsonl.gz"
    corpus.write_bytes(b"")
    monkeypatch.setattr(conftest, "CORPUS", corpus)
    conftest.pytest_runtest_setup(_item("needs_shared"))


def test_the_corpus_is_looked_for_beside_the_checkout() -> None:
    root = Path(__file__).resolve().parents[1]
    assert traces.shared_dir({}) == root.parent / "shared"
    assert traces.shared_dir({"CTXPROXY_SHARED": "/data/shared"}) == Path("/data/shared")
    assert traces.shared_dir() == traces.SHARED
    assert conftest.TRACES == traces.CORPUS == traces.SHARED / "traces" / "corpus.jsonl.gz"
