"""Docs stay true: every rule is documented in the README and listed in config.example.yaml, and the
example config loads."""

from __future__ import annotations

from pathlib import Path

import yaml

from proxy.settings import load_settings
from rules.registry import default_rule_names

ROOT = Path(__file__).resolve().parents[1]


def test_every_rule_is_in_readme_and_example_config() -> None:
    readme = (ROOT / "README.md").read_text()
    config = yaml.safe_load((ROOT / "config.example.yaml").read_text())
    listed = [r["name"] for r in config["rules"]]
    for name in default_rule_names():
        assert f"### {name}" in readme, f"README lacks a section for rule {name}"
        assert name in listed, f"config.example.yaml does not list rule {name}"


def test_example_config_loads() -> None:
    settings = load_settings(ROOT / "config.example.yaml")
    assert [r.name for r in settings.configured_rules()] == default_rule_names()


def test_readme_test_command_is_what_ci_runs() -> None:
    assert "bin/test" in (ROOT / ".ci" / "run").read_text()
    assert "bin/test" in (ROOT / "README.md").read_text()
