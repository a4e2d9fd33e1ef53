"""The real agent CLIs, Claude Code 2.1.330, Codex 0.169.0 and Gemini CLI 0.61.0, run offline
against a base URL.

``bin/test`` installs them from npm into ``$CTXPROXY_CLI_CACHE`` (default
``~/.cache/ctxproxy-clis``) when they are missing; :func:`claude_binary` / :func:`codex_binary`
/ :func:`gemini_binary` find them there (or at ``$CTXPROXY_CLAUDE_BIN`` / ``$CTXPROXY_CODEX_BIN``
/ ``$CTXPROXY_GEMINI_BIN``) and skip the calling
test with the reason when they are not there. Each run uses the recipe of
``../shared/agents/README.md``: a clean environment (``env -i``), a throwaway ``HOME``, dummy keys,
non-essential traffic off, no retries, short timeouts."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pytest

CLAUDE_VERSION = "2.1.330"
CODEX_VERSION = "0.169.0"
CLAUDE_KEY = "sk-ant-dummy-cli-key-000000"
CODEX_KEY = "sk-dummy-codex-key-000000"
GEMINI_VERSION = "0.61.0"
GEMINI_KEY = "dummy-gemini-key-000000"


def cli_cache() -> Path:
    default = Path.home() / ".cache" / "ctxproxy-clis"
    return Path(os.environ.get("CTXPROXY_CLI_CACHE") or default)


def _version(binary: Path, env: dict[str, str]) -> str:
    try:
        out = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=30, env=env
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"<{exc}>"
    return (out.stdout or out.stderr).strip()


def _find(env_var: str, relative: str, version: str, what: str) -> Path:
    """The binary, or a skip saying why there is none."""
    given = os.environ.get(env_var)
    path = Path(given) if given else cli_cache() / "node_modules" / ".bin" / relative
    if not path.exists():
        hint = "npm unavailable or offline?" if not shutil.which("npm") else "run bin/test"
        pytest.skip(f"{what} {version} not installed at {path} ({hint})")
    if shutil.which("node") is None:
        pytest.skip(f"{what} needs node on PATH")
    got = _version(path, base_env(Path("/tmp")))
    if version not in got:
        pytest.skip(f"{what} at {path} is {got!r}, not {version}")
    return path


_found: dict[str, Path] = {}


def claude_binary() -> Path:
    if "claude" not in _found:
        _found["claude"] = _find("CTXPROXY_CLAUDE_BIN", "claude", CLAUDE_VERSION, "Claude Code")
    return _found["claude"]


def codex_binary() -> Path:
    if "codex" not in _found:
        _found["codex"] = _find("CTXPROXY_CODEX_BIN", "codex", CODEX_VERSION, "Codex")
    return _found["codex"]


def gemini_binary() -> Path:
    if "gemini" not in _found:
        _found["gemini"] = _find("CTXPROXY_GEMINI_BIN", "gemini", GEMINI_VERSION, "Gemini CLI")
    return _found["gemini"]


def base_env(home: Path) -> dict[str, str]:
    """What ``env -i PATH=… HOME=… TERM=dumb`` leaves, plus node's directory on PATH."""
    node = shutil.which("node")
    dirs = [str(Path(node).parent)] if node else []
    dirs += [d for d in ("/usr/local/bin", "/usr/bin", "/bin") if d not in dirs]
    return {"PATH": ":".join(dirs), "HOME": str(home), "TERM": "dumb", "LANG": "C.UTF-8"}


@dataclass
class Run:
    args: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def explain(self) -> str:
        return (
            f"$ {' '.join(self.args)}\nexit {self.returncode} after {self.seconds:.1f}s\n"
            f"--- stdout\n{self.stdout[-3000:]}\n--- stderr\n{self.stderr[-3000:]}"
        )


def _run(args: list[str], env: dict[str, str], cwd: Path, timeout: float) -> Run:
    start = time.monotonic()
    try:
        done = subprocess.run(
            args,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        code, out, err = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as exc:
        code = -9
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else ""
        err = (exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else "") + (
            f"\n<timed out after {timeout}s>"
        )
    return Run(args, code, out, err, time.monotonic() - start)


# ---------------------------------------------------------------------------------------------
# Claude Code


@dataclass
class Claude:
    """``claude -p`` against ``base_url`` (no ``/v1``), with a throwaway HOME kept across runs
    so ``--continue`` finds the last session of ``workdir``."""

    base_url: str
    home: Path
    workdir: Path
    key: str = CLAUDE_KEY
    extra_env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        self.workdir.mkdir(parents=True, exist_ok=True)
        # What the TUI would ask about; harmless for -p, and keeps any first-run prompt away.
        config = {
            "hasCompletedOnboarding": True,
            "bypassPermissionsModeAccepted": True,
            "customApiKeyResponses": {"approved": [self.key[-20:]], "rejected": []},
            "projects": {str(self.workdir): {"hasTrustDialogAccepted": True, "allowedTools": []}},
        }
        (self.home / ".claude.json").write_bytes(orjson.dumps(config))

    def env(self) -> dict[str, str]:
        return {
            **base_env(self.home),
            "IS_SANDBOX": "1",  # root may use --dangerously-skip-permissions
            "ANTHROPIC_BASE_URL": self.base_url,
            "ANTHROPIC_API_KEY": self.key,
            "DISABLE_TELEMETRY": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "CLAUDE_CODE_MAX_RETRIES": "0",
            "API_TIMEOUT_MS": "15000",
            **self.extra_env,
        }

    def run(self, prompt: str, *flags: str, timeout: float = 30) -> Run:
        args = [
            str(claude_binary()),
            "-p",
            *flags,
            prompt,
            "--dangerously-skip-permissions",
            "--output-format",
            "json",
        ]
        return _run(args, self.env(), self.workdir, timeout)


# ---------------------------------------------------------------------------------------------
# Codex


@dataclass
class Codex:
    """``codex exec`` with ``$CODEX_HOME/config.toml`` pointing at ``base_url`` (``…/v1``).

    ``provider="ctx"`` is a custom provider (``wire_api = "responses"``, no websockets);
    ``provider="openai"`` redirects the built-in provider with ``openai_base_url``, which tries a
    websocket first."""

    base_url: str
    home: Path
    workdir: Path
    provider: str = "ctx"
    model: str = "gpt-5"
    key: str = CODEX_KEY
    extra_env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.codex_home.mkdir(parents=True, exist_ok=True)
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.codex_home / "config.toml").write_text(self.config_toml())

    @property
    def codex_home(self) -> Path:
        return self.home / ".codex"

    def config_toml(self) -> str:
        top = f'model = "{self.model}"\n'
        if self.provider == "openai":
            return top + f'openai_base_url = "{self.base_url}"\n'
        return top + (
            'model_provider = "ctx"\n'
            "[model_providers.ctx]\n"
            'name = "ctx"\n'
            f'base_url = "{self.base_url}"\n'
            'wire_api = "responses"\n'
            'env_key = "CTX_KEY"\n'
            "request_max_retries = 0\n"
            "stream_max_retries = 0\n"
            "stream_idle_timeout_ms = 15000\n"
        )

    def env(self) -> dict[str, str]:
        env = {**base_env(self.home), "CODEX_HOME": str(self.codex_home), "CTX_KEY": self.key}
        if self.provider == "openai":
            env["OPENAI_API_KEY"] = self.key
        return {**env, **self.extra_env}

    def run(self, prompt: str, *before: str, timeout: float = 30) -> Run:
        """``codex exec [before…] --skip-git-repo-check … prompt``; ``before`` may be
        ``("resume", "--last")``."""
        args = [
            str(codex_binary()),
            "exec",
            *before,
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            prompt,
        ]
        return _run(args, self.env(), self.workdir, timeout)


# ---------------------------------------------------------------------------------------------
# Gemini CLI


@dataclass
class Gemini:
    """``gemini -p … --yolo -o json`` against ``base_url`` (``GOOGLE_GEMINI_BASE_URL``, no
    ``/v1beta``), with a throwaway HOME (its settings select the API-key auth, which ``-p`` needs,
    and turn folder trust off, so ``--yolo`` never prompts) kept across runs so ``--resume
    latest`` finds the last session of ``workdir``."""

    base_url: str
    home: Path
    workdir: Path
    key: str = GEMINI_KEY
    extra_env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        (self.home / ".gemini").mkdir(parents=True, exist_ok=True)
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.home / "tmp").mkdir(exist_ok=True)
        settings = {
            "security": {
                "auth": {"selectedType": "gemini-api-key"},
                "folderTrust": {"enabled": False},
            },
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "general": {"disableAutoUpdate": True},
        }
        (self.home / ".gemini" / "settings.json").write_bytes(orjson.dumps(settings))

    def env(self) -> dict[str, str]:
        return {
            **base_env(self.home),
            "TMPDIR": str(self.home / "tmp"),  # the CLI writes its error reports there
            "GOOGLE_GEMINI_BASE_URL": self.base_url,
            "GEMINI_API_KEY": self.key,
            **self.extra_env,
        }

    def run(self, prompt: str, *flags: str, timeout: float = 60) -> Run:
        args = [str(gemini_binary()), "-p", prompt, "--yolo", "-o", "json", *flags]
        return _run(args, self.env(), self.workdir, timeout)
