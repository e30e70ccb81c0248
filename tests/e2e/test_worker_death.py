"""A Hypercorn worker SIGKILLed under load (the OOM killer, an operator's mistake): bare Hypercorn's master stops and
exits 0, so a supervisor restarting on failure would leave the service down; `identity-service`
(`identity_hosting.serve`), the supported production command, starts it again and the service answers within
seconds. It stops gracefully on SIGTERM, leaving no process behind, and does not loop on a start-up failure."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.processes import children, free_port, stop

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
#: Bounds, generous for a loaded 2-core machine: the service starts in about half a second on a quiet one.
START_S = 60.0


def _descendants(pid: int) -> list[int]:
    return [d for child in children(pid) for d in (child, *_descendants(child))]


def _workers(pid: int) -> list[int]:
    """Hypercorn's worker processes under `pid` (spawned by multiprocessing; not its resource tracker)."""
    found = []
    for descendant in _descendants(pid):
        try:
            cmdline = Path(f"/proc/{descendant}/cmdline").read_bytes()
        except FileNotFoundError:
            continue
        if b"spawn_main" in cmdline and b"resource_tracker" not in cmdline:
            found.append(descendant)
    return found


def _start(command: list[str], port: int) -> subprocess.Popen[bytes]:
    env = {"IDENTITY_RATE_LIMITS": "off", "PATH": "/usr/bin:/bin"}
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/v1", timeout=1.0).status_code == 200:
                return process
        except httpx.TransportError:
            time.sleep(0.05)
    stop(process)
    raise AssertionError(f"the service did not answer within {START_S} s")


@pytest.fixture
def port() -> int:
    return free_port()


class Load:
    """GET /api/v1 in a loop from one thread until stopped: (sent at, status or None for a connection error)."""

    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}/api/v1"
        self.outcomes: list[tuple[float, int | None]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(timeout=5.0) as http:
            while not self._stop.is_set():
                sent = time.monotonic()
                try:
                    status: int | None = http.get(self.url).status_code
                except httpx.TransportError:
                    status = None
                    time.sleep(0.02)
                self.outcomes.append((sent, status))

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)


@pytest.fixture
def supervised(port: int) -> Iterator[subprocess.Popen[bytes]]:
    command = [sys.executable, "-m", "identity_hosting.serve", "--bind", f"127.0.0.1:{port}", "--workers", "2"]
    process = _start(command, port)
    try:
        yield process
    finally:
        stop(process)
        if process.stderr:
            process.stderr.close()


def test_bare_hypercorn_exits_0_when_its_only_worker_dies(port: int) -> None:
    # Why `identity-service` exists: with this, `Restart=on-failure` leaves the service down.
    command = [sys.executable, "-m", "hypercorn", "--bind", f"127.0.0.1:{port}", "--workers", "1", "asgi_app:app"]
    process = _start(command, port)
    try:
        (worker,) = _workers(process.pid)
        os.kill(worker, signal.SIGKILL)
        assert process.wait(START_S) == 0
    finally:
        stop(process)
        if process.stderr:
            process.stderr.close()


@pytest.mark.parametrize("after_s", [0.5, 0.0], ids=["under-load", "right-after-start"])
def test_a_worker_killed_under_load_is_replaced_and_the_service_answers_again(
    supervised: subprocess.Popen[bytes], port: int, after_s: float
) -> None:
    # right-after-start: within the start-up grace, where a master exiting 0 (a worker's death) was once taken for
    # a failed start and the command gave up
    workers = _workers(supervised.pid)
    assert len(workers) == 2
    with Load(port) as load:
        time.sleep(after_s)
        killed = time.monotonic()
        os.kill(workers[0], signal.SIGKILL)
        deadline = killed + START_S
        while time.monotonic() < deadline:
            replaced = len(_workers(supervised.pid)) == 2 and workers[0] not in _workers(supervised.pid)
            if replaced and any(sent > killed and status == 200 for sent, status in load.outcomes[-5:]):
                break
            time.sleep(0.1)
        time.sleep(0.5)
    if supervised.poll() is not None:
        assert supervised.stderr is not None
        said = supervised.stderr.read().decode()[-3000:]
        raise AssertionError(f"the command exited ({supervised.returncode}): {said}")
    after = [status for sent, status in load.outcomes if sent > killed]
    assert 200 in after, "the service never answered again"
    assert set(after) <= {200, None}, after  # refused connections while restarting, never an error answer
    assert load.outcomes[-1][1] == 200
    new_workers = _workers(supervised.pid)
    assert len(new_workers) == 2
    assert not set(new_workers) & set(workers)
    back = min(sent for sent, status in load.outcomes if sent > killed and status == 200)
    print(f"\nworker killed: the service answered again after {back - killed:.2f} s")


def test_sigterm_stops_it_gracefully_with_nothing_left_behind(supervised: subprocess.Popen[bytes]) -> None:
    descendants = _descendants(supervised.pid)
    assert len(_workers(supervised.pid)) == 2
    supervised.send_signal(signal.SIGTERM)
    assert supervised.wait(START_S) == 0
    deadline = time.monotonic() + 10  # the multiprocessing resource tracker ends once its last user has
    while [pid for pid in descendants if _alive(pid)] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [pid for pid in descendants if _alive(pid)] == []


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"  # a zombie has ended; only its parent's wait is missing


def test_a_start_up_failure_is_not_retried_but_reported(port: int) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", port))
        busy.listen()
        command = [sys.executable, "-m", "identity_hosting.serve", "--bind", f"127.0.0.1:{port}"]
        process = subprocess.run(
            command, cwd=ROOT, capture_output=True, timeout=START_S, env={"PATH": "/usr/bin:/bin"}, check=False
        )
    assert process.returncode != 0
    assert b"hypercorn exited while starting" in process.stderr
    assert process.stderr.count(b"starting it again") == 0
