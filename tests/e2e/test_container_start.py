"""What the Dockerfile runs, without a Docker engine: a non-editable install of the package into a
fresh virtual environment, then the Dockerfile's own CMD (read from the file) against a fake
upstream, with the Dockerfile's HEALTHCHECK command run too."""

from __future__ import annotations

import json
import os
import re
import site
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.live import free_port

ROOT = Path(__file__).resolve().parents[2]


def dockerfile_json(instruction: str) -> list[str]:
    text = (ROOT / "Dockerfile").read_text()
    m = re.search(rf"^{instruction}\s+(\[.*\])\s*$", text, re.M)  # top-level, not HEALTHCHECK's
    assert m, f"Dockerfile has no exec-form {instruction}"
    return json.loads(m.group(1))


@pytest.fixture(scope="module")
def installed_venv(tmp_path_factory) -> Path:
    venv = tmp_path_factory.mktemp("docker-like") / "venv"
    # without the pip and setuptools a venv bundles: the test environment's (locked, recent
    # enough for pyproject.toml's metadata) build the package
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    # Dependencies come from the test environment (no download); our package is installed for real.
    site_dir = next((venv / "lib").glob("python3*/site-packages"))
    (site_dir / "deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    build = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr
    return venv


def test_non_editable_install_runs_the_dockerfile_command(
    installed_venv: Path, fake_upstream, tmp_path: Path
) -> None:
    cmd = dockerfile_json("CMD")
    assert cmd[:2] == ["ctxproxy", "serve"] and "0.0.0.0" in cmd
    port = free_port()
    config = tmp_path / "config.yaml"
    config.write_text(
        f"upstreams:\n  - name: fake\n    match: ['*']\n    base_url: {fake_upstream.base_url}\n"
    )
    args = [str(installed_venv / "bin" / cmd[0]), *cmd[1:]]
    args[args.index("--config") + 1] = str(config)
    args[args.index("--db") + 1] = str(tmp_path / "data.db")
    args[args.index("--port") + 1] = str(port)
    # the image's environment: no PYTHONPATH a checkout might set, so the installed copy runs
    skip = ("TIKTOKEN", "VIRTUAL_ENV", "PYTHONPATH")
    env = {k: v for k, v in os.environ.items() if not k.startswith(skip)}
    env["PATH"] = f"{installed_venv / 'bin'}:{env.get('PATH', '')}"
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    proc = subprocess.Popen(
        args, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.time() + 30
        while True:
            try:
                if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, proc.stdout.read().decode()  # type: ignore[union-attr]
            assert time.time() < deadline, "server did not become healthy"
            time.sleep(0.2)
        # The package really is the installed copy, not this checkout.
        where = subprocess.run(
            [str(installed_venv / "bin" / "python"), "-c", "import proxy; print(proxy.__file__)"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
        ).stdout
        assert str(installed_venv) in where
        r = httpx.post(
            base + "/v1/chat/completions",
            timeout=30,
            json={"model": "gpt-4o", "messages": [{"role": "user", "content": "hello"}]},
        )
        assert r.status_code == 200
        assert r.json()["choices"][0]["message"]["content"] == "Hello from the fake upstream."
        # The HEALTHCHECK command, pointed at this port, passes.
        text = (ROOT / "Dockerfile").read_text()
        probe = json.loads(re.search(r"HEALTHCHECK[^\n]*\n\s*CMD\s+(\[.*\])", text).group(1))
        probe = [p.replace("8787", str(port)) for p in probe]
        probe[0] = str(installed_venv / "bin" / probe[0])
        assert subprocess.run(probe, timeout=10, env=env).returncode == 0
    finally:
        proc.terminate()
        proc.wait(10)
