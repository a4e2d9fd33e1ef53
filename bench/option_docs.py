"""The rules' option tables, generated from each rule's ``Config`` (its fields' defaults and
``Field(description=…)``), so the defaults are stated in one place:

- in each ``docs/rules/<rule>.md``, the table between ``<!-- options:begin -->`` and
  ``<!-- options:end -->``;
- in ``config.example.yaml``, the ``rules:`` section between ``# rules:begin`` and ``# rules:end``
  (every rule in the default order, each option at its default, its description as a comment).

    .venv/bin/python -m bench.option_docs            # check: exit 1 and show the drift, if any
    .venv/bin/python -m bench.option_docs --write    # rewrite the generated parts

Everything outside the markers is left as it is. ``tests/test_docs.py`` runs the check."""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo

from rules.registry import BUILTIN_RULES, load_rule

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "config.example.yaml"
RULE_DOCS = ROOT / "docs" / "rules"
COMMAND = "python -m bench.option_docs --write"

MD_BEGIN, MD_END = "<!-- options:begin -->", "<!-- options:end -->"
YAML_BEGIN, YAML_END = "# rules:begin", "# rules:end"
YAML_WIDTH = 100  # the comments are wrapped to stay within it

# A YAML scalar that reads back as the same string (no quoting needed).
_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_./-]*$")
_YAML_WORDS = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}


@dataclass(frozen=True)
class Option:
    name: str
    default: Any
    description: str


def rule_options(rule: str) -> list[Option]:
    """Rule ``rule``'s options in declaration order (``enabled``, from RuleConfig, first)."""
    fields: dict[str, FieldInfo] = load_rule(rule).Config.model_fields
    return [
        Option(name, info.get_default(call_default_factory=True), info.description or "")
        for name, info in fields.items()
    ]


def _number(value: float, *, grouped: bool) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # 300.0 reads as 300 (the option takes either)
    return f"{value:,}" if grouped and isinstance(value, int) else repr(value)


def yaml_value(value: Any) -> str:
    """``value`` as a YAML flow scalar or sequence that loads back to an equal value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return _number(value, grouped=False)
    if isinstance(value, str):
        if _PLAIN.match(value) and value.lower() not in _YAML_WORDS:
            return value
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(yaml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{yaml_value(k)}: {yaml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no YAML form for default {value!r}")


def markdown_default(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return yaml_value(value)
    if isinstance(value, int | float):
        return _number(value, grouped=True)
    return f"`{yaml_value(value)}`"


def markdown_table(rule: str) -> str:
    module = load_rule(rule).Config.__module__.replace(".", "/")  # where its options are written
    lines = [
        f"<!-- generated from {module}.py's Config by `{COMMAND}` -->",
        "| option | default | description |",
        "|---|---|---|",
    ]
    for opt in rule_options(rule):
        text = opt.description.replace("|", "\\|")
        lines.append(f"| `{opt.name}` | {markdown_default(opt.default)} | {text} |")
    return "\n".join(lines)


def yaml_rules() -> str:
    rows: list[tuple[str, str]] = []  # (line, comment)
    for rule in BUILTIN_RULES:
        rows.append((f"  - name: {rule}", ""))
        for opt in rule_options(rule):
            rows.append((f"    {opt.name}: {yaml_value(opt.default)}", opt.description))
    width = max(len(line) for line, comment in rows if comment) + 2
    lines = [
        "# Every rule's options at their defaults, generated from the rules' Config by",
        f"# `{COMMAND}` (edit the descriptions there, not here).",
        "rules:",
    ]
    for line, comment in rows:
        if not comment:
            lines.append(line)
            continue
        # a long description goes on under its first line, at the same column
        wrapped = textwrap.wrap(comment, YAML_WIDTH - width - 2, break_on_hyphens=False)
        lines.append(f"{line.ljust(width)}# {wrapped[0]}")
        lines.extend(f"{'':{width}}# {more}" for more in wrapped[1:])
    return "\n".join(lines)


def _replace_between(text: str, begin: str, end: str, body: str, where: Path) -> str:
    start, stop = text.find(begin), text.find(end)
    if start < 0 or stop < start or text.count(begin) != 1 or text.count(end) != 1:
        raise ValueError(f"{where.relative_to(ROOT)}: needs one {begin} … {end} pair")
    return text[: start + len(begin)] + "\n" + body + "\n" + text[stop:]


def expected() -> dict[Path, str]:
    """Each generated file with its generated parts as they should be."""
    out: dict[Path, str] = {}
    for rule in BUILTIN_RULES:
        page = RULE_DOCS / f"{rule}.md"
        out[page] = _replace_between(page.read_text(), MD_BEGIN, MD_END, markdown_table(rule), page)
    out[EXAMPLE] = _replace_between(
        EXAMPLE.read_text(), YAML_BEGIN, YAML_END, yaml_rules(), EXAMPLE
    )
    return out


def drift() -> dict[Path, str]:
    """A unified diff per file whose generated parts are out of date (empty: all current)."""
    diffs: dict[Path, str] = {}
    for path, want in expected().items():
        have = path.read_text()
        if have != want:
            name = str(path.relative_to(ROOT))
            diffs[path] = "".join(
                difflib.unified_diff(
                    have.splitlines(keepends=True),
                    want.splitlines(keepends=True),
                    fromfile=f"{name} (as it is)",
                    tofile=f"{name} (generated)",
                )
            )
    return diffs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite the generated parts")
    args = parser.parse_args(argv)
    try:
        wanted = expected()
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 1
    changed = [path for path, text in wanted.items() if path.read_text() != text]
    if args.write:
        for path in changed:
            path.write_text(wanted[path])
            print(f"wrote {path.relative_to(ROOT)}")
        return 0
    if not changed:
        return 0
    for diff in drift().values():
        sys.stdout.write(diff)
    names = ", ".join(str(p.relative_to(ROOT)) for p in changed)
    print(f"\noption tables drifted from the rules' Config in: {names}\nrun: {COMMAND}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
