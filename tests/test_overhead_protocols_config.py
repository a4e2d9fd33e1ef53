"""The overhead bench's ctxproxy config (``bench.overhead_protocols.ctxproxy_config``): by default
every rule runs; ``--rules`` names the rules the server runs, in order, or none."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.overhead_protocols import ctxproxy_config
from proxy.settings import SettingsError, load_settings, settings_from_mapping

ROOT = "http://127.0.0.1:9"


def _rules(tmp_path: Path, rules: list[str] | None) -> list[str]:
    path = tmp_path / "ctxproxy.yaml"
    path.write_text(ctxproxy_config(ROOT, 128_000, rules), encoding="utf-8")
    return [r.name for r in load_settings(path, environ={}).configured_rules()]


def test_by_default_every_rule_runs(tmp_path: Path) -> None:
    defaults = [r.name for r in settings_from_mapping({}).configured_rules()]
    assert len(defaults) > 5
    assert _rules(tmp_path, None) == defaults


@pytest.mark.parametrize("rules", [[], ["prune"], ["repair_tool_chain", "measure"]])
def test_the_rules_named_run_in_their_order(tmp_path: Path, rules: list[str]) -> None:
    assert _rules(tmp_path, rules) == rules


@pytest.mark.parametrize("rules", [["measure", "repair_tool_chain"], ["prune", "prune"]])
def test_rules_out_of_their_order_or_twice_are_refused(tmp_path: Path, rules: list[str]) -> None:
    """``measure`` first sized what the client sent, not what went upstream; a rule listed twice
    ran twice."""
    with pytest.raises(SettingsError, match=r"out of order|listed twice"):
        _rules(tmp_path, rules)


def test_every_model_gets_the_window(tmp_path: Path) -> None:
    path = tmp_path / "ctxproxy.yaml"
    path.write_text(ctxproxy_config(ROOT, 64_000, ["prune"]), encoding="utf-8")
    settings = load_settings(path, environ={})
    assert settings.pipeline.context_windows == {"*": 64_000}
