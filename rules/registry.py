"""The built-in rules, in their default order. Explicit, so the order is read here, not inferred."""

from __future__ import annotations

import importlib
from types import ModuleType

# name -> module; a module exposes ``Config`` and ``apply(ctx, cfg)``.
BUILTIN_RULES: dict[str, str] = {
    "repair_tool_chain": "rules.repair_tool_chain",
    "fix_encoding": "rules.fix_encoding",
    "track_entities": "rules.track_entities",
    "working_set": "rules.working_set",
    "resolve_refs": "rules.resolve_refs",
    "prune": "rules.prune",
    "inject": "rules.inject",
    "measure": "rules.measure",
}


def default_rule_names() -> list[str]:
    return list(BUILTIN_RULES)


def load_rule(name: str) -> ModuleType:
    """The module of rule ``name``; KeyError for a name that is not a built-in rule."""
    if name not in BUILTIN_RULES:
        raise KeyError(name)
    return importlib.import_module(BUILTIN_RULES[name])
