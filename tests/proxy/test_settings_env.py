"""``CTXPROXY_UPSTREAM_<NAME>_BASE_URL``: an upstream's base_url from the server's environment,
without editing the config file (how tests/e2e/test_default_config.py points the shipped config
at local fakes). Read at start-up only, checked like the file's value; a variable that names no
upstream, or holds no http(s) URL, fails start-up instead of being ignored."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.settings import SettingsError, load_settings
from proxy.settings_env import base_url_variable
from proxy.startup import startup_line

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "config.example.yaml"


def _config(tmp_path: Path, upstreams: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text("upstreams:\n" + upstreams)
    return path


def test_the_variable_sets_the_named_upstreams_base_url() -> None:
    env = {
        "CTXPROXY_UPSTREAM_CLAUDE_BASE_URL": "http://127.0.0.1:9001",
        "CTXPROXY_UPSTREAM_OPENAI_BASE_URL": " http://127.0.0.1:9002/v1 ",
        "UNRELATED": "x",
    }
    settings = load_settings(EXAMPLE, environ=env)
    claude, gemini, openai = settings.upstreams
    assert (claude.name, claude.base_url) == ("claude", "http://127.0.0.1:9001")
    assert gemini.base_url == "https://generativelanguage.googleapis.com"  # no variable for it
    assert (openai.name, openai.base_url) == ("openai", "http://127.0.0.1:9002/v1")
    assert settings.base_url_variable_of("claude") == "CTXPROXY_UPSTREAM_CLAUDE_BASE_URL"
    # everything else as the file says
    plain = load_settings(EXAMPLE, environ={})
    assert [u.base_url for u in plain.upstreams] == [
        "https://api.anthropic.com",
        "https://generativelanguage.googleapis.com",
        "https://api.openai.com/v1",
    ]
    assert plain.base_url_variable_of("claude") is None
    assert claude.model_dump(exclude={"base_url"}) == plain.upstreams[0].model_dump(
        exclude={"base_url"}
    )


def test_the_process_environment_is_read_by_default(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("CTXPROXY_UPSTREAM_CLAUDE_BASE_URL", "http://10.0.0.7:8080")
    assert load_settings(EXAMPLE).upstreams[0].base_url == "http://10.0.0.7:8080"


def test_the_name_is_upper_cased_with_underscores() -> None:
    assert base_url_variable("claude") == "CTXPROXY_UPSTREAM_CLAUDE_BASE_URL"
    assert base_url_variable("anthropic-litellm") == "CTXPROXY_UPSTREAM_ANTHROPIC_LITELLM_BASE_URL"
    assert base_url_variable("eu.gw 2") == "CTXPROXY_UPSTREAM_EU_GW_2_BASE_URL"


def test_an_empty_variable_counts_as_unset() -> None:
    settings = load_settings(EXAMPLE, environ={"CTXPROXY_UPSTREAM_CLAUDE_BASE_URL": "  "})
    assert settings.upstreams[0].base_url == "https://api.anthropic.com"
    assert settings.base_url_variable_of("claude") is None


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"CTXPROXY_UPSTREAM_CLUADE_BASE_URL": "http://127.0.0.1:1"}, "no upstream has that name"),
        ({"CTXPROXY_UPSTREAM_CLAUDE_BASE_URL": "127.0.0.1:9001"}, "not an http"),
        ({"CTXPROXY_UPSTREAM_CLAUDE_BASE_URL": "file:///etc/passwd"}, "not an http"),
        ({"CTXPROXY_UPSTREAM_CLAUDE_BASE_URL": "http://a b"}, "not an http"),
        ({"CTXPROXY_UPSTREAM_CLAUDE_BASE_URL": "http://"}, "not an http"),
        # checked as the file's value is: Anthropic's base URL is without /v1
        ({"CTXPROXY_UPSTREAM_CLAUDE_BASE_URL": "http://127.0.0.1:1/v1"}, "without /v1"),
    ],
)
def test_a_bad_variable_fails_start_up_naming_it(env: dict[str, str], fragment: str) -> None:
    with pytest.raises(SettingsError) as info:
        load_settings(EXAMPLE, environ=env)
    message = str(info.value)
    assert fragment in message and next(iter(env)) in message, message


def test_two_upstreams_under_one_variable_fail(tmp_path: Path) -> None:
    path = _config(
        tmp_path,
        "  - {name: eu-gw, match: ['a*']}\n  - {name: eu_gw, match: ['*']}\n",
    )
    with pytest.raises(SettingsError, match="more than one upstream"):
        load_settings(path, environ={"CTXPROXY_UPSTREAM_EU_GW_BASE_URL": "http://127.0.0.1:1"})
    assert len(load_settings(path, environ={}).upstreams) == 2  # without it, both load


def test_the_start_up_line_names_the_variable_never_its_value() -> None:
    url = "http://user:secret-in-url@127.0.0.1:9001"
    settings = load_settings(EXAMPLE, environ={"CTXPROXY_UPSTREAM_CLAUDE_BASE_URL": url})
    line = startup_line(settings, "127.0.0.1", 8787, ":memory:")
    assert "claude (anthropic, base_url from CTXPROXY_UPSTREAM_CLAUDE_BASE_URL): claude-*" in line
    assert "openai (openai): *" in line
    assert "secret-in-url" not in line and "9001" not in line


def test_a_variable_in_another_case_fails_start_up() -> None:
    """``CTXPROXY_UPSTREAM_claude_BASE_URL``: the environment's names are case-sensitive, so it
    went unread and the requests went to the provider's own URL."""
    env = {"CTXPROXY_UPSTREAM_claude_BASE_URL": "http://127.0.0.1:1"}
    with pytest.raises(SettingsError) as raised:
        load_settings(EXAMPLE, environ=env)
    assert "CTXPROXY_UPSTREAM_claude_BASE_URL" in str(raised.value)
    assert "CTXPROXY_UPSTREAM_CLAUDE_BASE_URL" in str(raised.value)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('upstream:\n  - {name: openai, match: ["*"]}\n', "did you mean 'upstreams'?"),
        ('server: {hots: x}\nupstreams:\n  - {name: openai, match: ["*"]}\n', "server.hots"),
        ('upstreams:\n  - {name: openai, match: ["*"]}\nport: abc\n', "port"),
    ],
)
def test_the_files_own_mistakes_are_said_beside_a_variable_that_names_no_upstream(
    tmp_path: Path, text: str, said: str
) -> None:
    """A mistake in the file (a key misspelt) is often why a variable names no upstream: it is
    said, not hidden behind the variable's line."""
    path = tmp_path / "config.yaml"
    path.write_text(text)
    env = {
        "CTXPROXY_UPSTREAM_OPENAI_BASE_URL": "http://127.0.0.1:1/v1",
        "CTXPROXY_UPSTREAM_CLAUDE_BASE_URL": "http://127.0.0.1:1",
    }
    with pytest.raises(SettingsError) as caught:
        load_settings(path, environ=env)
    message = str(caught.value)
    assert said in message
    assert "CTXPROXY_UPSTREAM_CLAUDE_BASE_URL: no upstream has that name" in message
