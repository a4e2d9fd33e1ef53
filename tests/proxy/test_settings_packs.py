"""Users' pack files are checked at start-up, and a bad one fails naming its option
(``rules[i].extra_packs``): a missing file, an unknown kind, a pattern too slow on large input.
(What the rules themselves reject: tests/rules/packs/test_regex_budget.py and
tests/rules/entities/test_track_entities.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.settings import SettingsError, settings_from_mapping


def test_bad_pack_file_fails_at_config_time(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "references:\n  kinds: {x: 0.5}\n  languages:\n    en:\n      patterns:\n"
        "        - {kind: nope, re: 'a'}\n",
        encoding="utf-8",
    )
    rules = [
        {"name": "track_entities", "extra_packs": [str(tmp_path / "missing.yaml")]},
        {"name": "resolve_refs", "extra_packs": [str(bad)]},
    ]
    with pytest.raises(SettingsError) as info:
        settings_from_mapping({"rules": rules})
    assert "rules[0].extra_packs" in str(info.value) and "missing.yaml" in str(info.value)
    assert "rules[1].extra_packs" in str(info.value) and "unknown kind 'nope'" in str(info.value)


def test_a_slow_pattern_in_a_user_pack_fails_start_up(tmp_path: Path) -> None:
    tools = tmp_path / "tools.yaml"
    tools.write_text("tools:\n  failures: ['^\\s*(?:Error|ERROR)\\b']\n", encoding="utf-8")
    refs = tmp_path / "refs.yaml"
    refs.write_text(
        "references:\n  languages:\n    en:\n      not_refs: ['{dem}\\s*\\s*{type}\\s*\\s*$']\n",
        encoding="utf-8",
    )
    rules = [{"name": "track_entities", "extra_packs": [str(tools)]},
             {"name": "resolve_refs", "extra_packs": [str(refs)]}]  # fmt: skip
    with pytest.raises(SettingsError) as info:
        settings_from_mapping({"rules": rules})
    message = str(info.value)
    assert "rules[0].extra_packs" in message and r"'^\\s*(?:Error|ERROR)\\b'" in message
    assert "rules[1].extra_packs" in message and "too slow on large input" in message
