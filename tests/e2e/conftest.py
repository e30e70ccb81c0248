"""A real Hypercorn process serving `asgi_app:app` on a free loopback port, started and stopped by the tests."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.processes import RedisServer, free_port, stop

ROOT = Path(__file__).resolve().parents[2]
#: Generated or local directories of a checkout, left out when a test copies it (`shutil.ignore_patterns`).
NOT_SOURCE = (
    ".venv",
    ".git",
    "build",
    "dist",
    "site",  # the docs site that scripts/test builds
    "*.egg-info",
    "node_modules",
    "__pycache__",
    "*_cache",
    ".hypothesis",
)


@dataclass
class Server:
    base_url: str
    process: subprocess.Popen[bytes]
    seconds_to_first_200: float


def start_hypercorn(
    env: Mapping[str, str] | None = None,
    *,
    target: str = "asgi_app:app",
    ready_path: str = "/api/v1",
    timeout: float = 20.0,
    workers: int = 1,
) -> Server:
    """Start Hypercorn serving `target` on a free loopback port; wait (bounded) until `ready_path` answers 200.

    IDENTITY_* variables of the calling environment are dropped, so the service runs on its embedded defaults
    plus `env`. `workers=0`: Hypercorn serves in its own process (no worker child), so its PID is the service's."""
    port = free_port()
    # Rate limits are off unless a test asks for them: the suite sends bursts from 127.0.0.1 on purpose, and the
    # rate-limit tests turn them on with IDENTITY_RATE_LIMITS=on.
    clean_env = {k: v for k, v in os.environ.items() if not k.startswith("IDENTITY_")}
    clean_env["IDENTITY_RATE_LIMITS"] = "off"
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "hypercorn", target, "--bind", f"127.0.0.1:{port}", "--workers", str(workers)],
        cwd=ROOT,
        env={**clean_env, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base_url = f"http://127.0.0.1:{port}"
    while True:
        if process.poll() is not None:
            stderr = process.stderr.read().decode() if process.stderr else ""
            if process.stderr:
                process.stderr.close()
            raise RuntimeError(f"hypercorn exited with {process.returncode}: {stderr}")
        try:
            if httpx.get(f"{base_url}{ready_path}", timeout=1.0).status_code == 200:
                return Server(base_url, process, time.monotonic() - started)
        except httpx.TransportError:
            pass
        if time.monotonic() - started > timeout:
            stop(process)
            if process.stderr:
                process.stderr.close()
            raise RuntimeError(f"hypercorn did not answer within {timeout} s")
        time.sleep(0.02)


def stop_server(server: Server) -> None:
    """End exactly the Hypercorn process we started."""
    stop(server.process)
    if server.process.stderr:
        server.process.stderr.close()


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    """The service on its embedded defaults (memory store, dev project), as a newcomer runs it."""
    running = start_hypercorn()
    try:
        yield running
    finally:
        stop_server(running)


@pytest.fixture
def http(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.base_url, timeout=10.0) as client:
        yield client


@pytest.fixture(scope="module")
def redis_hypercorn(redis_server: RedisServer) -> Iterator[Server]:
    """The service on the session's real Redis, for one test module."""
    running = start_hypercorn({"IDENTITY_BACKEND": "redis", "IDENTITY_REDIS_URL": redis_server.url})
    try:
        yield running
    finally:
        stop_server(running)


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def base_url(request: pytest.FixtureRequest) -> str:
    """The base URL of the service on the memory store, then on Redis (a test using it runs on both)."""
    name = "server" if request.param == "memory" else "redis_hypercorn"
    running: Server = request.getfixturevalue(name)
    return running.base_url
