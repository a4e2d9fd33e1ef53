"""A TCP relay that delays every chunk by a fixed time each way: a database "on another host" for
the store benchmarks, on a machine with no traffic shaping (no netem).

    python -m bench.delay_relay LISTEN_PORT TARGET_PORT ONE_WAY_MS

Chunks keep their order (each is sent at its arrival time plus the delay); the relay's own CPU is
small next to the database's."""

from __future__ import annotations

import asyncio
import sys


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    loop = asyncio.get_running_loop()
    try:
        while chunk := await reader.read(65536):
            loop.call_at(loop.time() + delay, writer.write, chunk)
    finally:
        await asyncio.sleep(delay)
        writer.close()


async def main(listen: int, target: int, delay: float) -> None:
    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target)
        await asyncio.gather(
            _pipe(reader, up_writer, delay), _pipe(up_reader, writer, delay),
            return_exceptions=True,
        )  # fmt: skip

    server = await asyncio.start_server(accept, "127.0.0.1", listen)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]) / 1000))
