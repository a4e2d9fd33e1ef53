"""``auth.mode: keys`` needs an upstream key on every upstream, checked at start-up."""

from __future__ import annotations

import pytest

from proxy.settings import SettingsError, settings_from_mapping


@pytest.mark.parametrize(
    ("upstreams", "fragment"),
    [
        ([{"name": "a"}], "upstreams[0].api_key_env"),
        ([{"name": "a", "api_key_env": "K"}, {"name": "b"}], "upstreams[1].api_key_env"),
        (
            [{"name": "a", "kind": "litellm", "match": ["anthropic/*"], "api_key_env": ""}],
            "upstreams[0].api_key_env",
        ),
    ],
)
def test_keys_mode_requires_an_upstream_key_on_every_upstream(upstreams, fragment) -> None:
    """In keys mode the client's bearer is the proxy key: it must never be the upstream key."""
    with pytest.raises(SettingsError) as info:
        settings_from_mapping({"auth": {"mode": "keys"}, "upstreams": upstreams})
    assert fragment in str(info.value) and "auth.mode: keys" in str(info.value)


def test_keys_mode_with_upstream_keys_is_valid() -> None:
    data = {"auth": {"mode": "keys"}, "upstreams": [{"name": "a", "api_key_env": "K"}]}
    assert settings_from_mapping(data).auth.mode == "keys"


@pytest.mark.parametrize(
    "config",
    [
        {"upstreams": [{"name": "o", "match": ["*"], "api_key_env": "sk-proj-PASTED0123456789"}]},
        {"auth": {"admin_key_env": "sk-proj-PASTED0123456789"}},
        {"auth": {"proxy_keys_env": "sk-proj-PASTED0123456789"}},
        {"auth": {"mode": "keys", "principals": {"a": ["sk-proj-PASTED0123456789"]}}},
        {"resolver": {"api_key_env": "sk-proj-PASTED0123456789"}},
    ],
)
def test_a_key_pasted_for_its_variables_name_is_refused_unshown(config: dict) -> None:
    """The start-up warning quoted it as the name of a variable not set, into the log."""
    with pytest.raises(SettingsError) as info:
        settings_from_mapping(config)
    assert "must name an environment variable" in str(info.value)
    assert "PASTED" not in str(info.value)
