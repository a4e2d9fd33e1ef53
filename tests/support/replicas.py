"""Real ``ctxproxy serve`` processes (the installed console script) sharing one store, as replicas
of a gateway run: each on its own loopback port, its stderr in a file, stopped by the test."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from tests.support.live import free_port

ROOT = Path(__file__).resolve().parents[2]


class Replica:
    def __init__(self, config: Path, store_url: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = Path(tempfile.mkstemp(prefix="ctxproxy-replica-", suffix=".log")[1])
        env = {**os.environ, "CTXPROXY_STORE_URL": store_url}
        env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
        cli = Path(sys.executable).with_name("ctxproxy")
        args = [str(cli), "serve", "--config", str(config), "--port", str(self.port)]
        with self.log.open("wb") as err:
            self.proc = subprocess.Popen(
                args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err
            )

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"replica exited: {self.log.read_text()[-3000:]}")
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"replica not ready: {self.log.read_text()[-3000:]}")

    def kill(self) -> None:
        """SIGKILL: no shutdown, no last batch (a crash)."""
        self.proc.kill()
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()


def start_replicas(n: int, config: Path, store_url: str) -> list[Replica]:
    """``n`` replicas started together (their migrations take turns on the lock)."""
    replicas = [Replica(config, store_url) for _ in range(n)]
    try:
        for replica in replicas:
            replica.wait_ready()
    except Exception:
        for replica in replicas:
            replica.stop()
        raise
    return replicas
