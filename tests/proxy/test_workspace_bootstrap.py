"""The workspace bootstrap (``workspace.root``): the picture of a real folder on disk, its path
safety (symlinks out of the root, secrets files, a huge tree, a binary file named like a
manifest, a root that disappears), the service's time budget, and the settings' tenancy check."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from proxy.settings import SettingsError, settings_from_mapping
from proxy.workspace.picture import take_picture
from proxy.workspace.pictures import Pictures
from proxy.workspace_settings import WorkspaceSettings

KEY = "sk-proj-" + "Zq8Xw2Lk9Pm4Rt7Vb1Nc" * 3
CFG = WorkspaceSettings(root="/unused")


def project(root: Path) -> Path:
    (root / "src" / "app").mkdir(parents=True)
    (root / "src" / "app" / "__main__.py").write_text("print('hi')\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_app.py").write_text("def test(): pass\n")
    (root / "pyproject.toml").write_text(
        '[project]\nname = "demo-app"\n[project.scripts]\ndemo = "app:main"\n'
    )
    (root / "README.md").write_text(
        "# Demo\n\n[![ci](badge.svg)](x)\n\nDemo app that prints a greeting.\nIt has a CLI.\n\n"
        "## Install\n\npip install .\n"
    )
    (root / "AGENTS.md").write_text("Run pytest before committing.\n")
    (root / ".gitignore").write_text("build/\n*.log\n")
    (root / "build").mkdir()
    (root / "debug.log").write_text("noise\n")
    return root


def text_of(picture: dict[str, Any]) -> str:
    return "\n".join(picture["lines"])


def test_picture_of_a_project(tmp_path: Path) -> None:
    pic = take_picture(CFG, str(project(tmp_path / "p")))
    text = text_of(pic)
    assert pic["lines"][0] == f"root {tmp_path / 'p'}: python project"
    assert "manifests: pyproject.toml (demo-app, scripts demo)" in text
    assert "README.md: Demo app that prints a greeting. It has a CLI." in text
    assert "agent instructions: AGENTS.md" in text
    assert "src/ (app/), tests/ (test_app.py)" in text
    assert "build" not in text and "debug.log" not in text  # gitignored
    assert pic["left_out"]["ignored"] == 2 and pic["ms"] >= 0


def test_git_branch_and_dirty_files(tmp_path: Path) -> None:
    root = project(tmp_path / "p")
    run = {"cwd": root, "check": True, "capture_output": True}
    subprocess.run(["git", "init", "-q", "-b", "feature/cli"], **run)  # type: ignore[call-overload]
    (root / "new.py").write_text("x = 1\n")
    text = text_of(take_picture(CFG, str(root)))
    assert "git: branch feature/cli, " in text and "new.py" in text


def test_symlinks_out_of_the_root_are_neither_listed_nor_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "package.json").write_text(f'{{"name": "{KEY}-leak"}}')
    (outside / "private").mkdir()
    root = project(tmp_path / "p")
    os.symlink(outside / "package.json", root / "package.json")  # a manifest name, outside
    os.symlink(outside / "private", root / "docs")  # a folder, outside
    os.symlink(root / "src", root / "source")  # inside: listed, not followed
    pic = take_picture(CFG, str(root))
    text = text_of(pic)
    assert "leak" not in text and "package.json" not in text and "docs" not in text
    assert ", source" in text  # the link's name (not followed)
    assert pic["left_out"]["symlinks_out"] == 2


def test_secrets_files_are_never_read_nor_listed(tmp_path: Path) -> None:
    root = project(tmp_path / "p")
    (root / ".env").write_text(f"OPENAI_API_KEY={KEY}\n")
    (root / ".env.local").write_text(f"TOKEN={KEY}\n")
    (root / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n")
    os.symlink(root / ".env", root / "package.json")  # a manifest's name for a secrets file
    pic = take_picture(CFG, str(root))
    text = text_of(pic)
    assert KEY not in text and ".env" not in text and "id_rsa" not in text
    assert pic["left_out"]["secrets"] == 3
    assert pic["left_out"]["manifests_unread"] == ["package.json (secret)"]


def test_a_readme_holding_a_key_is_redacted(tmp_path: Path) -> None:
    root = project(tmp_path / "p")
    (root / "README.md").write_text(f"Set OPENAI_API_KEY={KEY} to run the demo app.\n")
    text = text_of(take_picture(CFG, str(root)))
    assert KEY not in text and "[REDACTED]" in text


@pytest.mark.parametrize(
    ("secret", "said"),
    [
        ("S3cretPassw0rdX9", "Connect with postgres://admin:{}@db.internal/app to try it."),
        ("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "Demo keys: AKIAIOSFODNN7EXAMPLE {} ok."),
    ],
)
def test_a_secret_the_readmes_cut_would_split_is_redacted_whole(
    tmp_path: Path, secret: str, said: str
) -> None:
    """The README's paragraph is cut at 300 characters: redacted only after the cut, a password
    or a key split by it kept its beginning (``postgres://admin:S3cre…``), of no secret's shape."""
    root = project(tmp_path / "p")
    before = said.index("{}")
    for at in range(280, 300, 3):  # the cut falls inside the secret
        lead = "Demo app that prints a greeting. " * 9
        prose = lead[: at - before] + said.format(secret)
        (root / "README.md").write_text(prose + "\n")
        line = next(x for x in take_picture(CFG, str(root))["lines"] if x.startswith("README"))
        assert line.endswith("…")
        assert secret[:5] not in line, line


def test_a_binary_file_named_like_a_manifest_is_not_read(tmp_path: Path) -> None:
    root = project(tmp_path / "p")
    (root / "package.json").write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 40)
    (root / "go.mod").write_bytes(b"\xff\xfe\xfa not utf-8 \xc3")
    pic = take_picture(CFG, str(root))
    assert pic["left_out"]["manifests_unread"] == ["go.mod (binary)", "package.json (binary)"]
    assert "ELF" not in text_of(pic)


def test_a_manifest_nested_past_what_the_parsers_read_is_unreadable(tmp_path: Path) -> None:
    root = project(tmp_path / "p")
    (root / "package.json").write_text("[" * 30_000 + "]" * 30_000)
    pic = take_picture(CFG, str(root))
    assert "package.json (unreadable)" in text_of(pic)


def test_a_huge_tree_is_cut_within_bounds(tmp_path: Path) -> None:
    root = project(tmp_path / "p")
    wide = root / "data"
    wide.mkdir()
    for i in range(6_000):
        (wide / f"f{i:05}.json").touch()
    deep = root / "deep"
    for i in range(40):
        deep = deep / f"d{i}"
    deep.mkdir(parents=True)
    cfg = WorkspaceSettings(root="/unused", max_entries=50, max_scanned=2_000)
    started = time.perf_counter()
    pic = take_picture(cfg, str(root))
    assert time.perf_counter() - started < 2.0
    assert len(text_of(pic)) < 4_000
    assert pic["left_out"]["past_bound"] + pic["left_out"].get("unscanned", 0) > 0
    assert "d2/" not in text_of(pic)  # depth-bounded


def test_a_root_that_disappears(tmp_path: Path) -> None:
    root = project(tmp_path / "p")
    assert take_picture(CFG, str(root))["lines"]
    subprocess.run(["rm", "-rf", str(root)], check=True)
    pic = take_picture(CFG, str(root))
    assert pic == {"root": str(root), "error": "root missing", "lines": [], "ms": pic["ms"]}


def test_a_slow_picture_goes_with_a_later_request(tmp_path: Path) -> None:
    """The first request waits at most the budget; the next one of the session carries it;
    once served, a session is not offered it again; another session gets the kept picture."""

    def slow(cfg: WorkspaceSettings, root: str) -> dict[str, Any]:
        time.sleep(0.3)
        return {"root": root, "lines": ["root x"], "ms": 300.0}

    async def scenario() -> list[dict[str, Any]]:
        pics = Pictures(WorkspaceSettings(root=str(tmp_path), budget_ms=20), taker=slow)
        out = [await pics.hint("p/s1", "m")]
        await asyncio.sleep(0.4)
        out += [await pics.hint("p/s1", "m"), await pics.hint("p/s1", "m")]
        out.append(await pics.hint("p/s2", "m"))
        await pics.close()
        return out

    first, second, third, other = asyncio.run(scenario())
    assert first == {} and third == {}
    assert second["workspace_bootstrap"]["lines"] == ["root x"]
    assert other == second


def test_a_failing_picture_is_no_request_failure(tmp_path: Path) -> None:
    def broken(cfg: WorkspaceSettings, root: str) -> dict[str, Any]:
        raise PermissionError("denied")

    async def scenario() -> dict[str, Any]:
        return await Pictures(WorkspaceSettings(root=str(tmp_path)), taker=broken).hint("p/s", "m")

    got = asyncio.run(scenario())
    assert got["workspace_bootstrap"] == {
        "root": str(tmp_path),
        "error": "PermissionError",
        "lines": [],
    }


def test_root_per_upstream_and_from_config_only(tmp_path: Path) -> None:
    cfg = WorkspaceSettings(root="/a", roots={"local": "/b"})
    assert cfg.root_for("local") == "/b" and cfg.root_for("cloud") == "/a"
    with pytest.raises(ValueError, match="absolute"):
        WorkspaceSettings(root="relative/dir")


def test_keys_mode_refuses_a_workspace_root_unless_forced() -> None:
    base: dict[str, Any] = {
        "auth": {"mode": "keys"},
        "upstreams": [{"name": "o", "api_key_env": "OPENAI_API_KEY"}],
    }
    with pytest.raises(SettingsError, match=r"workspace\.root: refused with auth\.mode: keys"):
        settings_from_mapping({**base, "workspace": {"root": "/srv/app"}})
    forced = settings_from_mapping(
        {**base, "workspace": {"root": "/srv/app", "allow_with_keys": True}}
    )
    assert forced.workspace.root == "/srv/app"


def test_no_picture_is_taken_without_the_rule_that_keeps_it() -> None:
    on = settings_from_mapping({"workspace": {"root": "/srv/app"}})
    assert Pictures.of(on) is not None
    assert Pictures.of(settings_from_mapping({})) is None
    off = settings_from_mapping(
        {"workspace": {"root": "/srv/app"}, "rules": [{"name": "working_set"}, {"name": "inject"}]}
    )
    assert Pictures.of(off) is None


def test_a_served_root_that_disappears_fails_no_request(
    live_proxy, fake_upstream, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """Through a live proxy: the root is gone before the first request; the request is
    answered, and its report says the picture's error."""
    import httpx

    from tests.support.factories import request, system, user

    root = project(tmp_path / "p")
    proxy = live_proxy(workspace={"root": str(root), "budget_ms": 2000})
    subprocess.run(["rm", "-rf", str(root)], check=True)
    sent = httpx.post(
        proxy.base_url + "/chat/completions",
        json=request(system(), user("start")),
        headers={"x-session-id": "gone"},
    )
    assert sent.status_code == 200
    report = proxy.row(sent.headers["x-ctxproxy-request-id"])["report"]
    assert report["workspace"]["bootstrap"]["error"] == "root missing"
    assert "ctxproxy-context" not in str(fake_upstream.requests[-1])


def test_a_picture_older_than_refresh_is_taken_again(tmp_path: Path) -> None:
    taken: list[float] = []

    def counting(cfg: WorkspaceSettings, root: str) -> dict[str, Any]:
        taken.append(time.monotonic())
        return {"root": root, "lines": [f"take {len(taken)}"]}

    async def scenario() -> list[dict[str, Any]]:
        cfg = WorkspaceSettings(root=str(tmp_path), refresh_s=0.2, budget_ms=1000)
        pics = Pictures(cfg, taker=counting)
        out = [await pics.hint("p/a", "m"), await pics.hint("p/b", "m")]
        await asyncio.sleep(0.3)
        out.append(await pics.hint("p/c", "m"))
        return out

    a, b, c = asyncio.run(scenario())
    assert a == b and a["workspace_bootstrap"]["lines"] == ["take 1"]
    assert c["workspace_bootstrap"]["lines"] == ["take 2"] and len(taken) == 2
