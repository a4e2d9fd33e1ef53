"""What ``ctxproxy serve`` says at start-up, in one line: version, address, where each model goes
(match patterns, kind and URL, never a key or a password), the database, the /ui address."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from proxy.settings import Settings
from proxy.upstream_settings import UpstreamSettings


def announce(message: str) -> None:
    """One start-up line through the configured log handler (a JSON line with json_lines), shown
    whatever logging.level is: who may open /ui must never be a surprise."""
    import logging

    logger = logging.getLogger("ctxproxy.serve")
    record = logger.makeRecord(logger.name, logging.INFO, __file__, 0, message, (), None)
    for handler in logging.getLogger("ctxproxy").handlers:
        handler.handle(record)


def startup_line(
    settings: Settings, host: str, port: int, db_path: str, config: str | None = None
) -> str:
    """What a newcomer needs in the first minute: version, address, where each model goes (match
    patterns and kind, never a key), the database, the /ui address."""
    from proxy import __version__
    from proxy.store.base import masked
    from proxy.store.factory import is_postgres

    if is_postgres(db_path):
        database = masked(db_path)
    else:
        database = str(Path(db_path).resolve()) if db_path != ":memory:" else db_path
    where = f"[{host}]" if ":" in host else host
    base = f"http://{where}:{port}"
    routes = "; ".join(
        f"{u.name} ({u.kind}{'/' + u.provider if u.provider else ''}{_from_env(settings, u.name)})"
        f": {', '.join(u.match)}{_url_of(settings, u)}"
        for u in settings.upstreams
    )
    if not routes and config:  # every model would be a 404: say how to give it somewhere to go
        routes = f"none (every model is refused: {config} has no upstreams: section; add one, or "
        routes += "start it with --upstream URL)"
    elif not routes:
        routes = "none (every model is refused: start it with --config FILE or --upstream URL)"
    # bound to every address: the page is at this host's name, not at the wildcard
    shown = f"http://<this host>:{port}" if host in ("0.0.0.0", "::", "") else base
    return (
        f"ctxproxy {__version__} listening on {base} · upstreams: {routes} · "
        f"database: {database} · "
        f"ui: {shown}/ui"
    )


def _url_of(settings: Settings, upstream: UpstreamSettings) -> str:
    """Where an upstream's requests go (a password in the URL masked); one set from the
    environment is named by its variable instead (``_from_env``)."""
    from proxy.store.base import masked

    if settings.base_url_variable_of(upstream.name):
        return ""
    if upstream.base_url:
        return f" -> {masked(upstream.base_url)}"
    if upstream.kind == "anthropic":
        return " -> https://api.anthropic.com"
    if upstream.kind == "gemini":
        return " -> https://generativelanguage.googleapis.com"
    return " -> the provider's default URL"


def _from_env(settings: Settings, upstream: str) -> str:
    """Where an upstream's base_url came from when not the file: the variable, never its value."""
    variable = settings.base_url_variable_of(upstream)
    return f", base_url from {variable}" if variable else ""


def unset_key_variables(settings: Settings, environ: Mapping[str, str]) -> list[str]:
    """What to warn of at start-up: each upstream whose key variable (``api_key_env``) is unset
    or empty. Its key is read from there and nowhere else (never the client's, in keys mode),
    so each of its requests is refused (``upstream_key_missing``) until it is set."""
    out = [
        f"upstream {u.name!r}: its key variable {u.api_key_env} is not set; its requests are "
        "refused (500 upstream_key_missing) until it is set and the server restarted"
        for u in settings.upstreams
        if u.api_key_env and not environ.get(u.api_key_env, "").strip()
    ]
    if settings.auth.mode == "keys":  # a principal's key variable unset: that principal is out
        out += [
            f"principal {name!r}: its key variable {var} is not set; that key is not accepted"
            for name, variables in settings.auth.principals.items()
            for var in variables
            if not environ.get(var, "").strip()
        ]
    return out


def unreachable_upstreams(settings: Settings) -> list[str]:
    """What to warn of at start-up: the upstreams after one that matches every model (``*``):
    the first match wins, so none of their models ever reaches them."""
    for i, upstream in enumerate(settings.upstreams[:-1]):
        if "*" in upstream.match:
            return [
                f"upstream {u.name!r} is never used: {upstream.name!r} before it matches every "
                'model ("*"); put the catch-all last'
                for u in settings.upstreams[i + 1 :]
            ]
    return []


def overridden_shorthands(settings: Settings) -> list[str]:
    """What to warn of at start-up: ``memory.restore_history: true`` with track_entities' own
    ``restore_history: false``, which wins. The shipped config lists every rule option at its
    default, so turning on the shorthand there alone restored nothing."""
    if not settings.memory.restore_history:
        return []
    return [
        f"memory.restore_history: true, but rules[{i}].restore_history: false (track_entities' "
        "own option) wins: no history is restored; set that one to true, or remove it"
        for i, entry in enumerate(settings.rules)
        if entry.name == "track_entities"
        and (entry.model_extra or {}).get("restore_history") is False
    ]
