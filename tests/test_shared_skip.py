"""Tests that read ../shared (the trace corpus beside the checkout, or where ``CTXPROXY_SHARED``
says) skip, saying so, when it is missing: the ``needs_shared`` marker and the ``traces_path``
fixture (tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
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


def _shared_as_imported(env: dict[str, str]) -> Path:
    code = "from tests.support import traces; print(traces.SHARED)"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return Path(done.stdout.strip())


def test_the_corpus_is_looked_for_beside_the_checkout(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if k != "CTXPROXY_SHARED"}
    env["PYTHONPATH"] = str(root)
    assert _shared_as_imported(env) == root.parent / "shared"
    # a checkout elsewhere (a worktree) names it
    assert _shared_as_imported({**env, "CTXPROXY_SHARED": str(tmp_path)}) == tmp_path
    assert conftest.TRACES == traces.CORPUS == traces.SHARED / "traces" / "corpus.jsonl.gz"
