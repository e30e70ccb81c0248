"""The figures of the hardening issue, re-measured from the outside: a real Hypercorn (memory store, then a real
`redis-server`), talked to over loopback sockets as its users and attackers would.

    .venv/bin/python -m benchmarks.hostile     # about a minute; prints one table (tests/hardening/README.md)

1. a paging `limit` far past any integer: the answer on each store;
2. (requests in flight while Redis is down: `python -m benchmarks.redis_down`);
3. a Hypercorn worker SIGKILLed under load: bare `hypercorn` (its exit status) and `identity-service` (how long
   until it answers again);
4. (memory under a long mixed load: `tests/hardening/test_soak.py`, longer run in that README);
5. (the OpenAPI document: `tests/hardening/test_schemathesis.py`);
6. 100 connections that declare a 100-byte body and send 10: how many are answered 408 and closed, and when; a
   10 MB upload from `httpx.AsyncClient` (413 received or a reset); control characters in a display name;
7. liveness, readiness and metrics paths.

Bounded: every process here is ours, on loopback, stopped at the end; nothing runs longer than its timeout.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import httpx

from benchmarks.common import PYTHON, ROOT, Placement, child_env, free_port, server_headers, service_env, stop
from benchmarks.servers import Hypercorn, start_hypercorn, start_redis

SLOW_CONNECTIONS = 100
BODY_TIMEOUT_S = 5.0
TEN_MB = 10 * 1024 * 1024


def _huge_limit(server: Hypercorn) -> str:
    status, body = server.request("GET", "/api/v1/users?limit=100000000000000000", server_headers())
    return f"{status} {body.get('code', '') if isinstance(body, dict) else ''}".strip()


def _slow_bodies(port: int) -> str:
    """SLOW_CONNECTIONS sockets each declaring Content-Length 100 and sending 10 bytes: answered and closed when?"""
    request = (
        "PATCH /api/v1/users/me HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        "content-length: 100\r\n"
        + "".join(f"{k}: {v}\r\n" for k, v in server_headers().items())
        + "\r\n"
        + '{"display_'
    ).encode()
    sockets, started = [], time.monotonic()
    for _ in range(SLOW_CONNECTIONS):
        sock = socket.create_connection(("127.0.0.1", port), timeout=BODY_TIMEOUT_S * 4)
        sock.sendall(request)
        sockets.append(sock)
    answers: dict[bytes, int] = {}
    closed_after: list[float] = []
    for sock in sockets:
        received = b""
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except (TimeoutError, ConnectionResetError):
            pass
        closed_after.append(time.monotonic() - started)
        status = received.split(b" ", 2)[1] if received.startswith(b"HTTP/1.1 ") else b"none"
        answers[status] = answers.get(status, 0) + 1
        sock.close()
    counts = ", ".join(f"{n} answered {s.decode()}" for s, n in sorted(answers.items()))
    return f"{counts}; all closed {max(closed_after):.1f} s after the first was opened"


async def _upload(port: int) -> str:
    async with httpx.AsyncClient(timeout=30) as http:
        try:
            answer = await http.post(
                f"http://127.0.0.1:{port}/api/v1/users", headers=server_headers(), content=b"x" * TEN_MB
            )
        except httpx.TransportError as exc:
            return f"transport error ({type(exc).__name__})"
    return f"{answer.status_code} {answer.json().get('code', '')}"


def _control_characters(server: Hypercorn) -> str:
    results = []
    for name, value in (("NUL", "a\x00b"), ("bidi override", "a\u202eb"), ("ANSI escape", "a\x1b[31mb")):
        status, body = server.request("POST", "/api/v1/users", server_headers(), {"display_name": value})
        results.append(f"{name} {status}{' ' + body.get('code', '') if isinstance(body, dict) else ''}")
    return "; ".join(results)


def _operator_paths(server: Hypercorn) -> str:
    found = []
    for path in ("/health/live", "/health/ready", "/metrics"):
        status, _ = server.request("GET", path)
        found.append(f"{path} {status}")
    return ", ".join(found)


def _workers(pid: int) -> list[int]:
    found = []
    pending = [pid]
    while pending:
        parent = pending.pop()
        try:
            kids = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
        except FileNotFoundError:
            continue
        for kid in map(int, kids):
            pending.append(kid)
            try:
                cmdline = Path(f"/proc/{kid}/cmdline").read_bytes()
            except FileNotFoundError:
                continue
            if b"spawn_main" in cmdline and b"resource_tracker" not in cmdline:
                found.append(kid)
    return found


def _answers(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/api/v1", timeout=1.0).status_code == 200
    except httpx.TransportError:
        return False


def _start(command: list[str], port: int, env: dict[str, str]) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not _answers(port):
        if process.poll() is not None or time.monotonic() > deadline:
            stop(process)
            raise RuntimeError(f"{command[2]} did not start")
        time.sleep(0.05)
    return process


def _worker_death(env: dict[str, str]) -> tuple[str, str]:
    port = free_port()
    bare = _start([PYTHON, "-m", "hypercorn", "--bind", f"127.0.0.1:{port}", "asgi_app:app"], port, env)
    try:
        (worker,) = _workers(bare.pid)
        os.kill(worker, signal.SIGKILL)
        bare_status = bare.wait(60)
    finally:
        stop(bare)
    command = [PYTHON, "-m", "identity_hosting.serve", "--bind", f"127.0.0.1:{port}", "--workers", "2"]
    supervised = _start(command, port, env)
    stopping = threading.Event()
    failures: list[int] = []

    def load() -> None:  # the service under load while its worker dies
        with httpx.Client(timeout=5) as http:
            while not stopping.is_set():
                try:
                    status = http.get(f"http://127.0.0.1:{port}/api/v1").status_code
                    if status != 200:
                        failures.append(status)
                except httpx.TransportError:
                    time.sleep(0.01)

    thread = threading.Thread(target=load, daemon=True)
    try:
        thread.start()
        time.sleep(1.0)
        killed = time.monotonic()
        os.kill(_workers(supervised.pid)[0], signal.SIGKILL)
        time.sleep(0.05)
        while not _answers(port):
            if time.monotonic() - killed > 60:
                return f"exit status {bare_status}", "did not answer again within 60 s"
            time.sleep(0.02)
        back = time.monotonic() - killed
        stopping.set()
        thread.join(10)
        alive = supervised.poll() is None
    finally:
        stopping.set()
        stop(supervised)
    errors = f", {len(failures)} error answers" if failures else ", no error answer"
    return f"exit status {bare_status}", f"answered again {back:.2f} s after the kill{errors}; still running: {alive}"


def main() -> None:
    placement = Placement(pin=False)
    rows: list[tuple[str, str, str]] = []
    logdir = Path(tempfile.mkdtemp(prefix="hostile-"))
    redis = start_redis(placement)
    try:
        for store in ("memory", "redis"):
            env = {
                **service_env(backend=store, redis_url=redis.url if store == "redis" else ""),
                "IDENTITY_BODY_TIMEOUT_SECONDS": str(BODY_TIMEOUT_S),
                "IDENTITY_METRICS": "on",
            }
            server = start_hypercorn(
                f"hostile-{store}", "asgi_app:app", env, placement, ready_path="/api/v1", logdir=logdir
            )
            try:
                rows.append(("1 `GET /users?limit=10^17`", store, _huge_limit(server)))
                rows.append(
                    (
                        f"6 {SLOW_CONNECTIONS} slow bodies (100 declared, 10 sent; timeout {BODY_TIMEOUT_S:.0f} s)",
                        store,
                        _slow_bodies(server.port),
                    )
                )
                rows.append(("6 10 MB upload, `httpx.AsyncClient`", store, asyncio.run(_upload(server.port))))
                rows.append(("6 control characters in `display_name`", store, _control_characters(server)))
                rows.append(("7 operator paths", store, _operator_paths(server)))
                alive = server.alive()
            finally:
                server.stop()
            if not alive:
                raise RuntimeError(f"the {store} server died during the run")
        bare, supervised = _worker_death(child_env(service_env(backend="memory")))
        rows.append(("3 worker SIGKILLed: bare `hypercorn`", "memory", bare))
        rows.append(("3 worker SIGKILLed under load: `identity-service --workers 2`", "memory", supervised))
    finally:
        redis.stop()
    print("| item | store | now |\n|---|---|---|")
    for item, store, figure in rows:
        print(f"| {item} | {store} | {figure} |")


if __name__ == "__main__":
    main()
