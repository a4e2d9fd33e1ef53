"""Docs stay true: every rule has a paragraph in the README and a page under docs/rules/, and is
listed in config.example.yaml; the example config loads; the README stays a guide (short); every
relative link in the README and docs/ points to a file that exists."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest
import yaml

from proxy.settings import load_settings
from rules.registry import default_rule_names

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
