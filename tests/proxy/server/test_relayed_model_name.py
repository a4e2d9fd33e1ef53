"""A relayed request's model name (``/v1/embeddings``) is kept in its row and on ``/metrics`` cut
to 256 characters: redacted before the cut, so a password or a key the cut splits keeps none
of its beginning (cut first, ``postgres://admin:S3cretPa`` was no URL's password any more)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import in_process, log_rows, proxy_settings
from tests.support.edge_upstream import EdgeUpstream, Reply

EMBEDDING = {
    "object": "list",
    "data": [{"object": "embedding", "index": 0, "embedding": [0.25]}],
    "model": "text-embedding-3-small",
    "usage": {"prompt_tokens": 2, "total_tokens": 2},
}
PASSWORD = "S3cretPassw0rdX9"


async def test_a_relayed_model_name_is_redacted_before_its_cut(
    tmp_path: Path, edge: EdgeUpstream
) -> None:
    edge.reply = Reply.json(EMBEDDING)
    upstream = {"name": "openai", "kind": "openai", "match": ["*"], "base_url": edge.url}
    settings = proxy_settings(edge.base_url, upstreams=[upstream])
    # the cut at 256 characters falls 8 characters into the password
    model = "m" * 230 + f" postgres://admin:{PASSWORD}@db.internal/app"
    async with in_process(settings, str(tmp_path / "db")) as c:
        r = await c.post(
            "/v1/embeddings",
            json={"model": model, "input": "hi"},
            headers={"authorization": "Bearer sk-client-own-key-000000000001"},
        )
        rows = await log_rows(c)
        metrics = (await c.get("/metrics")).text
    assert r.status_code == 200, r.text
    assert [row["model"] for row in rows if PASSWORD[:6] in (row.get("model") or "")] == []
    assert any((row.get("model") or "").startswith("m" * 230) for row in rows)
    assert PASSWORD[:6] not in metrics
