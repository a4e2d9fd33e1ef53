"""The built-in packs are read at start-up, so no request pays a pack's parse; libyaml's parser,
when PyYAML has it, reads every pack to the same values as the pure-Python one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from proxy.app import create_app
from rules import packs
from rules.context import copy_odds, need
from tests.conftest import proxy_settings

BUILTIN = sorted(path.stem for path in packs.BUILTIN_DIR.glob("*.yaml"))


@pytest.fixture
def no_packs_read() -> Iterator[None]:
    """The packs' cache emptied before the test and refilled after it (the values are equal)."""
    packs.load_pack.cache_clear()
    yield
    packs.load_pack.cache_clear()
    packs.preload()


def _refuse(path: Path) -> object:
    raise AssertionError(f"{path.name} read after start-up")


def test_preload_reads_every_builtin_pack(no_packs_read: None) -> None:
    assert packs.preload() == tuple(BUILTIN)
    assert packs.load_pack.cache_info().currsize == len(BUILTIN)


def test_a_rule_reading_a_pack_lazily_reads_no_file_after_preload(
    no_packs_read: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    packs.preload()
    monkeypatch.setattr(packs, "_read_yaml", _refuse)
    copy_odds._table.cache_clear()
    need._reuse_table.cache_clear()
    try:
        assert copy_odds._table()[0]  # prune's first look reads these two
        assert need._reuse_table()
    finally:
        copy_odds._table.cache_clear()
        need._reuse_table.cache_clear()


async def test_the_server_reads_the_packs_as_it_starts(no_packs_read: None, tmp_path: Path) -> None:
    app = create_app(proxy_settings("http://127.0.0.1:9"), db_path=str(tmp_path / "db"))
    async with app.router.lifespan_context(app):
        assert packs.load_pack.cache_info().currsize >= len(BUILTIN)
        for name in BUILTIN:  # each already cached: a hit, not a read
            hits = packs.load_pack.cache_info().hits
            packs.load_pack(name)
            assert packs.load_pack.cache_info().hits == hits + 1


@pytest.mark.parametrize("name", BUILTIN)
def test_libyaml_reads_each_pack_as_the_pure_python_parser(name: str) -> None:
    text = (packs.BUILTIN_DIR / f"{name}.yaml").read_text(encoding="utf-8")
    assert packs._read_yaml(packs.BUILTIN_DIR / f"{name}.yaml") == yaml.safe_load(text)
