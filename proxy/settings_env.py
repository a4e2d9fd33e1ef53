"""Upstream base URLs from the operator's environment: ``CTXPROXY_UPSTREAM_<NAME>_BASE_URL``
replaces the named upstream's ``base_url`` before the settings are validated."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from proxy.upstream_settings import HTTP_URL


class EnvSettingsError(ValueError):
    """A base-URL variable naming no upstream, two, or holding no http(s) URL."""


BASE_URL_VARIABLE = re.compile(r"CTXPROXY_UPSTREAM_([A-Z0-9_]+)_BASE_URL")
# one in another case: the environment's names are case-sensitive, so it would go unread, and
# the requests it meant to keep from the provider would go there
ANY_CASE = re.compile(r"ctxproxy_upstream_(.+)_base_url", re.IGNORECASE)


def base_url_variable(name: str) -> str:
    """The environment variable that overrides upstream ``name``'s base_url:
    ``CTXPROXY_UPSTREAM_<NAME>_BASE_URL``, the name upper-cased with every character but a letter
    or digit as ``_`` (``claude`` -> ``CTXPROXY_UPSTREAM_CLAUDE_BASE_URL``)."""
    return f"CTXPROXY_UPSTREAM_{re.sub(r'[^A-Z0-9]', '_', name.upper())}_BASE_URL"


def env_base_urls(
    data: dict[str, Any], environ: Mapping[str, str]
) -> tuple[dict[str, Any], dict[str, str]]:
    """``data`` with each upstream's base_url replaced by its non-empty
    ``CTXPROXY_UPSTREAM_<NAME>_BASE_URL``, and {upstream name: variable} of those applied. The
    server's environment is the operator's (a request never reaches it); a variable naming no
    upstream, two upstreams, or holding no http(s) URL fails start-up rather than letting
    requests go where the operator did not mean them to."""
    wanted = {
        k: v.strip() for k, v in environ.items() if BASE_URL_VARIABLE.fullmatch(k) and v.strip()
    }
    cased = [
        f"{k}: the variable's name is upper case ({base_url_variable(m.group(1))})"
        for k, v in sorted(environ.items())
        if (m := ANY_CASE.fullmatch(k)) and not BASE_URL_VARIABLE.fullmatch(k) and v.strip()
    ]
    if cased:
        raise EnvSettingsError("invalid configuration:\n  " + "\n  ".join(cased))
    if not wanted:
        return data, {}
    upstreams = data.get("upstreams")
    entries = upstreams if isinstance(upstreams, list) else []
    named: dict[str, list[int]] = {}
    for i, entry in enumerate(entries):
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            named.setdefault(base_url_variable(entry["name"]), []).append(i)
    problems = []
    applied: dict[str, str] = {}
    replaced = list(entries)
    for variable, url in sorted(wanted.items()):
        where = named.get(variable, [])
        if len(where) != 1:
            names = ", ".join(repr(e["name"]) for e in entries if isinstance(e, dict)) or "none"
            what = "no upstream" if not where else "more than one upstream"
            problems.append(f"{variable}: {what} has that name (upstreams: {names})")
        elif not HTTP_URL.fullmatch(url):
            problems.append(f"{variable}: not an http:// or https:// URL")
        else:
            entry = entries[where[0]]
            replaced[where[0]] = {**entry, "base_url": url}
            applied[entry["name"]] = variable
    if problems:
        raise EnvSettingsError("invalid configuration:\n  " + "\n  ".join(problems))
    return {**data, "upstreams": replaced}, applied
