"""The built-in rules, in their default order. Explicit, so the order is read here, not inferred."""

from __future__ import annotations

import importlib
from types import ModuleType

# name -> module; a module exposes ``Config`` and ``apply(ctx, cfg)``.
BUILTIN_RULES: dict[str, str] = {
    "repair_tool_chain": "rules.chain.repair_tool_chain",
    "fix_encoding": "rules.encoding.fix_encoding",
    "track_entities": "rules.entities.track_entities",
    "working_set": "rules.context.working_set",
    "workspace_map": "rules.workspace.workspace_map",
    "resolve_refs": "rules.entities.resolve_refs",
    "break_loops": "rules.loops.break_loops",
    "prune": "rules.context.prune",
    "inject": "rules.context.inject",
    "measure": "rules.context.measure",
}


def default_rule_names() -> list[str]:
    return list(BUILTIN_RULES)


def load_rule(name: str) -> ModuleType:
    """The module of rule ``name``; KeyError for a name that is not a built-in rule."""
    if name not in BUILTIN_RULES:
        raise KeyError(name)
    return importlib.import_module(BUILTIN_RULES[name])
