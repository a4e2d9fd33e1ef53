"""What a configuration's problems say: each with its path and the value it was given, a typo
with the key or rule it likely meant, and rules listed twice or out of their order."""

from __future__ import annotations

import difflib
import functools
import typing
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from rules.redact import holds_secret
from rules.registry import default_rule_names

_SECRET_PLACES = ("key", "env", "token", "secret", "password", "principal", "auth", "header")


def did_you_mean(name: object, candidates: Iterable[str], cutoff: float = 0.75) -> str:
    """`` (did you mean 'x'?)`` for the candidate ``name`` likely misspells; else nothing."""
    near = difflib.get_close_matches(str(name), list(candidates), n=1, cutoff=cutoff)
    return f" (did you mean {near[0]!r}?)" if near else ""


def given(err: Any) -> str:
    """`` (given: '87a87')``: the value a key was given, where it is one (not a section) and
    cannot be a secret (a key pasted for a variable's name is never shown: no key's, env's,
    token's or principal's value, nor one shaped as a secret)."""
    value = err.get("input") if isinstance(err, Mapping) else None
    if err.get("type") == "extra_forbidden" or not isinstance(value, (str, int, float)):
        return ""
    where = " ".join(str(p) for p in err.get("loc") or ()).lower()
    if any(word in where for word in _SECRET_PLACES) or holds_secret(str(value)):
        return ""
    shown = repr(value)
    return f" (given: {shown if len(shown) <= 60 else shown[:59] + '…'})"


def format_errors(exc: ValidationError, model: type[BaseModel]) -> str:
    """``exc``'s errors as ``invalid configuration:`` lines, an unknown key of ``model``'s with
    the one it likely meant (``upstreams[0].apikey_env``: ``api_key_env``)."""
    lines = []
    for err in exc.errors():
        loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"]).lstrip(".")
        message = f"{loc}: {err['msg']}{given(err)}"
        if err["type"] == "extra_forbidden" and err["loc"] and isinstance(err["loc"][-1], str):
            message += _key_meant(err["loc"], model)
        lines.append(message)
    return "invalid configuration:\n  " + "\n  ".join(lines)


def _key_meant(loc: tuple[int | str, ...], model: type[BaseModel]) -> str:
    """The key an unknown one likely meant: one of its own section's first (``server.prot``:
    'port', not workspace's 'root'; a shortened ``store.pool``: 'pool_size'), else one of any
    section's (a key put in the wrong one)."""
    section = _section_at(model, loc[:-1])
    if section is not None and (said := did_you_mean(loc[-1], section.model_fields, cutoff=0.6)):
        return said
    if homes := _sections_of(model).get(str(loc[-1])):  # ``server.path``: not 'path' again
        return f" (a key of {' and '.join(f'{home}:' for home in homes)})"
    return did_you_mean(loc[-1], known_keys(model))


@functools.cache
def _sections_of(model: type[BaseModel]) -> dict[str, list[str]]:
    """Each key of ``model``'s sections, at any depth -> the sections holding it, by their paths
    (``path`` -> ``store``; ``base_url`` -> ``upstreams[]`` and ``resolver``)."""
    homes: dict[str, list[str]] = {}

    def walk(section: type[BaseModel], where: str) -> None:
        for name, info in section.model_fields.items():
            if where:
                homes.setdefault(name, []).append(where)
            inner = _model_in(info.annotation)
            if inner is not None and inner is not section:
                many = typing.get_origin(info.annotation) is list
                walk(inner, f"{where}.{name}".lstrip(".") + ("[]" if many else ""))

    walk(model, "")
    return homes


def _section_at(model: type[BaseModel], path: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The section (a model) at ``path`` in ``model`` (list indexes passed over); None where it
    is not one."""
    section: type[BaseModel] = model
    for part in path:
        if isinstance(part, int):
            continue
        info = section.model_fields.get(part)
        if info is None:
            return None
        inner = _model_in(info.annotation)
        if inner is None:
            return None
        section = inner
    return section


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model ``annotation`` is, or holds (``list[X]``, ``X | None``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        if (found := _model_in(arg)) is not None:
            return found
    return None


@functools.cache
def known_keys(model: type[BaseModel]) -> tuple[str, ...]:
    """Every key ``model`` and the sections it holds take, at any depth."""
    found: set[str] = set()

    def walk(section: type[BaseModel]) -> None:
        for name, info in section.model_fields.items():
            if name in found:
                continue
            found.add(name)
            for kind in (info.annotation, *typing.get_args(info.annotation)):
                for inner in (kind, *typing.get_args(kind)):
                    if isinstance(inner, type) and issubclass(inner, BaseModel):
                        walk(inner)

    walk(model)
    return tuple(sorted(found))


def order_problems(names: list[str]) -> list[str]:
    """A rule listed twice, or out of the rules' order (each reads what the ones before it made:
    ``measure`` sizes what the others forwarded, ``repair_tool_chain`` mends what they read)."""
    order = {name: i for i, name in enumerate(default_rule_names())}
    problems: list[str] = []
    seen: dict[str, int] = {}
    last = -1
    for i, name in enumerate(names):
        if name in seen:
            problems.append(f"rules[{i}].name: {name!r} is listed twice (rules[{seen[name]}])")
            continue
        seen[name] = i
        at = order.get(name)
        if at is None:
            continue
        if at < last:
            problems.append(
                f"rules[{i}].name: {name!r} out of order; the rules run as "
                + ", ".join(default_rule_names())
                + " (leave out any, keep that order)"
            )
        last = max(last, at)
    return problems
