"""Docs stay true: every rule has a paragraph in the README and a page under docs/rules/, and is
listed in config.example.yaml; the example config loads; the README stays a guide (short); every
relative link in the README and docs/ points to a file that exists."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest
import yaml

from bench import option_docs
from proxy.settings import load_settings
from rules.registry import default_rule_names, load_rule

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_README_LINES = 260

# [text](target) and [text](target "title"); images too. Reference-style links are not used.
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
_CODE_SPAN = re.compile(r"`[^`\n]*`")


def _readme_rule_paragraphs() -> str:
    text = README.read_text()
    start, end = text.find("<!-- rules:start -->"), text.find("<!-- rules:end -->")
    assert 0 <= start < end, "README lacks the <!-- rules:start --> … <!-- rules:end --> block"
    return text[start:end]


def _doc_files() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def _relative_links(path: Path) -> list[str]:
    text = _CODE_SPAN.sub("", _FENCE.sub("", path.read_text()))
    links = []
    for target in _LINK.findall(text):
        if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith(("#", "//")):
            continue  # http(s):, mailto:, … and same-page anchors
        links.append(target)
    return links


def test_every_rule_is_in_readme_and_example_config() -> None:
    rules_block = _readme_rule_paragraphs()
    config = yaml.safe_load((ROOT / "config.example.yaml").read_text())
    listed = [r["name"] for r in config["rules"]]
    for name in default_rule_names():
        assert f"### {name}" in rules_block, f"README lacks a paragraph for rule {name}"
        assert f"docs/rules/{name}.md" in rules_block, f"README's {name} paragraph lacks its link"
        assert name in listed, f"config.example.yaml does not list rule {name}"


def test_every_rule_has_its_page() -> None:
    for name in default_rule_names():
        page = DOCS / "rules" / f"{name}.md"
        assert page.is_file(), f"docs/rules/{name}.md is missing"
        assert page.read_text().startswith(f"# {name}\n"), f"{page.name} should open with its name"


def test_readme_is_a_guide_not_a_notebook() -> None:
    lines = len(README.read_text().splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines; move detail to docs/"


def test_readme_links_the_docs() -> None:
    links = set(_relative_links(README))
    for page in ("docs/security.md", "docs/performance.md", "docs/operations.md"):
        assert page in links, f"README does not link {page}"


@pytest.mark.parametrize("path", _doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_to_existing_files(path: Path) -> None:
    broken = []
    for target in _relative_links(path):
        file_part = unquote(target.split("#", 1)[0].split("?", 1)[0])
        if not file_part:
            continue
        if not (path.parent / file_part).resolve().exists():
            broken.append(target)
    assert not broken, f"{path.relative_to(ROOT)} links to missing files: {broken}"


def test_link_checker_sees_links() -> None:
    """The checker must not pass by finding nothing: the README links every rule page."""
    links = _relative_links(README)
    assert {f"docs/rules/{n}.md" for n in default_rule_names()} <= set(links)


def test_example_config_loads() -> None:
    settings = load_settings(ROOT / "config.example.yaml")
    assert [r.name for r in settings.configured_rules()] == default_rule_names()


def test_readme_test_command_is_what_ci_runs() -> None:
    assert "bin/test" in (ROOT / ".ci" / "run").read_text()
    assert "bin/test" in README.read_text()


def test_option_tables_match_the_rules_config() -> None:
    """The rule pages' option tables and config.example.yaml's ``rules:`` are generated from
    each rule's Config; regenerate with ``python -m bench.option_docs --write``."""
    drifted = option_docs.drift()
    assert not drifted, (
        "option tables drifted from the rules' Config (run python -m bench.option_docs --write):\n"
        + "".join(drifted.values())
    )


@pytest.mark.parametrize("name", default_rule_names())
def test_every_rule_option_has_a_description(name: str) -> None:
    fields = load_rule(name).Config.model_fields
    assert "enabled" in fields
    for option, info in fields.items():
        text = (info.description or "").strip()
        assert text, f"{name}.{option} has no Field(description=…)"
        assert "\n" not in text, f"{name}.{option}'s description spans lines"


def test_example_config_states_each_rules_defaults() -> None:
    """Every option is listed in config.example.yaml, at a value equal to its default."""
    config = yaml.safe_load((ROOT / "config.example.yaml").read_text())
    for entry in config["rules"]:
        options = {k: v for k, v in entry.items() if k != "name"}
        config_cls = load_rule(entry["name"]).Config
        assert set(options) == set(config_cls.model_fields), entry["name"]
        assert config_cls.model_validate(options) == config_cls(), entry["name"]


def test_option_check_sees_a_changed_description(monkeypatch: pytest.MonkeyPatch) -> None:
    """The drift check must not pass by comparing nothing: a changed description is drift."""
    real = option_docs.rule_options

    def changed(rule: str) -> list[option_docs.Option]:
        opts = real(rule)
        if rule != "prune":
            return opts
        return [option_docs.Option(o.name, o.default, o.description + " (x)") for o in opts]

    monkeypatch.setattr(option_docs, "rule_options", changed)
    drifted = option_docs.drift()
    assert set(drifted) == {DOCS / "rules" / "prune.md", ROOT / "config.example.yaml"}


_MODULE_PATH = re.compile(r"`((?:proxy|rules|bench|tests)/[\w/]+\.py)`")


def test_architecture_names_modules_that_exist() -> None:
    """Every module path docs/architecture.md names in backticks (`proxy/...py`) exists."""
    named = set(_MODULE_PATH.findall((DOCS / "architecture.md").read_text()))
    assert {"proxy/rewrite/session_memos.py", "rules/base.py"} <= named  # the check sees paths
    missing = sorted(p for p in named if not (ROOT / p).is_file())
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"


def test_the_migrations_named_in_the_docs_are_the_first_and_the_last() -> None:
    """operations.md names the range of the stores' migrations: it went stale as they grew."""
    from proxy.store.migrations import MIGRATIONS

    text = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    first, last = MIGRATIONS[0][0], MIGRATIONS[-1][0]
    assert f"(`{first}` … `{last}`" in text
