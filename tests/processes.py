"""Processes the tests start themselves (redis-server, Hypercorn): free loopback ports, and stopping exactly
the process we started, by its handle."""

from __future__ import annotations

import socket
import subprocess
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry


def free_port() -> int:
    """A loopback TCP port nothing listens on (at the moment of asking)."""
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def stop(process: subprocess.Popen[bytes]) -> None:
    """Terminate (then kill, if it lingers) exactly this process, and wait for it."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@dataclass(frozen=True)
class RedisServer:
    """A running redis-server on loopback."""

    host: str
    port: int

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"


def answers_ping(port: int) -> bool:
    client = redis.Redis(
        host="127.0.0.1", port=port, socket_connect_timeout=0.2, socket_timeout=0.5, retry=Retry(NoBackoff(), 0)
    )
    try:
        return bool(client.ping())
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError):
        return False
    finally:
        client.close()


def children(pid: int) -> list[int]:
    """Direct children of `pid`, from /proc (no psutil)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces and parentheses, so split after the last ')'.
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return found
