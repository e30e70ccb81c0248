"""The README and the docs site's pages run, in order, against a fresh service.

Every ```sh and ```python block of README.md, then of each page of mkdocs.yml's nav, is executed in document order
against a real Hypercorn started here as `scripts/run` starts it (dev mode, the in-memory store, rate limits on),
on a free loopback port that replaces the documents' `127.0.0.1:8000`. The shell blocks run one after the other in
one bash session (`set -euo pipefail`: a failing command, an HTTP error that `curl --fail-with-body` reports, an
unset variable stops it), the Python blocks in one interpreter with a namespace they share. A block is left out
only by a `<!-- not run: reason -->` line right before its fence, visible in the Markdown source; the test fails
if fewer blocks than `MIN_EXECUTED` ran, so that it can never pass by running nothing. It stops exactly the
processes it started (the server, the two sessions), by their handles.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx
import pytest

from tests.docs.documents import ROOT, SHELL, Block, blocks, documents
from tests.processes import free_port, stop

pytestmark = pytest.mark.e2e

#: Fewer executed blocks than this means the documents (or the extraction) lost their examples.
MIN_EXECUTED = 30
#: The address the documents show: `scripts/run`'s default.
DOCUMENTED_ADDRESS = "127.0.0.1:8000"
BLOCK_TIMEOUT_S = 30.0
START_TIMEOUT_S = 20.0


@dataclass
class Service:
    address: str
    process: subprocess.Popen[bytes]
    log: Path


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    """Hypercorn serving asgi_app:app on its embedded defaults, as `scripts/run` does, on a free loopback port."""
    port = free_port()
    log = tmp_path / "service.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("IDENTITY_")}
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "hypercorn", "asgi_app:app", "--bind", f"127.0.0.1:{port}"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    running = Service(f"127.0.0.1:{port}", process, log)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            assert process.poll() is None, f"hypercorn exited with {process.returncode}:\n{log.read_text()}"
            try:
                if httpx.get(f"http://{running.address}/api/v1", timeout=1.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, f"hypercorn did not answer within {START_TIMEOUT_S} s"
            time.sleep(0.05)
        yield running
    finally:
        stop(process)


class _Lines:
    """The lines a session writes, read by a thread so that waiting for one has a deadline."""

    def __init__(self, stream: IO[str]) -> None:
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self._queue.put(line)
        self._queue.put(None)

    def next(self, deadline: float) -> str | None:
        """The next line; None at the end of the stream. Raises TimeoutError past the deadline."""
        try:
            return self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise TimeoutError from None

    def join(self) -> None:
        """Wait (bounded) for the end of the stream, once its process has ended."""
        self._thread.join(timeout=10)


def _end(process: subprocess.Popen[str], lines: _Lines) -> None:
    """Stop a session's process (exactly this one) and close its pipes."""
    if process.poll() is None:
        process.kill()
        process.wait(timeout=10)
    lines.join()
    for stream in (process.stdin, process.stdout):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


class ShellSession:
    """One bash for every shell block: each block is sourced (stdin /dev/null), then a line marks its end."""

    def __init__(self, workdir: Path) -> None:
        self._workdir = workdir
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(workdir), "LANG": "C.UTF-8"}
        self.process = subprocess.Popen(
            ["bash", "--noprofile", "--norc"],
            cwd=workdir,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self._lines = _Lines(self.process.stdout)
        self._count = 0
        self._send("set -euo pipefail\n")

    def _send(self, text: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(text)
        self.process.stdin.flush()

    def run(self, block: Block, text: str) -> None:
        self._count += 1
        script = self._workdir / f"block-{self._count}.sh"
        script.write_text(text, encoding="utf-8")
        done = f"<<block {self._count} done>>"
        self._send(f"source {script} </dev/null\nprintf '\\n%s\\n' '{done}'\n")
        output: list[str] = []
        deadline = time.monotonic() + BLOCK_TIMEOUT_S
        while True:
            try:
                line = self._lines.next(deadline)
            except TimeoutError:
                pytest.fail(f"{block.where} (sh) did not finish within {BLOCK_TIMEOUT_S} s:\n{''.join(output)}")
            if line is None:
                pytest.fail(f"{block.where} (sh) failed (exit status {self.process.wait()}):\n{''.join(output)}")
            if line.rstrip("\n") == done:
                return
            output.append(line)

    def close(self) -> None:
        _end(self.process, self._lines)


class PythonSession:
    """One interpreter for every Python block (`tests/docs/python_session.py`), in the checkout's directory."""

    def __init__(self, workdir: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("IDENTITY_")}
        self._stderr = (workdir / "python-blocks.log").open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.docs.python_session"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )
        assert self.process.stdout is not None
        self._lines = _Lines(self.process.stdout)

    def run(self, block: Block, text: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"where": block.where, "code": text}) + "\n")
        self.process.stdin.flush()
        try:
            line = self._lines.next(time.monotonic() + BLOCK_TIMEOUT_S)
        except TimeoutError:
            pytest.fail(f"{block.where} (python) did not finish within {BLOCK_TIMEOUT_S} s")
        if line is None:
            pytest.fail(f"{block.where} (python): the interpreter exited with {self.process.wait()}")
        answer = json.loads(line)
        if not answer["ok"]:
            pytest.fail(f"{block.where} (python) failed:\n{answer['error']}")

    def close(self) -> None:
        _end(self.process, self._lines)
        self._stderr.close()


def test_the_readme_and_the_docs_run_in_order_against_a_fresh_service(service: Service, tmp_path: Path) -> None:
    shell, python = ShellSession(tmp_path), PythonSession(tmp_path)
    executed: list[Block] = []
    not_run: list[str] = []
    try:
        for path in documents():
            for block in blocks(path):
                if not block.runnable:
                    continue
                if block.not_run is not None:
                    not_run.append(f"{block.where}: {block.not_run}")
                    continue
                text = block.text.replace(DOCUMENTED_ADDRESS, service.address)
                try:
                    (shell if block.language in SHELL else python).run(block, text)
                except pytest.fail.Exception as failure:
                    log = service.log.read_text(errors="replace")[-4000:]
                    raise AssertionError(f"{failure}\n--- the service's log (end) ---\n{log}") from None
                executed.append(block)
    finally:
        shell.close()
        python.close()
    ran = [block.where for block in executed]
    assert len(executed) >= MIN_EXECUTED, f"only {len(executed)} blocks ran: {ran}; not run: {not_run}"
    assert {block.language for block in executed} >= {"sh", "python"}, ran
    assert service.process.poll() is None, "the service died while the documents ran"
