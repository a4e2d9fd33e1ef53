"""Loading the YAML packs in ``rules/packs/`` plus the user's own pack files.

A user pack is a YAML mapping whose top-level keys name the packs it extends (``tools``,
``shell_verbs``, ``references``): lists are appended (duplicates dropped), mappings merged
recursively, scalars replaced. Loading happens when a rule's config is validated (a bad file fails
at start-up); the result is cached per tuple of extra files, so requests only look it up.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

BUILTIN_DIR = Path(__file__).resolve().parent / "packs"


def merge(base: Any, extra: Any) -> Any:
    """``extra`` laid over ``base``: lists appended (no duplicates), mappings merged."""
    if isinstance(base, Mapping) and isinstance(extra, Mapping):
        out = dict(base)
        for key, value in extra.items():
            out[key] = merge(out[key], value) if key in out else value
        return out
    if isinstance(base, list) and isinstance(extra, list):
        return base + [v for v in extra if v not in base]
    return extra


def _read_yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"cannot read pack {path}: {exc}") from None


@functools.lru_cache(maxsize=64)
def load_pack(name: str, extra_files: tuple[str, ...] = ()) -> Mapping[str, Any]:
    """The built-in pack ``name`` with the ``name:`` sections of ``extra_files`` merged in.

    Raises ValueError (which pydantic reports with the option's path) for a missing or bad file.
    """
    data = _read_yaml(BUILTIN_DIR / f"{name}.yaml")
    if not isinstance(data, dict):
        raise ValueError(f"built-in pack {name} is not a mapping")
    for file in extra_files:
        extra = _read_yaml(Path(file))
        if not isinstance(extra, dict):
            raise ValueError(f"pack file {file} must be a mapping of pack name -> content")
        section = extra.get(name)
        if section is None:
            continue
        if not isinstance(section, dict):
            raise ValueError(f"pack file {file}: section {name!r} must be a mapping")
        data = merge(data, section)
    return data
