"""Upstream options checked at start-up: a litellm upstream's ``provider`` (given, or derived from
its match patterns) and an upstream's ``headers``; a bad one fails with its path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from proxy.settings import SettingsError, UpstreamSettings, load_settings, settings_from_mapping

ROOT = Path(__file__).resolve().parents[2]


def _upstream(**spec: object) -> UpstreamSettings:
    settings = settings_from_mapping({"upstreams": [{"name": "u", **spec}]})
    return settings.upstreams[0]


@pytest.mark.parametrize(
    ("spec", "provider"),
    [
        ({"match": ["anthropic/*"]}, "anthropic"),
        ({"match": ["gemini/*", "gemini/gemini-2.5-pro"]}, "gemini"),
        ({"match": ["anthropic/*", "claude-*"]}, "anthropic"),  # claude-x: litellm cannot tell
        ({"match": ["claude-opus-4-5"]}, "anthropic"),  # a bare name litellm knows
        ({"match": ["*"], "provider": "anthropic"}, "anthropic"),
        ({"match": ["meta-llama/*"], "provider": "openrouter"}, "openrouter"),
    ],
)
def test_a_litellm_upstream_has_one_provider(spec: dict, provider: str) -> None:
    assert _upstream(kind="litellm", **spec).provider == provider


def test_an_openai_upstream_has_none() -> None:
    assert _upstream(match=["*"]).provider is None


@pytest.mark.parametrize(
    ("spec", "fragments"),
    [
        ({"kind": "litellm", "match": ["*"]}, ["cannot tell", "set provider"]),
        ({"kind": "litellm", "match": ["claude-*"]}, ["cannot tell"]),
        ({"kind": "litellm", "match": ["anthropic/*", "openai/*"]}, ["anthropic", "openai"]),
        ({"kind": "litellm", "match": ["anthropic/*", "gpt-4o"]}, ["anthropic", "openai"]),
        ({"kind": "openai", "provider": "openai"}, ["kind: litellm"]),
        ({"kind": "litellm", "provider": "anthropic/x"}, ["provider"]),
        ({"kind": "litellm", "provider": ""}, ["provider"]),
    ],
)
def test_a_bad_provider_fails_with_its_path(spec: dict, fragments: list[str]) -> None:
    with pytest.raises(SettingsError) as info:
        settings_from_mapping(
            {"upstreams": [{"name": "a", "kind": "openai"}, {"name": "u", **spec}]}
        )
    message = str(info.value)
    assert "upstreams[1].provider:" in message
    for fragment in fragments:
        assert fragment in message, message


@pytest.mark.parametrize(
    "headers",
    [
        {"authorization": "Bearer x"},
        {"Content-Length": "1"},
        {"host": "evil.test"},
        {"bad name": "x"},
        {"openai-organization": "org\r\nx-injected: 1"},
    ],
)
def test_bad_upstream_headers_fail_with_their_path(headers: dict) -> None:
    with pytest.raises(SettingsError, match=r"upstreams\[0\]\.headers"):
        settings_from_mapping({"upstreams": [{"name": "u", "headers": headers}]})


def test_upstream_header_names_are_lower_cased() -> None:
    up = _upstream(headers={"OpenAI-Organization": "org-1", "OpenAI-Project": "proj-1"})
    assert up.headers == {"openai-organization": "org-1", "openai-project": "proj-1"}


def test_default_and_example_configs_stay_valid() -> None:
    assert load_settings(None).upstreams == []
    example = yaml.safe_load((ROOT / "config.example.yaml").read_text())
    upstreams = [UpstreamSettings.model_validate(u) for u in example["upstreams"]]
    # out of the box: Claude Code and Gemini CLI natively, everything else to OpenAI, each
    # client's own key
    assert [(u.name, u.kind, u.match, u.api_key_env) for u in upstreams] == [
        ("claude", "anthropic", ["claude-*"], None),
        ("gemini", "gemini", ["gemini-*", "gemma-*"], None),
        ("openai", "openai", ["*"], None),
    ]


def _commented_upstreams() -> list[dict]:
    """The upstreams config.example.yaml lists commented out, uncommented."""
    text = (ROOT / "config.example.yaml").read_text()
    section = text[text.index("\nupstreams:\n") : text.index("\npipeline:\n")]
    block = [
        "  " + line[len("  # ") :]
        for line in section.splitlines()
        if line.startswith(("  # - ", "  #   "))
    ]
    found: list[dict] = yaml.safe_load("\n".join(block))
    return found


def test_the_example_configs_litellm_upstreams_are_valid_once_uncommented() -> None:
    text = (ROOT / "config.example.yaml").read_text()
    found = _commented_upstreams()
    upstreams = [UpstreamSettings.model_validate(u) for u in found]
    assert [(u.name, u.kind, u.provider) for u in upstreams] == [
        ("anthropic-litellm", "litellm", "anthropic"),
        ("gemini-litellm", "litellm", "gemini"),
    ]
    for up in upstreams:  # each says what it loses
        start = text.index(f"  # - name: {up.name}")
        assert "Loses" in text[start : start + 400], up.name


def test_prefix_patterns_and_explicit_providers_do_not_import_litellm() -> None:
    """litellm costs seconds to import: start-up pays it only for a bare pattern it must ask."""
    code = (
        "import sys, yaml\n"
        "from proxy.settings import UpstreamSettings\n"
        "example = yaml.safe_load(open('config.example.yaml'))\n"
        "[UpstreamSettings.model_validate(u) for u in example['upstreams']]\n"
        "UpstreamSettings(name='a', kind='litellm', match=['*'], provider='bedrock')\n"
        "UpstreamSettings(name='b', kind='litellm', match=['anthropic/*'])\n"
        "assert 'litellm' not in sys.modules, 'litellm was imported'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr


def test_an_anthropic_upstream_has_no_provider_and_the_default_base() -> None:
    up = _upstream(kind="anthropic", match=["claude-*"], api_key_env="ANTHROPIC_API_KEY")
    assert (up.kind, up.provider, up.base_url) == ("anthropic", None, None)
    assert _upstream(kind="anthropic", base_url="http://10.0.0.5:8080/").base_url is not None


@pytest.mark.parametrize(
    ("spec", "where"),
    [
        ({"kind": "anthropic", "provider": "anthropic"}, "provider"),
        ({"kind": "anthropic", "base_url": "https://api.anthropic.com/v1"}, "base_url"),
        ({"kind": "anthropic", "base_url": "https://gw.example/anthropic/v1/"}, "base_url"),
        ({"kind": "claude"}, "kind"),
    ],
)
def test_a_bad_anthropic_upstream_fails_with_its_path(spec: dict, where: str) -> None:
    with pytest.raises(SettingsError, match=rf"upstreams\[0\]\.{where}:"):
        settings_from_mapping({"upstreams": [{"name": "u", **spec}]})


@pytest.mark.parametrize(
    "base_url", ["htp:/bad url", "ftp://files.example/v1", "api.openai.com/v1", "http://", ""]
)
@pytest.mark.parametrize("kind", ["openai", "anthropic", "gemini", "litellm"])
def test_a_base_url_that_is_no_http_url_fails_at_start_up(kind: str, base_url: str) -> None:
    with pytest.raises(SettingsError, match=r"upstreams\[0\]\.base_url: .*http://"):
        settings_from_mapping({"upstreams": [{"name": "u", "kind": kind, "base_url": base_url}]})


def test_an_openai_base_url_may_end_in_v1() -> None:
    assert _upstream(base_url="https://api.openai.com/v1").base_url == "https://api.openai.com/v1"


def test_the_example_config_serves_claude_and_gemini_natively() -> None:
    """Above the catch-all, so Claude Code's claude-* and Gemini CLI's gemini-* models never
    reach OpenAI."""
    settings = load_settings(ROOT / "config.example.yaml", environ={})
    claude, gemini, catch_all = settings.upstreams
    assert (claude.kind, claude.base_url) == ("anthropic", "https://api.anthropic.com")
    assert (gemini.kind, gemini.base_url) == ("gemini", "https://generativelanguage.googleapis.com")
    assert settings.upstream_for("claude-opus-5-5") is claude
    assert settings.upstream_for("gemini-3.8-flash") is gemini
    assert settings.upstream_for("gemma-3-27b-it") is gemini  # Google's API serves Gemma too
    assert settings.upstream_for("gpt-5") is catch_all


@pytest.mark.parametrize(
    "base_url",
    ["https://generativelanguage.googleapis.com/v1beta", "https://gw.example/gemini/v1/"],
)
def test_a_gemini_base_url_is_without_its_version(base_url: str) -> None:
    with pytest.raises(SettingsError, match=r"upstreams\[0\]\.base_url:"):
        settings_from_mapping(
            {"upstreams": [{"name": "g", "kind": "gemini", "base_url": base_url}]}
        )
