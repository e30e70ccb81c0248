"""The processes a benchmark run starts and stops itself: Hypercorn (the service or the baseline, one worker, the
same command line for both) and redis-server (no persistence), each on a free loopback port, each stopped by its
own handle. Hypercorn's standard output is drained by a thread that picks the sign-in codes out of the mail the
service prints (IDENTITY_MAIL=console)."""

from __future__ import annotations

import asyncio
import http.client
import re
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from benchmarks.common import PYTHON, ROOT, Placement, child_env, free_port, stop

READY_TIMEOUT_S = 30.0
_SUBJECT_CODE = re.compile(r"Your code is ([0-9A-Za-z]{6})")


def http_request(
    port: int, method: str, path: str, headers: dict[str, str] | None = None, body: bytes | Any = None
) -> tuple[int, Any]:
    """One request on a fresh loopback connection (set-up and checks, not load): (status, decoded JSON or bytes)."""
    payload: bytes | None
    sent = dict(headers or {})
    payload = body if body is None or isinstance(body, bytes) else orjson.dumps(body)
    if payload:
        sent.setdefault("content-type", "application/json")
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, body=payload, headers=sent)
        response = conn.getresponse()
        raw = response.read()
    finally:
        conn.close()
    try:
        return response.status, orjson.loads(raw)
    except orjson.JSONDecodeError:
        return response.status, raw


def expect(status_body: tuple[int, Any], status: int = 200, what: str = "") -> Any:
    got, body = status_body
    if got != status:
        raise RuntimeError(f"{what}: expected {status}, got {got}: {body!r}")
    return body


class MailReader:
    """Drains a service's standard output; hands each sign-in code (the 6 characters in the subject) to whoever
    awaits mail for that address."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self._pending: dict[str, list[str]] = {}
        self._waiters: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Future[str]]] = {}
        self.mails = 0
        self._thread = threading.Thread(target=self._drain, name="mail-reader", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        to: str | None = None
        for raw in iter(self._stream.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            if line.startswith("To: "):
                to = line[4:].strip()
            elif line.startswith("Subject: ") and to is not None:
                found = _SUBJECT_CODE.search(line)
                if found:
                    self._deliver(to, found.group(1))
                to = None

    def _deliver(self, to: str, otp: str) -> None:
        with self._lock:
            self.mails += 1
            waiter = self._waiters.pop(to, None)
            if waiter is None:
                self._pending.setdefault(to, []).append(otp)
                return
        loop, future = waiter
        loop.call_soon_threadsafe(_resolve, future, otp)

    async def next_code(self, to: str, timeout: float = 10.0) -> str:
        """The next sign-in code mailed to `to` (the 6 characters a person would type)."""
        with self._lock:
            pending = self._pending.get(to)
            if pending:
                return pending.pop(0)
            loop = asyncio.get_running_loop()
            future: asyncio.Future[str] = loop.create_future()
            self._waiters[to] = (loop, future)
        return await asyncio.wait_for(future, timeout)

    def forget(self) -> None:
        with self._lock:
            self._pending.clear()
            self._waiters.clear()


def _resolve(future: asyncio.Future[str], value: str) -> None:
    if not future.done():
        future.set_result(value)


@dataclass
class Hypercorn:
    """A Hypercorn process we started."""

    name: str
    port: int
    process: subprocess.Popen[bytes] = field(repr=False)
    seconds_to_first_200: float
    log: Path
    mail: MailReader = field(repr=False)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def request(self, method: str, path: str, headers: dict[str, str] | None = None, body: Any = None) -> Any:
        return http_request(self.port, method, path, headers, body)

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        stop(self.process)
        if self.process.stdout:
            self.process.stdout.close()


def hypercorn_command(target: str, port: int, extra: tuple[str, ...] = ()) -> list[str]:
    """The one command line both the service and the baseline are served with (`extra`: options tried on the
    service alone, e.g. `--worker-class uvloop`, so its ratio to the baseline shows what they are worth)."""
    return [PYTHON, "-m", "hypercorn", target, "--bind", f"127.0.0.1:{port}", "--workers", "1", *extra]


def start_hypercorn(
    name: str,
    target: str,
    env: dict[str, str],
    placement: Placement,
    *,
    ready_path: str,
    logdir: Path,
    extra_args: tuple[str, ...] = (),
) -> Hypercorn:
    """Start Hypercorn serving `target`; return once `ready_path` answers 200 (process start to that first 200 is
    recorded). Polls every 5 ms."""
    port = free_port()
    log = logdir / f"{name}-{port}.log"
    with log.open("wb") as errors:
        started = time.perf_counter()
        process = subprocess.Popen(
            placement.server(hypercorn_command(target, port, extra_args)),
            cwd=ROOT,
            env=child_env(env),
            stdout=subprocess.PIPE,
            stderr=errors,
        )
    assert process.stdout is not None
    mail = MailReader(process.stdout)
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"{name}: hypercorn exited with {process.returncode}: {log.read_text()[-2000:]}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", ready_path)
            status = conn.getresponse().status
            conn.close()
            if status == 200:
                return Hypercorn(name, port, process, time.perf_counter() - started, log, mail)
        except OSError:
            pass
        if time.perf_counter() - started > READY_TIMEOUT_S:
            stop(process)
            raise RuntimeError(f"{name}: hypercorn did not answer 200 within {READY_TIMEOUT_S} s")
        time.sleep(0.005)


@dataclass
class RedisServer:
    """A redis-server we started: no persistence, loopback only."""

    port: int
    process: subprocess.Popen[bytes] = field(repr=False)
    workdir: tempfile.TemporaryDirectory[str] = field(repr=False)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> Any:
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=30)

    def used_memory(self) -> int:
        client = self.client()
        try:
            return int(client.info("memory")["used_memory"])
        finally:
            client.close()

    def stop(self) -> None:
        stop(self.process)
        self.workdir.cleanup()


def start_redis(placement: Placement) -> RedisServer:
    """redis-server on a free loopback port, `--save "" --appendonly no`, pinned with the load generators."""
    import redis

    workdir = tempfile.TemporaryDirectory(prefix="bench-redis-")
    port = free_port()
    command = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--daemonize", "no"]
    command += ["--save", "", "--appendonly", "no", "--dir", workdir.name, "--logfile", ""]
    process = subprocess.Popen(
        placement.client(command), cwd=workdir.name, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            workdir.cleanup()
            raise RuntimeError(f"redis-server exited with {process.returncode}")
        client = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=0.2, socket_timeout=0.5)
        try:
            if client.ping():
                return RedisServer(port, process, workdir)
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError):
            pass
        finally:
            client.close()
        time.sleep(0.02)
    stop(process)
    workdir.cleanup()
    raise RuntimeError("redis-server did not answer PING")
