"""A standalone fake for test suites in other languages: one command starts it, SIGTERM or Ctrl-C stops it.

    python -m identity_testing.server [--host 127.0.0.1] [--port 0] [--seed export.json] [--compat]

It serves the service with Hypercorn in dev/test mode on the memory store and prints one JSON line on standard
output once it answers: `{"base_url", "project_id", "publishable_client_key", "secret_server_key",
"super_secret_admin_key", "internal_admin_key"}`. `--port 0` picks a free port. `--seed` imports a JSON export
(`GET /api/v1/testing/projects/{id}/export`, or `TestProject.export()`) into the dev project before it answers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import socket
import sys
from pathlib import Path

from hypercorn.asyncio import serve
from hypercorn.config import Config

from asgi_app import IdentityASGI
from backends.memory import AsyncMemoryStore
from identity_hosting.settings import DEV_INTERNAL_ADMIN_KEY, DEV_PROJECT, Settings
from identity_proto import arun
from identity_proto.flows.portability import import_project_data


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m identity_testing.server", description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--seed", type=Path, help="a JSON export to import into the dev project at start")
    parser.add_argument("--compat", action="store_true", help="also accept the original's X-Stack-* headers")
    args = parser.parse_args(argv)

    settings = Settings(dev_mode=True, compat="stack" if args.compat else "")
    store = AsyncMemoryStore()
    app = IdentityASGI(settings, store=store)
    await app.startup()
    if args.seed is not None:
        await arun(import_project_data(DEV_PROJECT.id, json.loads(args.seed.read_text())), store)

    port = args.port or _free_port(args.host)
    config = Config()
    config.bind = [f"{args.host}:{port}"]
    config.accesslog = None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    server = asyncio.create_task(serve(app, config, shutdown_trigger=stop.wait))  # type: ignore[arg-type]
    await _until_listening(args.host, port)
    keys = DEV_PROJECT.keys
    print(
        json.dumps(
            {
                "base_url": f"http://{args.host}:{port}",
                "project_id": DEV_PROJECT.id,
                "publishable_client_key": keys.publishable_client_key,
                "secret_server_key": keys.secret_server_key,
                "super_secret_admin_key": keys.super_secret_admin_key,
                "internal_admin_key": DEV_INTERNAL_ADMIN_KEY,
            }
        ),
        flush=True,
    )
    await server
    return 0


async def _until_listening(host: str, port: int, timeout_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        try:
            _, writer = await asyncio.open_connection(host, port)
            writer.close()
            await writer.wait_closed()
            return
        except OSError:
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.02)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
