"""redis-server processes these tests start themselves (a persistent one, cluster nodes): on free loopback ports,
stopped or killed by their own Popen handle only."""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.processes import answers_ping, free_port, stop

START_TIMEOUT_S = 10.0


@dataclass
class RedisProcess:
    """One redis-server we started: its port, its arguments (to restart it the same way) and its handle."""

    port: int
    args: list[str]
    workdir: Path
    process: subprocess.Popen[bytes] = field(repr=False)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def log(self) -> Path:
        return self.workdir / f"redis-{self.port}.log"

    def kill(self) -> None:
        """SIGKILL exactly this process (no shutdown save, no goodbye to clients) and reap it."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)

    def stop(self) -> None:
        """SIGTERM (then SIGKILL if it lingers) exactly this process."""
        stop(self.process)

    def restart(self) -> None:
        """Start redis-server again on the same port, directory and arguments (it reloads its AOF, if any)."""
        assert self.process.poll() is not None, "restart() needs the previous process to be gone"
        self.process = _spawn(self.port, self.args, self.workdir, self.log)
        _wait_until_it_answers(self)


def redis_server_path() -> str:
    executable = shutil.which("redis-server")
    if executable is None:
        pytest.fail("redis-server is not on PATH (apt-get install redis-server): these tests never skip", pytrace=False)
    return executable


def _spawn(port: int, args: list[str], workdir: Path, log_path: Path) -> subprocess.Popen[bytes]:
    command = [redis_server_path(), "--port", str(port), "--bind", "127.0.0.1", "--daemonize", "no"]
    command += ["--dir", str(workdir), *args]
    with log_path.open("ab") as log:
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=workdir)


def _wait_until_it_answers(server: RedisProcess) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"redis-server on port {server.port} exited: {server.log.read_text(errors='replace')}")
        if answers_ping(server.port):
            return
        time.sleep(0.02)
    raise RuntimeError(f"redis-server on port {server.port} did not answer PING within {START_TIMEOUT_S} s")


def start_redis(workdir: Path, *args: str) -> RedisProcess:
    """A redis-server on a free loopback port, with `--dir workdir` and `args`; ready (answers PING) on return.
    In `args`, ``{port}`` stands for that port and ``{bus_port}`` for a second free one (a cluster node's bus)."""
    workdir.mkdir(parents=True, exist_ok=True)
    for _attempt in range(3):  # another process may take the free port between asking and binding
        port, bus_port = free_port(), free_port()
        log_path = workdir / f"redis-{port}.log"
        final = [arg.replace("{port}", str(port)).replace("{bus_port}", str(bus_port)) for arg in args]
        server = RedisProcess(port, final, workdir, _spawn(port, final, workdir, log_path))
        try:
            _wait_until_it_answers(server)
        except RuntimeError:
            server.stop()
            if "Address already in use" in log_path.read_text(errors="replace"):
                continue
            raise
        return server
    raise RuntimeError("redis-server could not bind a free loopback port in 3 attempts")
