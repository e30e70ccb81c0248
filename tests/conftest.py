"""Fixtures shared by every suite: the real redis-server the tests start themselves, the installed wheel."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.installed_wheel import installed, wheel  # noqa: F401 - fixtures, shared by the e2e and dashboard suites
from tests.processes import RedisServer, answers_ping, free_port, stop
from tests.smtp_server import start_smtp  # noqa: F401 - a fixture, shared by the mail and e2e suites

_START_TIMEOUT_S = 10.0

# No per-example deadline: Hypothesis's default (200 ms) is a timed assertion, and on a loaded two-core machine an
# ordinary example can take longer (a flaky DeadlineExceeded). Speed is the benchmarks' business, not the tests'.
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A real redis-server on a free loopback port, no persistence, for the whole session."""
    yield from spawn_redis_server(tmp_path_factory)


def spawn_redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """Start a redis-server of its own (no persistence, a free loopback port), yield it, stop it by its handle: for
    the session's server, and for a test that reads server-wide counters no other test may move."""
    executable = shutil.which("redis-server")
    if executable is None:
        pytest.fail(
            "redis-server is not on PATH: the real-Redis contract tests need it (apt-get install redis-server). "
            "They fail rather than skip so that CI never silently stops testing against real Redis.",
            pytrace=False,
        )
    workdir: Path = tmp_path_factory.mktemp("redis-server")
    log_path = workdir / "redis.log"
    for _attempt in range(3):  # another process may grab the free port between asking and binding
        port = free_port()
        command = [executable, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        command += ["--daemonize", "no", "--dir", str(workdir)]
        with log_path.open("wb") as log:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=workdir)
        try:
            deadline = time.monotonic() + _START_TIMEOUT_S
            while process.poll() is None and time.monotonic() < deadline:
                if answers_ping(port):
                    break
                time.sleep(0.02)
            else:
                output = log_path.read_text(errors="replace")
                if process.poll() is not None and "Address already in use" in output:
                    continue
                pytest.fail(
                    f"redis-server did not answer PING on 127.0.0.1:{port} within {_START_TIMEOUT_S:.0f} s "
                    f"(exit code {process.poll()}); its output:\n{output}",
                    pytrace=False,
                )
            yield RedisServer("127.0.0.1", port)
            return
        finally:
            stop(process)
    pytest.fail("redis-server could not bind a free loopback port in 3 attempts", pytrace=False)
