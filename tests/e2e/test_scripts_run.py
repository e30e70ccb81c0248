"""`scripts/run` on a fresh copy of the checkout: it installs what the service needs to run and nothing of the
test tools, under its own stamp, and a start once set up installs nothing."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import NOT_SOURCE, ROOT
from tests.processes import free_port, stop

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


def _serve_once(checkout: Path) -> None:
    """`scripts/run` until the service answers, then stopped (exec: the script's process is Hypercorn's)."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("IDENTITY_") and k != "VIRTUAL_ENV"}
    process = subprocess.Popen(
        [str(checkout / "scripts" / "run")],
        cwd=checkout,
        env={**env, "PORT": str(port), "PYTHON": sys.executable},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 600
        while True:
            assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
            try:
                if httpx.get(f"http://127.0.0.1:{port}/api/v1", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "scripts/run did not serve within 600 s"
            time.sleep(0.1)
    finally:
        stop(process)
        if process.stderr:
            process.stderr.close()


def test_scripts_run_installs_only_runtime_dependencies_once(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT, checkout, ignore=shutil.ignore_patterns(*NOT_SOURCE))
    venv_python = checkout / ".venv" / "bin" / "python"

    _serve_once(checkout)
    stamp = checkout / ".venv" / ".installed-run"
    assert stamp.is_file()
    assert not (checkout / ".venv" / ".installed").exists()  # scripts/setup's stamp (everything) is its own
    for runtime in ("hypercorn", "redis", "pydantic"):
        subprocess.run([str(venv_python), "-c", f"import {runtime}"], check=True, timeout=60)
    for test_tool in ("pytest", "hypothesis", "selenium"):
        imported = subprocess.run([str(venv_python), "-c", f"import {test_tool}"], capture_output=True, timeout=60)
        assert imported.returncode != 0, f"scripts/run installed {test_tool}"

    installed_at = stamp.stat().st_mtime_ns
    _serve_once(checkout)  # set up already: no pip, the stamp untouched
    assert stamp.stat().st_mtime_ns == installed_at


@pytest.mark.parametrize("port", ["busy", "not-a-port"])
def test_scripts_run_on_a_port_it_cannot_use_says_so_in_one_line(port: str) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        value = str(busy.getsockname()[1]) if port == "busy" else "80a"
        env = {k: v for k, v in os.environ.items() if not k.startswith("IDENTITY_") and k != "VIRTUAL_ENV"}
        finished = subprocess.run(
            [str(ROOT / "scripts" / "run")],
            cwd=ROOT,
            env={**env, "PORT": value},
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert finished.returncode == 1
    assert finished.stderr.splitlines() == [finished.stderr.strip()], finished.stderr  # one line
    assert "PORT=" in finished.stderr  # names what to change
    assert value in finished.stderr
    assert "Traceback" not in finished.stderr
