"""A stream whose reads each hold thousands of events does not hold the event loop: the relay's
work on a read (the usage tap and the error scanner read every event naming ``"usage"`` or
``"error"``, the answer's end, the send) is linear in it, and one read held half a MiB of such
events, 0.2–0.6 s of the loop for every other request. A read is now relayed in slices, the loop
let go between them; every byte still reaches the client, in order."""

from __future__ import annotations

from pathlib import Path

import orjson

from tests.conftest import in_process
from tests.support.edge_upstream import EdgeUpstream, Reply, protocol_settings
from tests.support.loop_stall import LoopStall

EVENT = b'data: {"usage":{"a":1},"error":null,"choices":[]}\n\n'
DENSE = EVENT * 120_000  # 6 MB sent in one write: the proxy reads it as fast as it can
JSON = {"content-type": "application/json"}
STALL_S = 0.1  # 0.03 s here (the upstream's thread takes the GIL too); 0.19 s before


async def test_a_stream_of_dense_events_does_not_hold_the_loop(
    edge: EdgeUpstream, tmp_path: Path
) -> None:
    last = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":3}}\n\ndata: [DONE]\n\n'  # noqa: E501
    edge.reply = Reply.event_stream(DENSE + last)
    body = {"model": "gpt-4o", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    # the stall is timed from the request on, not through the app's start-up
    async with in_process(protocol_settings(edge), str(tmp_path / "p.db")) as client:  # noqa: SIM117
        async with LoopStall() as stall:
            response = await client.post(
                "/v1/chat/completions", content=orjson.dumps(body), headers=JSON
            )
    assert response.status_code == 200
    assert response.content == DENSE + last  # relayed whole, in order
    assert stall.ticks > 0
    assert stall.max_s < STALL_S, f"the loop stalled {stall.max_ms} ms"
