"""An upstream whose key variable is unset is said at start-up: each of its requests is refused
(``upstream_key_missing``: in keys mode the client's bearer is the proxy key and never goes
upstream, and in passthrough the named variable is the only key), which nothing at start-up
would otherwise explain (``tests/proxy/upstream/test_empty_key_variable.py``)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from proxy.settings import UpstreamSettings, load_settings, settings_from_mapping
from proxy.startup import unset_key_variables
from tests.conftest import in_process

UPSTREAMS = [
    {"name": "claude", "kind": "anthropic", "match": ["claude-*"], "api_key_env": "KEY_A"},
    {"name": "openai", "match": ["*"], "api_key_env": "KEY_B"},
]


def test_each_unset_or_empty_variable_is_named() -> None:
    settings = settings_from_mapping({"upstreams": UPSTREAMS})
    assert unset_key_variables(settings, {"KEY_A": "sk-a", "KEY_B": "sk-b"}) == []
    said = unset_key_variables(settings, {"KEY_A": " \n"})
    assert len(said) == 2 and "KEY_A" in said[0] and "'openai'" in said[1]
    passthrough = settings_from_mapping({"upstreams": [{"name": "o", "match": ["*"]}]})
    assert unset_key_variables(passthrough, {}) == []  # the client's own key goes upstream


async def test_the_server_warns_at_start_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("KEY_A", "sk-a")
    monkeypatch.delenv("KEY_B", raising=False)
    settings = settings_from_mapping({"upstreams": UPSTREAMS})
    with caplog.at_level(logging.WARNING, logger="ctxproxy.app"):
        async with in_process(settings, str(tmp_path / "db")):
            pass
    assert "its key variable KEY_B is not set" in caplog.text
    assert "KEY_A" not in caplog.text


def test_an_upstream_after_the_catch_all_is_said_to_be_never_used() -> None:
    """The first match wins: one appended after the shipped config's ``*`` never got a model,
    while the start-up line listed it."""
    from proxy.startup import unreachable_upstreams

    shipped = load_settings(Path(__file__).parents[2] / "config.example.yaml")
    assert unreachable_upstreams(shipped) == []
    local = UpstreamSettings(name="local", match=["llama-*"], base_url="http://127.0.0.1:9/v1")
    appended = shipped.model_copy(update={"upstreams": [*shipped.upstreams, local]})
    (said,) = unreachable_upstreams(appended)
    assert "'local' is never used" in said and "'openai'" in said


def test_a_principals_unset_key_variable_is_named() -> None:
    """Keys mode: a principal whose key variable is unset cannot get in, and start-up said
    nothing."""
    settings = settings_from_mapping(
        {"upstreams": UPSTREAMS,
         "auth": {"mode": "keys", "principals": {"alice": ["ALICE_KEY"], "bob": ["BOB_KEY"]}}}
    )  # fmt: skip
    environ = {"KEY_A": "sk-a", "KEY_B": "sk-b", "BOB_KEY": "pk-bob"}
    said = unset_key_variables(settings, environ)
    assert said == ["principal 'alice': its key variable ALICE_KEY is not set; that key is not "
                    "accepted"]  # fmt: skip


async def test_the_memory_shorthand_turned_off_by_the_rules_own_option_is_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The shipped config lists every rule option at its default, track_entities'
    ``restore_history: false`` too, and a rule's own option wins over ``memory:``: turning on
    ``memory.restore_history`` there (its comment: the shorthand) restored nothing, unsaid."""
    from proxy.startup import overridden_shorthands

    shipped = (Path(__file__).parents[2] / "config.example.yaml").read_text()
    flipped = shipped.replace(
        "memory:\n  restore_history: false", "memory:\n  restore_history: true"
    )
    assert flipped != shipped
    path = tmp_path / "config.yaml"
    path.write_text(flipped)
    settings = load_settings(path)
    (said,) = overridden_shorthands(settings)
    assert "memory.restore_history: true" in said and "rules[2].restore_history: false" in said
    with caplog.at_level(logging.WARNING, logger="ctxproxy.app"):
        async with in_process(settings, str(tmp_path / "db")):
            pass
    assert said in caplog.text
    path.write_text(shipped)
    assert overridden_shorthands(load_settings(path)) == []  # both off: nothing to say
    alone = settings_from_mapping({"memory": {"restore_history": True}})
    assert overridden_shorthands(alone) == []  # the shorthand turns the option on
