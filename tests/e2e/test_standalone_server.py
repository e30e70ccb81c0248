"""The standalone fake for other languages' test suites: one command starts it and prints its base URL and keys;
SIGTERM stops it cleanly; --seed imports an export before it answers."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from identity_testing import IdentityFake
from tests.e2e.conftest import ROOT

pytestmark = pytest.mark.e2e


def test_start_seed_use_and_stop(tmp_path: Path) -> None:
    source = IdentityFake().create_project()
    source.create_user("seeded@example.com", display_name="Seeded", password="long enough")
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
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=15) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        for stream in (process.stdout, process.stderr):
            if stream:
                stream.close()
