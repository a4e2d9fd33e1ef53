"""Secrets in the forms an agent's tools print and its answers write (a YAML block scalar, a
Markdown table of credentials, Hadoop's XML, ``kubectl create secret --from-literal``, Terraform's
output) rest nowhere: not in a captured body, the stored history, the rule report nor a /ui
page."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import orjson

from tests.conftest import in_process, log_rows, proxy_settings
from tests.support.factories import assistant, request, result, shell, user

SECRETS = {
    "yaml": "Yb7#qLm2Vx9t",
    "table": "Tb4!kWn8Rz3p",
    "xml": "Xm5$hJr7Qc2w",
    "kubectl": "Kc6%pDs9Lv4m",
    "terraform": "Tf3&nGx8Bw5y",
}


def conversation() -> list[dict[str, object]]:
    s = SECRETS
    return [
        user("Set up the database and tell me the credentials"),
        assistant(None, shell("c1", "cat values.yaml core-site.xml")),
        result(
            "c1",
            f"db:\n  password: |\n    {s['yaml']}\n  host: db.internal\n"
            "<property>\n  <name>javax.jdo.option.ConnectionPassword</name>\n"
            f"  <value>{s['xml']}</value>\n</property>\n",
        ),
        assistant(
            None,
            shell("c2", f"kubectl create secret generic db --from-literal=dsn={s['kubectl']}"),
        ),
        result("c2", "secret/db created"),
        assistant(None, shell("c3", "terraform output -json")),
        result("c3", f'{{"db_password": {{"sensitive": true, "value": "{s["terraform"]}"}}}}'),
        assistant(
            "Done. Credentials:\n\n| Service | User | Password |\n|---|---|---|\n"
            f"| Postgres | app | {s['table']} |\n"
        ),
        user("thanks"),
    ]


async def test_secret_forms_rest_nowhere(tmp_path: Path, edge) -> None:
    db = str(tmp_path / "db")
    settings = proxy_settings(edge.base_url, store={"capture_payloads": True})
    async with in_process(settings, db) as client:
        r = await client.post(
            "/v1/chat/completions",
            content=orjson.dumps(request(*conversation())),
            headers={"content-type": "application/json", "x-session-id": "forms"},
        )
        assert r.status_code == 200
        assert SECRETS["yaml"] in edge.last.body.decode()  # the user's own provider gets them
        rows = await log_rows(client)
        session = rows[0]["session_id"]
        pages = [
            await client.get(f"/ui/sessions/{session}"),
            *[await client.get(f"/ui/requests/{row['id']}") for row in rows],
        ]
        assert all(p.status_code == 200 for p in pages)
    with contextlib.closing(sqlite3.connect(db)) as conn:
        dump = "\n".join(conn.iterdump())
    assert "[REDACTED]" in dump
    rested = [k for k, v in SECRETS.items() if v in dump]
    shown = [k for k, v in SECRETS.items() if any(v in p.text for p in pages)]
    assert (rested, shown) == ([], [])
