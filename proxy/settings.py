"""Settings: one typed tree loaded from YAML, validated at start-up. A bad option fails at start
with its path (``rules[4].keep_last_observations``), never per request."""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
)

from proxy.pricing import PricingEntry
from proxy.serving_settings import LimitSettings as LimitSettings  # re-exported
from proxy.serving_settings import ServerSettings as ServerSettings  # re-exported
from proxy.settings_env import EnvSettingsError, env_base_urls
from proxy.settings_problems import did_you_mean, format_errors, given, order_problems
from proxy.strict_model import Strict as _Strict
from proxy.upstream_settings import UpstreamSettings, env_name
from proxy.workspace_settings import WorkspaceSettings
from proxy.yaml_unique import load_unique
from rules.base import RuleConfig
from rules.registry import default_rule_names, load_rule


class SettingsError(ValueError):
    """The configuration is invalid; the message names the path of each bad option."""


class StoreSettings(_Strict):
    path: str = "ctxproxy.db"
    # postgresql://user:password@host:port/db selects PostgreSQL, shared by replicas (the
    # CTXPROXY_STORE_URL environment variable wins); unset, the SQLite file ``path``.
    url: str | None = None
    pool_size: int = Field(default=20, ge=2, le=1000)  # PostgreSQL connections per replica
    # Writes held while PostgreSQL is unreachable (or SQLite's file locked); beyond, new ones are
    # dropped (counted).
    buffer_rows: int = Field(default=100_000, ge=100)
    # and their bytes (captured payloads, strings; a principal holds half at most).
    buffer_bytes: int = Field(default=256 * 1024 * 1024, ge=1024 * 1024)
    # How long a request waits for its session held by another replica before going on without
    # saving (its state then is read-only for that request).
    lock_timeout_s: float = Field(default=10.0, gt=0)
    # Each replica's heartbeat; rows left in flight by one silent for 3 beats are marked.
    heartbeat_s: float = Field(default=10.0, gt=0)
    capture_payloads: bool = False
    # The periodic prune (proxy.store.retention) deletes request-log rows older than this, and
    # session state (with its cache report) idle this long; 0 keeps them forever.
    retention_days: float = Field(default=30.0, ge=0, le=36_500)
    session_ttl_days: float = Field(default=14.0, ge=0, le=36_500)

    @field_validator("url")
    @classmethod
    def _postgres_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("postgresql://", "postgres://")):
            raise ValueError("must be a postgresql:// URL (SQLite takes store.path)")
        return value


class AuthSettings(_Strict):
    mode: Literal["passthrough", "keys"] = "passthrough"
    # Comma-separated proxy keys, read from this environment variable (never from the file).
    proxy_keys_env: str = "CTXPROXY_KEYS"
    # Named principals (keys mode): name -> the environment variables holding its keys. Several
    # keys under one name share its sessions (rotate a key without losing them).
    principals: dict[str, list[str]] = Field(default_factory=dict)
    admin_key_env: str = "CTXPROXY_ADMIN_KEY"
    # How long the /ui login cookie stays valid.
    ui_session_hours: float = Field(default=12.0, ge=1 / 60, le=24 * 365)
    # Refuse a Responses request whose previous_response_id was not relayed to the same
    # principal (proxy.server.response_ids).
    check_previous_response_id: bool = True

    @field_validator("principals")
    @classmethod
    def _names(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        for name, envs in value.items():
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", name):
                raise ValueError(
                    f"principal name {name!r}: letters, digits, '_', '.', '-' (at most 64), "
                    "starting with a letter or digit"
                )
            if name in ("anonymous", "legacy") or name.startswith(("pt-", "key-")):
                raise ValueError(f"principal name {name!r} is reserved")
            if not envs:
                raise ValueError(f"principal {name!r}: list the environment variables of its keys")
            for env in envs:
                env_name(env)
        return value

    @field_validator("proxy_keys_env", "admin_key_env")
    @classmethod
    def _key_variables(cls, value: str) -> str:
        env_name(value)
        return value


class UISettings(_Strict):
    # Without an admin key, /ui and /metrics answer loopback clients only; true opens them to all.
    public: bool = False


class PipelineSettings(_Strict):
    on_rule_error: Literal["skip", "fail"] = "skip"
    budget_tokens: int | None = Field(default=None, ge=256)
    output_reserve_tokens: int = Field(default=8_000, ge=0)
    # Context windows by model glob; used when litellm's model metadata does not know the model.
    context_windows: dict[str, int] = Field(default_factory=dict)
    on_over_budget: Literal["forward", "reject"] = "forward"


class ResolverSettings(_Strict):
    """The optional resolver model for references the rules could not settle (off by default)."""

    enabled: bool = False
    model: str = "openai/gpt-4o-mini"  # a litellm model name
    base_url: str | None = None
    api_key_env: str | None = "OPENAI_API_KEY"
    timeout_s: float = Field(default=5.0, gt=0)

    @field_validator("api_key_env")
    @classmethod
    def _key_variable(cls, value: str | None) -> str | None:
        return env_name(value)

    ttl_seconds: float = Field(default=300.0, ge=0)
    describe_pointers: bool = Field(
        default=False,
        description="also ask the model to write the one-line description of a pointer resolved"
        " through a parent session (the identifier stays the rule's; without an answer the"
        " rule's description stands)",
    )


class MemorySettings(_Strict):
    # A stateless client that sends only its newest message gets the session's stored turns back:
    # shorthand for ``track_entities``' ``restore_history`` option (which it sets unless given).
    restore_history: bool = False
    integrity_sample: int = Field(
        default=256,
        ge=0,
        description=(
            "one request in this many checks that no message the session's memos hold was"
            " changed in place, and drops the session's memos if one was (0: never; every"
            " request under the tests' strict engine)"
        ),
    )


class LoggingSettings(_Strict):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    # true: JSON lines; false: text; auto: JSON unless stderr is a terminal (a person reading)
    json_lines: bool | Literal["auto"] = "auto"


class RuleEntry(BaseModel):
    """One entry of ``rules:``: a name plus that rule's own options."""

    model_config = ConfigDict(extra="allow")
    name: str


class ConfiguredRule(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)
    name: str
    config: RuleConfig


class Settings(_Strict):
    server: ServerSettings = Field(default_factory=ServerSettings)
    store: StoreSettings = Field(default_factory=StoreSettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    ui: UISettings = Field(default_factory=UISettings)
    upstreams: list[UpstreamSettings] = Field(default_factory=list)
    pipeline: PipelineSettings = Field(default_factory=PipelineSettings)
    logging: LoggingSettings = Field(default_factory=LoggingSettings)
    resolver: ResolverSettings = Field(default_factory=ResolverSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    workspace: WorkspaceSettings = Field(default_factory=WorkspaceSettings)
    pricing: list[PricingEntry] = Field(
        default_factory=list,
        description="prices and cache rules by model glob, first match wins (proxy.pricing)",
    )
    rules: list[RuleEntry] = Field(
        default_factory=lambda: [RuleEntry(name=n) for n in default_rule_names()]
    )
    # model name -> the upstream serving it, for the upstreams list it was found in (a copy with
    # other upstreams, ``model_copy``, shares the private values: it must not take these routes)
    _routes: tuple[list[UpstreamSettings], dict[str, UpstreamSettings | None]] | None = PrivateAttr(
        default=None
    )
    # upstream name -> the environment variable its base_url came from (load_settings)
    _base_url_from: dict[str, str] = PrivateAttr(default_factory=dict)

    @field_validator("upstreams")
    @classmethod
    def _unique_names(cls, value: list[UpstreamSettings]) -> list[UpstreamSettings]:
        names = [u.name for u in value]
        if len(names) != len(set(names)):
            raise ValueError("upstream names must be unique")
        return value

    def check_keys_mode(self) -> None:
        """``auth.mode: keys``: clients present a proxy key, so the client's bearer must never
        go upstream; every upstream needs its own key variable."""
        if self.auth.mode != "keys":
            return
        problems = [
            f"upstreams[{i}].api_key_env: required with auth.mode: keys (upstream {u.name!r}; "
            "the client's bearer is the proxy key and is never forwarded)"
            for i, u in enumerate(self.upstreams)
            if not u.api_key_env
        ] + self.workspace.keys_mode_problems()
        if problems:
            raise SettingsError("invalid configuration:\n  " + "\n  ".join(problems))

    def check_workspace_roots(self) -> None:
        """``workspace.roots`` keyed by upstream names: a key naming none (a typo) would never
        be used, and that upstream's sessions would picture ``workspace.root`` or nothing."""
        names = [u.name for u in self.upstreams]
        problems = [
            f"workspace.roots.{key}: names no upstream (upstreams: {', '.join(names) or 'none'})"
            for key in self.workspace.roots
            if key not in names
        ]
        if problems and names:
            raise SettingsError("invalid configuration:\n  " + "\n  ".join(problems))

    def configured_rules(self) -> list[ConfiguredRule]:
        """Each rule's options validated by its own Config; raises SettingsError with paths."""
        out: list[ConfiguredRule] = []
        problems: list[str] = order_problems([entry.name for entry in self.rules])
        for i, entry in enumerate(self.rules):
            try:
                module = load_rule(entry.name)
            except KeyError:
                problems.append(
                    f"rules[{i}].name: unknown rule {entry.name!r}"
                    + did_you_mean(entry.name, default_rule_names())
                )
                continue
            options = dict(entry.model_extra or {})
            if entry.name == "track_entities" and self.memory.restore_history:
                options.setdefault("restore_history", True)
            try:
                cfg = module.Config.model_validate(options)
            except ValidationError as exc:
                for err in exc.errors():
                    loc = ".".join(str(p) for p in err["loc"])
                    said = f"rules[{i}].{loc}: {err['msg']}{given(err)}"
                    if err["type"] == "extra_forbidden":
                        said += did_you_mean(err["loc"][-1], module.Config.model_fields)
                    problems.append(said)
                continue
            if cfg.enabled:
                out.append(ConfiguredRule(name=entry.name, config=cfg))
        if problems:
            raise SettingsError("invalid configuration:\n  " + "\n  ".join(problems))
        return out

    def base_url_variable_of(self, upstream: str) -> str | None:
        """The environment variable that set upstream ``upstream``'s base_url, if one did."""
        return self._base_url_from.get(upstream)

    def upstream_for(self, model: str) -> UpstreamSettings | None:
        """The first upstream serving ``model``; memoised per name (bounded: names come from
        clients), since glob matching every request costs more than the lookup."""
        # read from pydantic's private dict directly: ``self._routes`` goes through its
        # ``__getattr__`` (~1 µs, every request)
        private = self.__pydantic_private__
        memo = private["_routes"]  # type: ignore[index]
        if memo is None or memo[0] is not self.upstreams:
            memo = private["_routes"] = (self.upstreams, {})  # type: ignore[index]
        routes = memo[1]
        if model in routes:
            return routes[model]
        if len(routes) >= 1024:
            routes.clear()
        found = routes[model] = next((u for u in self.upstreams if u.serves(model)), None)
        return found

    def pricing_for(self, model: str) -> PricingEntry | None:
        return next((p for p in self.pricing if p.serves(model)), None)

    def context_window_for(self, model: str) -> int | None:
        for pattern, window in self.pipeline.context_windows.items():
            if model == pattern or fnmatch.fnmatchcase(model, pattern):
                return window
        return None


# the top-level keys that are sections of their own (``server:``), not lists (``rules:``)
_SECTIONS = frozenset(
    name
    for name, info in Settings.model_fields.items()
    if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel)
)


def settings_from_mapping(data: dict[str, Any], check_rules: bool = True) -> Settings:
    """``check_rules``: validate each rule's options now (compiling its packs: seconds), as
    ``serve`` and ``rewrite`` need; the commands that only read the store skip it."""
    # a section whose every line is commented out is YAML's null: its defaults, as for ``store:``
    data = {key: value for key, value in data.items() if not (value is None and key in _SECTIONS)}
    try:
        settings = Settings.model_validate(data)
    except ValidationError as exc:
        raise SettingsError(format_errors(exc, Settings)) from None
    settings.check_keys_mode()
    settings.check_workspace_roots()
    if check_rules:
        settings.configured_rules()  # validate rule options now, at start-up
    return settings


def _store_beside(data: dict[str, Any], config: Path) -> dict[str, Any]:
    """A relative ``store.path`` (the default too) is the config file's folder's, not the working
    directory's: ``logs`` and ``show`` find the database from anywhere."""
    store = data.get("store")
    if store is not None and not isinstance(store, dict):
        return data  # validation says what is wrong
    store = dict(store or {})
    path = store.get("path", StoreSettings().path)
    if isinstance(path, str) and path != ":memory:" and not Path(path).is_absolute():
        store["path"] = str(config.resolve().parent / path)
    return {**data, "store": store}


def _config_text(path: Path) -> str:
    """The config file's text; one not in UTF-8 (saved as latin-1 by an older editor) raises
    SettingsError naming the line of its first such byte, not a UnicodeDecodeError traceback."""
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise SettingsError(
            f"cannot read configuration {path}: not UTF-8 text (byte 0x{raw[exc.start]:02x} on "
            f"line {line}); save it as UTF-8"
        ) from None


def load_settings(
    path: str | Path | None,
    environ: Mapping[str, str] | None = None,
    check_rules: bool = True,
) -> Settings:
    """Settings from a YAML file, or the built-in defaults (every rule on) when ``path`` is None;
    an upstream's base_url from ``CTXPROXY_UPSTREAM_<NAME>_BASE_URL`` in ``environ`` (the
    process environment by default) when that is set (``base_url_variable``). ``check_rules``:
    as ``settings_from_mapping``'s."""
    environ = os.environ if environ is None else environ
    if path is None:
        data: Any = {}
    else:
        try:
            data = load_unique(_config_text(Path(path)), str(path)) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise SettingsError(f"cannot read configuration {path}: {exc}") from None
        if not isinstance(data, dict):
            raise SettingsError(f"configuration {path} must be a mapping at the top level")
        data = _store_beside(data, Path(path))
    try:
        data, applied = env_base_urls(data, environ)
    except EnvSettingsError as exc:
        # a mistake in the file (``upstream:`` for ``upstreams:``) is often why a variable names
        # no upstream: the file's own problems are said first, then the variables'
        try:
            settings_from_mapping(data, check_rules)
        except SettingsError as own:
            raise SettingsError(f"{own}\n{exc}") from None
        raise SettingsError(str(exc)) from None
    try:
        settings = settings_from_mapping(data, check_rules)
    except SettingsError as exc:
        if not applied:
            raise
        named = ", ".join(sorted(applied.values()))
        raise SettingsError(f"{exc}\n  (base_url set from the environment: {named})") from None
    settings._base_url_from = applied
    return settings
