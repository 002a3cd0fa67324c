#!/usr/bin/env python3
"""A loopback TCP proxy for LANSync's tamper test.

    tamper_proxy.py TARGET_PORT FLIP_AFTER

Listens on a free loopback port (printed on stdout), forwards every connection to
127.0.0.1:TARGET_PORT, and flips one bit of the byte at offset FLIP_AFTER of what the client
sends. Bounded: it serves until killed, and only ever talks to loopback addresses.
"""
import asyncio
import sys


async def pipe(reader, writer, flip_at=None):
    seen = 0
    try:
        while data := await reader.read(4096):
            if flip_at is not None and seen <= flip_at < seen + len(data):
                data = bytearray(data)
                data[flip_at - seen] ^= 0x01
                data = bytes(data)
            seen += len(data)
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def main() -> None:
    target, flip_after = int(sys.argv[1]), int(sys.argv[2])

    async def handle(client_reader, client_writer):
        try:
            server_reader, server_writer = await asyncio.open_connection("127.0.0.1", target)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(
            pipe(client_reader, server_writer, flip_after),
            pipe(server_reader, client_writer),
        )

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
