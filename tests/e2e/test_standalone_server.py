"""The standalone fake for other languages' test suites: one command starts it and prints its base URL and keys;
SIGTERM stops it cleanly; --seed imports an export before it answers."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from identity_testing import IdentityFake
from tests.e2e.conftest import ROOT
from tests.processes import stop

pytestmark = pytest.mark.e2e


def test_start_seed_use_and_stop(tmp_path: Path) -> None:
    source = IdentityFake().create_project(allow_user_api_keys=True)
    seeded = source.create_user("seeded@example.com", display_name="Seeded", password="long enough")
    api_key = source.create_api_key(user_id=seeded["id"])  # the seed holds its hash; the key authenticates
    seed = tmp_path / "seed.json"
    seed.write_text(json.dumps(source.export()))

    process = subprocess.Popen(
        [sys.executable, "-m", "identity_testing.server", "--port", "0", "--seed", str(seed)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line, process.stderr.read() if process.stderr else ""
        started = json.loads(line)
        assert started["base_url"].startswith("http://127.0.0.1:")
        headers = {
            "x-service-access-type": "server",
            "x-service-project-id": started["project_id"],
            "x-service-secret-server-key": started["secret_server_key"],
        }
        users = httpx.get(f"{started['base_url']}/api/v1/users", headers=headers).json()["items"]
        assert [u["display_name"] for u in users] == ["Seeded"]
        signed = httpx.post(
            f"{started['base_url']}/api/v1/auth/password/sign-in",
            headers={**headers, "x-service-access-type": "client"},
            json={"email": "seeded@example.com", "password": "long enough"},
        )
        assert signed.status_code == 200
        checked = httpx.post(
            f"{started['base_url']}/api/v1/user-api-keys/check", headers=headers, json={"api_key": api_key}
        )
        assert checked.json()["user_id"] == seeded["id"]  # the seed's config (API keys on) came along too
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=15) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        for stream in (process.stdout, process.stderr):
            if stream:
                stream.close()


def test_fake_server_on_busy_port_fails_without_ready_line() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as other:  # another server holds the port
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        finished = subprocess.run(
            [sys.executable, "-m", "identity_testing.server", "--port", str(port)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert finished.returncode != 0
    assert finished.stdout == ""  # no ready line pointing at the other server
    lines = finished.stderr.splitlines()
    assert len(lines) == 1, finished.stderr
    assert f"127.0.0.1:{port}" in lines[0]
    assert "in use" in lines[0]


def test_fake_server_announces_the_port_it_was_given() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "identity_testing.server", "--port", "0"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        started = json.loads(process.stdout.readline())
        port = int(started["base_url"].rsplit(":", 1)[1])
        # The announced address is this process's: the port is bound (a bind fails) and it answers the API.
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe, pytest.raises(OSError, match="in use"):
            probe.bind(("127.0.0.1", port))
        assert httpx.get(f"{started['base_url']}/api/v1", timeout=10).status_code == 200
    finally:
        stop(process)
        if process.stdout:
            process.stdout.close()


def test_a_seed_that_does_not_import_fails_without_ready_line(tmp_path: Path) -> None:
    seed = tmp_path / "seed.json"
    seed.write_text(json.dumps({"format": "identity-service/project-data", "version": 99}))
    finished = subprocess.run(
        [sys.executable, "-m", "identity_testing.server", "--port", "0", "--seed", str(seed)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert finished.returncode == 1
    assert finished.stdout == ""
    assert "cannot import the seed" in finished.stderr
    assert "version 1 or 2" in finished.stderr


def _send_codes(base_url: str, project_id: str, client_key: str, count: int) -> list[int]:
    """`count` sign-in codes sent from this one address, each to its own address: the statuses."""
    headers = {
        "x-service-access-type": "client",
        "x-service-project-id": project_id,
        "x-service-publishable-client-key": client_key,
    }
    with httpx.Client(base_url=base_url, headers=headers, timeout=10) as http:
        return [
            http.post(
                "/api/v1/auth/otp/send-sign-in-code",
                json={"email": f"burst-{i}@example.com", "callback_url": "http://localhost/cb"},
            ).status_code
            for i in range(count)
        ]


@pytest.mark.parametrize(("flags", "last_status"), [((), 200), (("--rate-limits",), 429)])
def test_fake_server_has_no_rate_limits_unless_asked_as_the_in_process_fake(
    flags: tuple[str, ...], last_status: int
) -> None:
    # A suite signs up more than ten users a minute from one address (send_code_ip allows 10 per 60 s).
    process = subprocess.Popen(
        [sys.executable, "-m", "identity_testing.server", "--port", "0", *flags],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        started = json.loads(process.stdout.readline())
        statuses = _send_codes(started["base_url"], started["project_id"], started["publishable_client_key"], 11)
        assert statuses[:10] == [200] * 10
        assert statuses[10] == last_status
    finally:
        stop(process)
        if process.stdout:
            process.stdout.close()
