"""Load generators: wrk (Debian's package, a Lua script per operation for its method, headers and body) and a
small asyncio HTTP/1.1 client with keep-alive connections (the OTP sign-in, which must read a code from the mail
between its two requests, and the baseline it is compared with; also the fallback when wrk is missing).

Both run a closed loop: `connections` connections, each sending its next request as soon as the previous answer
is in, for `duration` seconds, after a warm-up on the same connections that is not counted."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import orjson

from benchmarks.common import Placement

WRK_RESULT_PREFIX = "BENCH_RESULT "

_LUA_REPORT = r"""
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH_RESULT {"requests": %d, "duration_us": %d, "status_errors": %d, "connect_errors": %d, ' ..
    '"read_errors": %d, "write_errors": %d, "timeouts": %d, "p50_us": %.0f, "p90_us": %.0f, "p99_us": %.0f, ' ..
    '"mean_us": %.1f, "max_us": %.0f}\n',
    summary.requests, summary.duration, e.status, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.mean, latency.max))
end
"""


@dataclass(frozen=True)
class Result:
    """One measurement: completed operations per second and their latency (ms)."""

    rate: float
    p50_ms: float
    p99_ms: float
    count: int
    errors: int

    def as_dict(self) -> dict[str, float]:
        return {"rate": self.rate, "p50_ms": self.p50_ms, "p99_ms": self.p99_ms, "count": self.count}


def wrk_available() -> bool:
    return shutil.which("wrk") is not None


def _lua_string(text: str) -> str:
    level = 1
    while f"]{'=' * level}]" in text:
        level += 1
    eq = "=" * level
    return f"[{eq}[{text}]{eq}]"


def wrk_script(method: str, headers: dict[str, str], body: bytes | None) -> str:
    """The Lua script that makes wrk send `method` with `headers` and `body`, and report as JSON when done."""
    lines = [f"wrk.method = {_lua_string(method)}"]
    for name, value in headers.items():
        lines.append(f"wrk.headers[ {_lua_string(name)} ] = {_lua_string(value)}")
    if body:
        lines.append(f'wrk.headers["content-type"] = {_lua_string("application/json")}')
        lines.append(f"wrk.body = {_lua_string(body.decode())}")
    return "\n".join(lines) + "\n" + _LUA_REPORT


def run_wrk(
    placement: Placement,
    port: int,
    path: str,
    *,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
    duration: float,
    connections: int,
    warmup: float,
) -> Result:
    """wrk -t1 -c`connections` --latency against 127.0.0.1:`port``path` (a warm-up run first, not counted)."""
    with tempfile.TemporaryDirectory(prefix="bench-wrk-") as tmp:
        script = Path(tmp) / "request.lua"
        script.write_text(wrk_script(method, headers or {}, body))
        url = f"http://127.0.0.1:{port}{path}"

        def once(seconds: float) -> dict[str, float]:
            # wrk takes whole seconds.
            command = ["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", "--latency"]
            command += ["--timeout", "10s", "-s", str(script), url]
            out = subprocess.run(placement.client(command), capture_output=True, text=True, check=True, timeout=120)
            for line in out.stdout.splitlines():
                if line.startswith(WRK_RESULT_PREFIX):
                    parsed: dict[str, float] = orjson.loads(line[len(WRK_RESULT_PREFIX) :])
                    return parsed
            raise RuntimeError(f"wrk printed no result: {out.stdout}\n{out.stderr}")

        if warmup > 0:
            once(warmup)
        r = once(duration)
    errors = int(r["status_errors"] + r["connect_errors"] + r["read_errors"] + r["write_errors"] + r["timeouts"])
    return Result(
        rate=r["requests"] / (r["duration_us"] / 1e6),
        p50_ms=r["p50_us"] / 1000,
        p99_ms=r["p99_us"] / 1000,
        count=int(r["requests"]),
        errors=errors,
    )


# --------------------------------------------------------------------------------------------------------------
# The asyncio client


class HttpError(RuntimeError):
    pass


class Connection:
    """One keep-alive HTTP/1.1 connection (Content-Length and chunked bodies). When the server ends it
    (`connection: close`, as Hypercorn does after `keep_alive_max_requests`), the next request reconnects, as wrk
    does."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.reconnects = 0

    @classmethod
    async def open(cls, port: int) -> Connection:
        conn = cls(port)
        await conn._connect()
        return conn

    async def _connect(self) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)

    async def send(self, raw: bytes) -> tuple[int, bytes]:
        if self.writer is None:
            self.reconnects += 1
            await self._connect()
        assert self.reader is not None
        assert self.writer is not None
        reader = self.reader
        self.writer.write(raw)
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        length = -1
        chunked = closing = False
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding" and b"chunked" in value.lower():
                chunked = True
            elif name == b"connection" and b"close" in value.lower():
                closing = True
        if chunked:
            parts = []
            while True:
                size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                if size == 0:
                    await reader.readuntil(b"\r\n")
                    break
                parts.append(await reader.readexactly(size))
                await reader.readexactly(2)
            body = b"".join(parts)
        elif length >= 0:
            body = await reader.readexactly(length)
        else:
            raise HttpError("response without a length on a keep-alive connection")
        if closing:
            self.close()
        return status, body

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


def raw_request(method: str, path: str, headers: dict[str, str], body: bytes | None = None) -> bytes:
    """The bytes of one HTTP/1.1 request."""
    head = [f"{method} {path} HTTP/1.1", "host: 127.0.0.1"]
    head += [f"{name}: {value}" for name, value in headers.items()]
    if body:
        head.append("content-type: application/json")
    head.append(f"content-length: {len(body or b'')}")
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + (body or b"")


Unit = Callable[[Connection, int], Awaitable[None]]


async def _closed_loop(port: int, unit: Unit, connections: int, duration: float, warmup: float) -> Result:
    conns = [await Connection.open(port) for _ in range(connections)]
    latencies: list[float] = []
    stop_at = 0.0

    async def worker(index: int) -> None:
        conn = conns[index]
        while True:
            t0 = time.perf_counter()
            if t0 >= stop_at:
                return
            await unit(conn, index)
            latencies.append(time.perf_counter() - t0)

    try:
        if warmup > 0:  # on the same connections; not counted
            stop_at = time.perf_counter() + warmup
            await asyncio.gather(*(worker(i) for i in range(connections)))
            latencies.clear()
        started = time.perf_counter()
        stop_at = started + duration
        await asyncio.gather(*(worker(i) for i in range(connections)))
        elapsed = time.perf_counter() - started
    finally:
        for conn in conns:
            conn.close()
    latencies.sort()
    n = len(latencies)
    return Result(
        rate=n / elapsed,
        p50_ms=latencies[n // 2] * 1000 if n else float("nan"),
        p99_ms=latencies[min(n - 1, int(n * 0.99))] * 1000 if n else float("nan"),
        count=n,
        errors=0,
    )


def run_python(port: int, unit: Unit, *, duration: float, connections: int, warmup: float) -> Result:
    """The asyncio client's closed loop over `unit` (one or several requests) on `connections` connections."""
    return asyncio.run(_closed_loop(port, unit, connections, duration, warmup))


def request_unit(method: str, path: str, headers: dict[str, str], body: bytes | None = None) -> Unit:
    """A unit of one request that must answer 200."""
    raw = raw_request(method, path, headers, body)

    async def unit(conn: Connection, index: int) -> None:
        status, answer = await conn.send(raw)
        if status != 200:
            raise HttpError(f"{method} {path}: {status} {answer[:300]!r}")

    return unit
