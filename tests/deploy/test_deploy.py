"""The team-gateway example (deploy/): the compose file wires PostgreSQL 15, two ctxproxy
replicas built from the repository's Dockerfile and nginx as it says; ctxproxy.yaml loads; and
nginx.conf passes ``nginx -t``, then, run for real in front of two live proxies, spreads requests
round robin and relays a stream as it comes. No Docker engine here: nginx is Debian's (the nginx
tests skip with the reason when it is absent)."""

from __future__ import annotations

import contextlib
import ipaddress
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson
import pytest
import yaml

from proxy.settings import load_settings
from tests.conftest import LiveProxy
from tests.support.factories import request, user
from tests.support.fake_upstream import FakeUpstream

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
REPLICAS = ("ctxproxy-1", "ctxproxy-2")
NGINX = shutil.which("nginx") or next(
    (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if Path(p).is_file()), None
)
needs_nginx = pytest.mark.skipif(
    NGINX is None, reason="nginx is not installed (apt-get install nginx-light)"
)


def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    return data


def upstream_servers(conf: str) -> list[str]:
    block = re.search(r"upstream ctxproxy \{(.*?)\}", conf, re.S)
    assert block, "no upstream ctxproxy block"
    return re.findall(r"^\s*server\s+(\S+)", block.group(1), re.M)


def test_compose_wires_postgres_replicas_and_nginx() -> None:
    services = compose()["services"]
    assert set(services) == {"postgres", *REPLICAS, "nginx"}
    pg = services["postgres"]
    assert pg["image"] == "postgres:15"
    assert "pg_isready" in " ".join(pg["healthcheck"]["test"])
    bound = load_settings(DEPLOY / "ctxproxy.yaml").server.shutdown_timeout_s
    for name in REPLICAS:
        replica = services[name]
        build = replica["build"]
        assert (DEPLOY / build["context"] / build["dockerfile"]).resolve() == ROOT / "Dockerfile"
        # compose fills ${VAR:?…} from the environment
        url = urlsplit(re.sub(r"\$\{[^}]*\}", "x", replica["environment"]["CTXPROXY_STORE_URL"]))
        assert (url.scheme, url.hostname, url.port, url.path) == (
            "postgresql", "postgres", 5432, "/ctxproxy")  # fmt: skip
        assert "--db" not in replica["command"]  # the store is PostgreSQL, not a file
        assert "8787" in replica["command"]
        assert "/readyz" in " ".join(replica["healthcheck"]["test"])
        assert replica["depends_on"]["postgres"]["condition"] == "service_healthy"
        assert "./ctxproxy.yaml:/config/config.yaml:ro" in replica["volumes"]
        # SIGTERM's bound for the streams under way, and time to close, before Docker kills it
        assert float(replica["stop_grace_period"].removesuffix("s")) >= bound + 5
    nginx = services["nginx"]
    assert nginx["ports"] == ["${CTXPROXY_PORT:-8787}:80"]
    assert "./nginx.conf:/etc/nginx/nginx.conf:ro" in nginx["volumes"]
    assert {n: d["condition"] for n, d in nginx["depends_on"].items()} == dict.fromkeys(
        REPLICAS, "service_healthy"
    )
    assert "EXPOSE 8787" in (ROOT / "Dockerfile").read_text()


def test_nginx_balances_the_replicas_and_streams_unbuffered() -> None:
    conf = (DEPLOY / "nginx.conf").read_text()
    assert [s.split(":")[0] for s in upstream_servers(conf)] == list(REPLICAS)
    assert all(s.endswith(":8787") for s in upstream_servers(conf))
    for directive in ("proxy_buffering off;", "proxy_http_version 1.1;", "listen 80;"):
        assert directive in conf
    assert not re.search(r"^\s*(least_conn|ip_hash|hash)\b", conf, re.M)  # round robin


def test_the_replicas_config_loads_and_trusts_only_nginx() -> None:
    settings = load_settings(DEPLOY / "ctxproxy.yaml")
    nginx_ip = compose()["services"]["nginx"]["networks"]["gateway"]["ipv4_address"]
    assert settings.server.trusted_proxies == [nginx_ip]
    subnet = compose()["networks"]["gateway"]["ipam"]["config"][0]["subnet"]
    assert ipaddress.ip_address(nginx_ip) in ipaddress.ip_network(subnet)
    assert settings.auth.mode == "keys"


def local_conf(tmp_path: Path, listen: int, servers: list[int]) -> Path:
    """nginx.conf as is, but on loopback ports (the compose names do not resolve here)."""
    conf = (DEPLOY / "nginx.conf").read_text()
    for name, port in zip(REPLICAS, servers, strict=True):
        conf = conf.replace(f"server {name}:8787", f"server 127.0.0.1:{port}")
    conf = conf.replace("listen 80;", f"listen 127.0.0.1:{listen};")
    conf = conf.replace("pid /tmp/nginx.pid;", f"pid {tmp_path}/nginx.pid;")
    conf = conf.replace("access_log /dev/stdout;", f"access_log {tmp_path}/access.log;")
    assert "ctxproxy-1" not in conf and f"127.0.0.1:{listen}" in conf
    path = tmp_path / "nginx.conf"
    path.write_text(conf)
    return path


@needs_nginx
def test_nginx_accepts_the_conf(tmp_path: Path) -> None:
    conf = local_conf(tmp_path, free_port(), [free_port(), free_port()])
    out = subprocess.run(
        [NGINX, "-t", "-c", str(conf), "-p", str(tmp_path)],  # type: ignore[list-item]
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "test is successful" in out.stderr


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def running_nginx(tmp_path: Path, servers: list[int]) -> Iterator[str]:
    port = free_port()
    conf = local_conf(tmp_path, port, servers)
    proc = subprocess.Popen(
        [NGINX, "-c", str(conf), "-p", str(tmp_path), "-g", "daemon off;"],  # type: ignore[list-item]
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.time() + 10
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.time() < deadline, "nginx did not start"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@needs_nginx
def test_nginx_in_front_of_two_live_proxies(
    tmp_path: Path, live_proxy: Callable[..., LiveProxy], fake_upstream: FakeUpstream
) -> None:
    a, b = live_proxy(), live_proxy()
    ports = [int(urlsplit(p.url).port or 0) for p in (a, b)]
    with running_nginx(tmp_path, ports) as url, httpx.Client(base_url=url, timeout=10) as client:
        ready = client.get("/readyz")
        assert (ready.status_code, ready.json()) == (200, {"status": "ready", "store": "ok"})
        body = request(user("hello"))
        for i in range(6):
            r = client.post("/v1/chat/completions", json=body, headers={"x-session-id": f"s{i}"})
            assert r.status_code == 200, r.text
        deadline = time.time() + 5
        while time.time() < deadline and len(a.rows()) + len(b.rows()) < 6:
            time.sleep(0.02)
        assert (len(a.rows()), len(b.rows())) == (3, 3)  # round robin

        # a stream is relayed as it comes: the first event arrives while the rest is held
        fake_upstream.script.hold_after_first_chunk = True
        fake_upstream.script.content = "one two three"
        streamed = {**body, "stream": True}
        with client.stream("POST", "/v1/chat/completions", json=streamed) as r:
            lines = r.iter_lines()
            first = next(line for line in lines if line.startswith("data: "))
            assert orjson.loads(first[6:])["choices"][0]["delta"]["content"] == "one"
            fake_upstream.release.set()
            rest = [line for line in lines if line.startswith("data: ")]
        assert rest[-1] == "data: [DONE]"
