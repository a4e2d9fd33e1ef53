"""The lock (constraints.txt, written by bin/lock): the tests run on the versions it pins, it pins
every package the project and its test extras need, pyproject.toml keeps ranges, every install
path goes through it, and bin/_env installs what each command needs (serving: no test extras)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
CONSTRAINTS = ROOT / "constraints.txt"
# What the proxy's behaviour rests on: a drift in one of these is a different proxy.
KEY_PACKAGES = ("litellm", "starlette", "uvicorn", "aiohttp", "pydantic", "orjson", "tiktoken")


def pins(text: str | None = None) -> dict[str, str]:
    """{canonical name: version} of constraints.txt (or ``text``)."""
    found = {}
    for line in (CONSTRAINTS.read_text() if text is None else text).splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep and version, f"constraints.txt: not a pin: {line!r}"
            found[canonicalize_name(name)] = version.strip()
    return found


def installed(name: str) -> str | None:
    try:
        return distribution(name).version
    except PackageNotFoundError:
        return None


def test_the_key_packages_run_at_their_pinned_versions() -> None:
    locked = pins()
    drift = {
        name: (installed(name), locked.get(name))
        for name in KEY_PACKAGES
        if installed(name) != locked.get(name)
    }
    assert not drift, (
        f"installed != pinned: {drift}; install the lock "
        "(pip install -c constraints.txt -e '.[test]', as bin/test does) or run bin/lock"
    )


def _needed() -> dict[str, str]:
    """Every distribution pyproject.toml's dependencies and test extras need here, transitively
    (through the installed packages' metadata): {name: who needs it}."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    roots = [*project["dependencies"], *project["optional-dependencies"]["test"]]
    seen: dict[str, str] = {}
    todo = [(Requirement(text), "pyproject.toml") for text in roots]
    while todo:
        req, parent = todo.pop()
        name = canonicalize_name(req.name)
        if name in seen or installed(name) is None:  # None: an optional one this platform skips
            continue
        seen[name] = parent
        for text in distribution(name).requires or []:
            dep = Requirement(text)
            wanted = req.extras or {""}
            if dep.marker is None or any(dep.marker.evaluate({"extra": e}) for e in wanted):
                todo.append((dep, name))
    return seen


def test_every_dependency_of_the_project_and_its_test_extras_is_pinned() -> None:
    """A dependency added to pyproject.toml (or brought by an upgrade) without bin/lock fails."""
    needed = _needed()
    assert {"litellm", "httpx", "pydantic-core", "pytest"} <= set(needed)  # the walk walks
    unpinned = {name: by for name, by in needed.items() if name not in pins()}
    assert not unpinned, f"needed but not in constraints.txt (run bin/lock): {unpinned}"
    wrong = {n: (installed(n), pins()[n]) for n in needed if installed(n) != pins()[n]}
    assert not wrong, f"installed != pinned (bin/test reinstalls from the lock): {wrong}"


def test_the_lock_pins_without_the_project_and_pyproject_keeps_ranges() -> None:
    locked = pins()
    assert "ctxproxy" not in locked and "pip" not in locked
    assert (
        "fastapi" not in locked
    )  # litellm's proxy server stays out (proxy.upstream.litellm_messages)
    text = (ROOT / "pyproject.toml").read_text()
    deps = re.findall(r'^\s+"([^"]+)",', text, re.M)
    assert deps and not [d for d in deps if "==" in d], "pyproject.toml states ranges, not pins"


def test_every_install_path_installs_from_the_lock() -> None:
    env = (ROOT / "bin" / "_env").read_text()
    assert '-c "$ROOT/constraints.txt"' in env and "constraints.txt" in env.split("digest=")[1]
    docker = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^COPY [^\n]*constraints\.txt", docker, re.M)
    assert "pip install --no-cache-dir -c constraints.txt ." in docker
    assert "bin/test" in (ROOT / ".ci" / "run").read_text()
    assert 'EXTRAS="test"' in (ROOT / "bin" / "test").read_text()
    assert 'EXTRAS=""' in (ROOT / "bin" / "serve").read_text()
    lock = (ROOT / "bin" / "lock").read_text()
    assert "pip freeze --all --exclude pip --exclude ctxproxy" in lock


# ---------------------------------------------------------------------------------------------
# bin/_env, with a stand-in interpreter that records what it was asked to install


@pytest.fixture
def env_root(tmp_path: Path) -> Path:
    """A copy of what bin/_env reads (itself, pyproject.toml, constraints.txt) and a venv whose
    python only logs its arguments."""
    root = tmp_path / "root"
    (root / "bin").mkdir(parents=True)
    for name in ("bin/_env", "pyproject.toml", "constraints.txt"):
        shutil.copy(ROOT / name, root / name)
    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text('#!/bin/sh\necho "$*" >> "$PIP_LOG"\n')
    python.chmod(0o755)
    return root


def _source_env(root: Path, extras: str) -> tuple[list[str], str]:
    """Source bin/_env as bin/serve (extras "") or bin/test ("test") do: (install commands run,
    stderr)."""
    log = root.parent / "pip.log"
    log.unlink(missing_ok=True)
    done = subprocess.run(
        ["bash", "-c", f'EXTRAS="{extras}"; source "{root}/bin/_env"'],
        env={
            "PATH": os.environ["PATH"],
            "CTXPROXY_VENV": str(root.parent / "venv"),
            "PIP_LOG": str(log),
        },
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    lines = log.read_text().splitlines() if log.exists() else []
    # pip's own upgrade and the installer uv (which the stand-in cannot run: pip installs then)
    return [
        line for line in lines if "--upgrade pip" not in line and "uv==" not in line
    ], done.stderr


def test_serve_installs_no_test_extras_and_test_adds_them(env_root: Path) -> None:
    lock = f"-c {env_root}/constraints.txt"
    ran, said = _source_env(env_root, "")
    assert ran == [f"-m pip install -qq {lock} -e {env_root}"]
    assert "ctxproxy: first run: installing ctxproxy at the versions constraints.txt pins" in said
    assert _source_env(env_root, "") == ([], "")  # up to date: nothing, silently
    ran, said = _source_env(env_root, "test")  # bin/test after bin/serve
    assert ran == [f"-m pip install -qq {lock} -e {env_root}[test]"]
    assert "adding the [test] extras" in said
    assert _source_env(env_root, "test") == ([], "")
    assert _source_env(env_root, "") == ([], "")  # bin/serve after bin/test: the extras stay


def test_a_changed_lock_reinstalls(env_root: Path) -> None:
    _source_env(env_root, "test")
    constraints = env_root / "constraints.txt"
    constraints.write_text(constraints.read_text().replace("litellm==", "litellm==0.0.0+"))
    ran, said = _source_env(env_root, "")  # only what serving needs, at the new pins
    assert ran == [f"-m pip install -qq -c {constraints} -e {env_root}"]
    assert "constraints.txt changed" in said
    ran, _ = _source_env(env_root, "test")
    assert ran == [f"-m pip install -qq -c {constraints} -e {env_root}[test]"]
