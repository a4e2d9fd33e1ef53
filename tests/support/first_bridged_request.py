"""Run as a script in a fresh interpreter (litellm not yet imported): one bridged request
through the app, the event loop's longest lag meanwhile printed in ms
(``tests/proxy/upstream/test_litellm_import_off_loop.py``)."""

from __future__ import annotations

import asyncio
import os
import tempfile
import time

from tests.conftest import in_process, proxy_settings
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.factories import anthropic_message


async def main() -> None:
    edge = EdgeUpstream().start()
    edge.reply = Reply.json(anthropic_message())
    upstream = {"name": "claude", "kind": "anthropic", "match": ["claude-*"], "base_url": edge.url}
    settings = proxy_settings(edge.base_url, upstreams=[upstream])
    lag = [0.0]
    done = asyncio.Event()

    async def tick() -> None:
        while not done.is_set():
            started = time.perf_counter()
            await asyncio.sleep(0.01)
            lag[0] = max(lag[0], time.perf_counter() - started - 0.01)

    body = {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hi"}]}
    async with in_process(settings, tempfile.mkdtemp() + "/db") as c:
        ticking = asyncio.create_task(tick())
        await asyncio.sleep(0.05)
        r = await c.post("/v1/chat/completions", json=body, headers={"x-api-key": "sk-ant-t"})
        done.set()
        await ticking
    edge.stop()
    print(r.status_code, round(lag[0] * 1000))


if __name__ == "__main__":
    os.environ.pop("DISABLE_AIOHTTP_TRANSPORT", None)
    asyncio.run(main())
