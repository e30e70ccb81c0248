"""A standalone fake for test suites in other languages: one command starts it, SIGTERM or Ctrl-C stops it.

    python -m identity_testing.server [--host 127.0.0.1] [--port 0] [--seed export.json] [--compat] [--rate-limits]

It serves the service with Hypercorn in dev/test mode on the memory store and prints one JSON line on standard
output once it answers: `{"base_url", "project_id", "publishable_client_key", "secret_server_key",
"super_secret_admin_key", "internal_admin_key"}`. `--port 0` picks a free port. `--seed` imports a JSON export
(`GET /api/v1/testing/projects/{id}/export`, or `TestProject.export()`) into the dev project before it answers.

It binds its socket itself before anything else and hands it to Hypercorn, so `base_url` is the address it serves
(with `--port 0`, the port the system gave it). When the address is taken it prints one line on standard error
and exits with status 1, and prints no JSON line.

Rate limits are off, as in `IdentityFake`: a test suite sends bursts from one address on purpose (more than ten
sign-in codes a minute, say). `--rate-limits` turns them on, to test how a client handles 429.
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
from identity_proto.errors import KnownError
from identity_proto.flows.portability import import_project_data


def _bind(host: str, port: int) -> socket.socket:
    """A TCP socket bound to (host, port); OSError when the address is taken or not ours."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart may reuse a port in TIME_WAIT
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m identity_testing.server", description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--seed", type=Path, help="a JSON export to import into the dev project at start")
    parser.add_argument("--compat", action="store_true", help="also accept the original's X-Stack-* headers")
    parser.add_argument(
        "--rate-limits", action="store_true", help="enforce the service's rate limits (off by default, as in tests)"
    )
    args = parser.parse_args(argv)

    try:
        sock = _bind(args.host, args.port)
    except OSError as exc:
        print(
            f"identity_testing.server: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr
        )
        return 1
    port = int(sock.getsockname()[1])

    settings = Settings(dev_mode=True, compat="stack" if args.compat else "", rate_limits=args.rate_limits)
    store = AsyncMemoryStore()
    app = IdentityASGI(settings, store=store)
    await app.startup()
    if args.seed is not None:
        try:
            await arun(import_project_data(DEV_PROJECT.id, json.loads(args.seed.read_text())), store)
        except (OSError, ValueError, KnownError) as exc:  # nothing was imported: say why, start nothing
            reason = exc.message if isinstance(exc, KnownError) else str(exc)
            print(f"identity_testing.server: cannot import the seed {args.seed}: {reason}", file=sys.stderr)
            await app.shutdown()
            sock.close()
            return 1

    config = Config()
    config.bind = [f"fd://{sock.detach()}"]  # Hypercorn listens on our socket, and owns it from here
    config.accesslog = None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    server = asyncio.create_task(serve(app, config, shutdown_trigger=stop.wait))  # type: ignore[arg-type]
    await _until_listening(args.host, port, server)
    host = f"[{args.host}]" if ":" in args.host else args.host
    keys = DEV_PROJECT.keys
    print(
        json.dumps(
            {
                "base_url": f"http://{host}:{port}",
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


async def _until_listening(host: str, port: int, server: asyncio.Task[None], timeout_s: float = 10.0) -> None:
    """Return once our socket accepts connections (Hypercorn listens on it); raise if the server ended first."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        if server.done():
            server.result()  # its exception, if it failed
            raise RuntimeError("the server stopped before it answered")
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
