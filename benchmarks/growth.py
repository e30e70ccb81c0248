"""Growth: does the rate fall as the store fills? GET and PATCH /users/me, in process, with 1k, 100k and 1M users
in the store (memory and Redis), and the memory each stored user takes.

One worker process per (store, size) (`benchmarks.inproc growth-worker`), each with its own store (for Redis, its
own redis-server), filled once at start:

- memory store: `store.apply(...)` of each user's sign-up commit in a loop, in process (the first 20k under
  tracemalloc for the bytes Python allocates per user; the RSS delta of the whole fill for what the process pays);
- Redis: the store's own command plans for those commits, 1000 users per pipeline (so keys and encodings are the
  store's exactly); `INFO memory` used_memory before and after, per user.

Each worker then signs in a sample of 1000 users spread over its store and, on request, measures GET or PATCH
/users/me cycling through their tokens for a fixed time. Measurements of the sizes of one (store, operation)
run in short slices, round robin (1k, 100k, 1M, 1M, 100k, 1k, ...), so drift in the machine's load does not read as
growth; each size's rate is divided by the smallest size's rate of the same repeat.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from typing import Any

from benchmarks.common import PYTHON, ROOT, SERVER_CPU, child_env, stop
from benchmarks.servers import RedisServer, start_redis

SIZES = (1_000, 100_000, 1_000_000)
FILL_TIMEOUT_S = 900.0
#: Each size's measurement time is cut into this many slices, taken round robin across the sizes.
SLICES = 10


def _task_cpu_s(pid: int) -> float:
    """CPU time of a process's main thread, nanosecond resolution (/proc/PID/schedstat)."""
    try:
        with open(f"/proc/{pid}/schedstat") as stat:
            return int(stat.read().split()[0]) / 1e9
    except OSError:
        return 0.0


def label(n: int) -> str:
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n >= 1000 and n % 1000 == 0:
        return f"{n // 1000}k"
    return f"{n:,}"


def sizes_for(max_users: int) -> list[int]:
    sizes = [s for s in SIZES if s <= max_users]
    if max_users not in sizes and max_users > 0:
        sizes.append(max_users)
    return sorted(sizes)


class Worker:
    """A growth worker process: filled on start, then measured on request."""

    def __init__(self, store: str, users: int, redis: RedisServer | None, pin: bool) -> None:
        command = [PYTHON, "-m", "benchmarks.inproc", "growth-worker", "--store", store, "--users", str(users)]
        if redis is not None:
            command += ["--redis-url", redis.url]
        if pin:
            command += ["--pin-cpu", str(SERVER_CPU)]
        self.name = f"{store}:{users}"
        self.process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=child_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self.info: dict[str, Any] = {}

    def _line(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"growth worker {self.name} exited with {self.process.wait()}")
        parsed: dict[str, Any] = json.loads(line)
        return parsed

    def wait_ready(self) -> dict[str, Any]:
        self.info = self._line()
        return self.info

    def measure(self, op: str, seconds: float) -> dict[str, float]:
        """{rate: ops per second, cpu_us: CPU microseconds per op}."""
        assert self.process.stdin is not None
        self.process.stdin.write(f"measure {op} {seconds}\n")
        self.process.stdin.flush()
        return self._line()

    def close(self) -> None:
        if self.process.poll() is None and self.process.stdin is not None:
            try:
                self.process.stdin.write("quit\n")
                self.process.stdin.close()
                self.process.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                pass
        stop(self.process)


def run_growth(opts: Any, rec: Any, say: Callable[[str], None]) -> dict[str, Any]:
    sizes = sizes_for(opts.max_users)
    stores = ("memory", "redis")
    redis_servers: dict[int, RedisServer] = {}
    workers: dict[tuple[str, int], Worker] = {}
    try:
        for size in sizes:
            redis_servers[size] = start_redis(opts.placement)
        started = time.perf_counter()
        # All fills at once: they use every core; each worker pins itself to the server CPU once filled.
        for store in stores:
            for size in sizes:
                workers[(store, size)] = Worker(
                    store, size, redis_servers[size] if store == "redis" else None, opts.placement.pin
                )
        deadline = started + FILL_TIMEOUT_S
        for worker in workers.values():
            if time.perf_counter() > deadline:
                raise RuntimeError("growth: filling the stores took too long")
            info = worker.wait_ready()
            say(f"growth: {worker.name} filled in {info['fill_seconds']:.1f} s")
        fill_wall = time.perf_counter() - started
        say(f"growth: every store filled after {fill_wall:.1f} s")
        for repeat in range(opts.repeat):
            ordered = sizes if repeat % 2 == 0 else list(reversed(sizes))
            for op in ("get_me", "patch_me"):
                for store in stores:
                    # SLICES short slices per size, round robin, so every size sees the same background load. The
                    # ratio is the median over rounds of (rate of this size / rate of the smallest) within one
                    # round, a fraction of a second apart; the rate and the CPU figures add the slices up.
                    totals = {size: {"ops": 0.0, "seconds": 0.0, "cpu_s": 0.0} for size in sizes}
                    for k in range(SLICES):
                        got = {}
                        for size in ordered if k % 2 == 0 else list(reversed(ordered)):
                            worker = workers[(store, size)]
                            redis_cpu = _task_cpu_s(redis_servers[size].process.pid) if store == "redis" else 0.0
                            got[size] = worker.measure(op, opts.growth_duration / SLICES)
                            if store == "redis":  # the server's work per operation counts too
                                got[size]["cpu_s"] += _task_cpu_s(redis_servers[size].process.pid) - redis_cpu
                            for key in totals[size]:
                                totals[size][key] += got[size][key]
                        for size in sizes:
                            rec.add(f"growth.{store}.{op}.{size}.ratio", got[size]["rate"] / got[sizes[0]]["rate"])
                    rate = {size: t["ops"] / t["seconds"] for size, t in totals.items()}
                    cpu_us = {size: t["cpu_s"] / t["ops"] * 1e6 for size, t in totals.items()}
                    for size in sizes:
                        prefix = f"growth.{store}.{op}.{size}"
                        rec.add(f"{prefix}.rate", rate[size])
                        rec.add(f"{prefix}.cpu_us", cpu_us[size])
                        rec.add(f"{prefix}.cpu_ratio", cpu_us[sizes[0]] / cpu_us[size])
        return {
            "sizes": sizes,
            "stores": list(stores),
            "fill_wall_seconds": fill_wall,
            "workers": {f"{store}:{size}": worker.info for (store, size), worker in workers.items()},
        }
    finally:
        for worker in workers.values():
            worker.close()
        for server in redis_servers.values():
            server.stop()
