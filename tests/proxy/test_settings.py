"""Settings are validated at start-up; a bad option fails with its path."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.settings import SettingsError, load_settings, settings_from_mapping
from rules.registry import default_rule_names


def test_defaults_enable_every_rule_in_order() -> None:
    s = load_settings(None)
    assert [r.name for r in s.configured_rules()] == default_rule_names()


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"rules": [{"name": "measure"}, {"name": "nope"}]}, "rules[1].name: unknown rule 'nope'"),
        ({"rules": [{"name": "measure", "bogus_option": 1}]}, "rules[0].bogus_option"),
        ({"server": {"port": "x"}}, "server.port"),
        ({"upstreams": [{"name": "a", "kind": "grpc"}]}, "upstreams[0].kind"),
        ({"upstreams": [{"name": "a"}, {"name": "a"}]}, "upstream names must be unique"),
        ({"pipeline": {"budget_tokens": 5}}, "pipeline.budget_tokens"),
    ],
)
def test_bad_options_name_their_path(data, fragment) -> None:
    with pytest.raises(SettingsError) as info:
        settings_from_mapping(data)
    assert fragment in str(info.value)


def test_disabled_rule_is_left_out() -> None:
    s = settings_from_mapping({"rules": [{"name": "measure", "enabled": False}]})
    assert s.configured_rules() == []


def test_upstream_glob_matching_first_wins() -> None:
    s = settings_from_mapping(
        {
            "upstreams": [
                {"name": "a", "match": ["claude-*"], "kind": "litellm", "provider": "anthropic"},
                {"name": "b", "match": ["*"]},
            ]
        }
    )
    assert s.upstream_for("claude-3").name == "a"
    assert s.upstream_for("gpt-4o").name == "b"


def test_unreadable_or_non_mapping_config(tmp_path: Path) -> None:
    with pytest.raises(SettingsError):
        load_settings(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a\n- b\n")
    with pytest.raises(SettingsError, match="mapping"):
        load_settings(bad)


def test_memory_restore_history_turns_on_the_rule_option() -> None:
    s = settings_from_mapping({"memory": {"restore_history": True}})
    (track,) = [r for r in s.configured_rules() if r.name == "track_entities"]
    assert track.config.restore_history is True
    explicit = settings_from_mapping(
        {
            "memory": {"restore_history": True},
            "rules": [{"name": "track_entities", "restore_history": False}],
        }
    )
    assert explicit.configured_rules()[0].config.restore_history is False
    assert not [
        r
        for r in load_settings(None).configured_rules()
        if getattr(r.config, "restore_history", False)
    ]


def test_a_key_given_twice_in_the_config_is_refused(tmp_path: Path) -> None:
    """A second ``upstreams:`` appended to the shipped config replaced its upstreams with no
    word (YAML keeps the last): every model went where only the appended block said."""
    shipped = (Path(__file__).parents[2] / "config.example.yaml").read_text()
    path = tmp_path / "config.yaml"
    path.write_text(shipped + '\nupstreams:\n  - {name: local, match: ["llama-*"]}\n')
    with pytest.raises(SettingsError) as info:
        load_settings(path)
    assert "'upstreams' is given twice" in str(info.value)
    path.write_text(shipped)
    assert len(load_settings(path).upstreams) == 3


def test_a_yaml_error_names_the_file_and_line(tmp_path: Path) -> None:
    """It named ``<unicode string>``, not the file the user edited."""
    path = tmp_path / "config.yaml"
    path.write_text("upstreams:\n  - {name: local, match: [\"x\"]\n  - oops: [\n")
    with pytest.raises(SettingsError) as info:
        load_settings(path)
    said = str(info.value)
    assert "<unicode string>" not in said and f'in "{path}", line' in said
    assert "^" in said  # the line's excerpt and its caret, as for any text


@pytest.mark.parametrize(
    ("data", "said"),
    [
        ({"upstreams": [{"name": "o", "match": ["*"], "apikey_env": "X"}]},
         "upstreams[0].apikey_env: Extra inputs are not permitted (did you mean 'api_key_env'?)"),
        ({"pipline": {}}, "pipline: Extra inputs are not permitted (did you mean 'pipeline'?)"),
        ({"rules": [{"name": "prune", "keep_last_turn": 2}]},
         "rules[0].keep_last_turn: Extra inputs are not permitted "
         "(did you mean 'keep_last_turns'?)"),
        ({"zzz": 1}, "zzz: Extra inputs are not permitted"),
        # a key of the section's own before one of another section's ('root' is workspace's)
        ({"server": {"prot": 1}},
         "server.prot: Extra inputs are not permitted (did you mean 'port'?)"),
        ({"store": {"pool": 4}},
         "store.pool: Extra inputs are not permitted (did you mean 'pool_size'?)"),
        # a key of another section: that section named, not the key itself "meant"
        ({"server": {"path": "x.db"}},
         "server.path: Extra inputs are not permitted (a key of store:)"),
    ],
)  # fmt: skip
def test_a_mistyped_key_says_the_key_it_likely_meant(data: dict, said: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(SettingsError) as raised:
        settings_from_mapping(data)
    assert said in str(raised.value)
    if "did you mean" not in said:
        assert "did you mean" not in str(raised.value)


def test_a_workspace_root_for_no_upstream_is_refused() -> None:
    """A key of ``workspace.roots`` naming no upstream was never used, silently."""
    upstreams = [{"name": "openai", "match": ["*"]}]
    settings_from_mapping({"upstreams": upstreams, "workspace": {"roots": {"openai": "/w"}}})
    with pytest.raises(SettingsError, match=r"workspace\.roots\.openia: names no upstream"):
        settings_from_mapping({"upstreams": upstreams, "workspace": {"roots": {"openia": "/w"}}})


@pytest.mark.parametrize(
    ("data", "said"),
    [
        ({"server": {"port": "87a87"}}, "server.port: Input should be a valid integer"),
        ({"upstreams": [{"name": "x", "kind": "antropic"}]}, "(given: 'antropic')"),
        ({"rules": [{"name": "break_loop"}]}, "unknown rule 'break_loop' (did you mean"),
    ],
)
def test_a_problem_says_the_value_given_and_the_name_meant(data: dict, said: str) -> None:
    """`server.port: Input should be a valid integer` left the user to find what they wrote
    in a 400-line file; an unknown rule's name got no "did you mean"."""
    with pytest.raises(SettingsError) as problem:
        settings_from_mapping(data).configured_rules()
    assert said in str(problem.value)
    if "port" in data.get("server", {}):
        assert "(given: '87a87')" in str(problem.value)


def test_a_config_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    """A config saved in another encoding (latin-1 from an old editor) was a traceback of
    UnicodeDecodeError from ``ctxproxy serve``, ``logs`` and every other command."""
    path = tmp_path / "config.yaml"
    path.write_bytes("server:\n  host: caf\xe9.local\n".encode("latin-1"))
    with pytest.raises(SettingsError) as info:
        load_settings(path)
    said = str(info.value)
    assert said.startswith(f"cannot read configuration {path}: ") and "UTF-8" in said
    assert "line 2" in said  # where the byte is, as for a YAML error


def test_a_section_whose_keys_are_all_commented_out_takes_its_defaults(tmp_path: Path) -> None:
    """``server:`` with every line under it commented out is YAML's null: it was refused
    ("Input should be a valid dictionary or instance of ServerSettings") while ``store:`` the
    same way took its defaults."""
    path = tmp_path / "config.yaml"
    path.write_text("server:\n  # port: 9000\nworkspace:\nstore:\nlogging:\n  level: DEBUG\n")
    settings = load_settings(path)
    assert settings.server.port == 8787 and settings.workspace.root is None
    assert settings.logging.level == "DEBUG"
    path.write_text("server: 9000\n")  # a value that is no section is still refused
    with pytest.raises(SettingsError, match="server: Input should be a valid dictionary"):
        load_settings(path)
