"""Metrics across Hypercorn's worker processes, on a real server: each scrape reaches one worker, and each must
report every worker's requests (prometheus_client's multiprocess files in `PROMETHEUS_MULTIPROC_DIR`: see
`identity_hosting.observability`). Both through bare `hypercorn --workers 2` with the directory set, and through
`identity-service`, which makes the directory itself. The probes answer on the real server too. (The access log of a
real server is checked in tests/hardening/test_secrets_in_logs.py, with every secret the flows handle.)"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.conftest import ROOT, start_hypercorn, stop_server
from tests.processes import free_port, stop

pytestmark = pytest.mark.e2e

WORKERS = 2
BATCH = 20


def _served(base_url: str, count: int) -> None:
    """`count` requests to GET /api/v1, each on a connection of its own (so that the workers share them)."""
    for _ in range(count):
        assert httpx.get(f"{base_url}/api/v1", timeout=10.0).status_code == 200


def _counted(base_url: str) -> float:
    """GET /api/v1 requests in one scrape (one connection: one worker answers)."""
    scrape = httpx.get(f"{base_url}/metrics", timeout=10.0)
    assert scrape.status_code == 200, scrape.text
    return sum(
        sample.value
        for family in text_string_to_metric_families(scrape.text)
        for sample in family.samples
        if sample.name == "identity_http_requests_total" and sample.labels["route"] == "/api/v1"
    )


def _request_pids(directory: Path) -> set[str]:
    """The processes that observed a request's duration (the memory store observes nothing else)."""
    return {m.group(1) for p in directory.iterdir() if (m := re.fullmatch(r"histogram_(\d+)\.db", p.name))}


def _every_scrape_counts_every_worker(base_url: str, directory: Path) -> None:
    sent = BATCH
    _served(base_url, BATCH)
    # both workers served some (else the test would prove nothing)
    while len(_request_pids(directory)) < WORKERS and sent < 20 * BATCH:
        _served(base_url, BATCH)
        sent += BATCH
    assert len(_request_pids(directory)) == WORKERS, "one worker served every request"
    polls = _counted(base_url)  # the readiness polls of the start, if they were on /api/v1
    scrapes = [_counted(base_url) for _ in range(8)]
    assert scrapes == [polls] * 8, scrapes
    assert polls >= sent


def test_metrics_of_every_worker_in_each_scrape(tmp_path: Path) -> None:
    env = {"IDENTITY_METRICS": "on", "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    server = start_hypercorn(env, workers=WORKERS, ready_path="/health/ready")
    try:
        _every_scrape_counts_every_worker(server.base_url, tmp_path)
        assert httpx.get(f"{server.base_url}/health/live").json() == {"status": "live"}
    finally:
        stop_server(server)


def test_identity_service_keeps_the_workers_metrics_in_a_directory_of_its_own(tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IDENTITY_", "PROMETHEUS_"))}
    env |= {"IDENTITY_METRICS": "on", "IDENTITY_RATE_LIMITS": "off", "TMPDIR": str(tmp_path)}
    command = [sys.executable, "-m", "identity_hosting.serve", "--bind", f"127.0.0.1:{port}", "--workers", "2"]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
            try:
                if httpx.get(f"{base_url}/health/ready", timeout=1.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "identity-service did not start"
            time.sleep(0.05)
        (directory,) = tmp_path.glob("identity-metrics-*")
        _every_scrape_counts_every_worker(base_url, directory)
    finally:
        stop(process)
        stderr = process.stderr.read().decode() if process.stderr else ""
        if process.stderr:
            process.stderr.close()
    assert "PROMETHEUS_MULTIPROC_DIR is not set" not in stderr
    assert not directory.exists(), "identity-service left its metrics directory behind"


_WORKER = """
import os, sys
from identity_hosting.observability import Metrics
from identity_proto import RequestNote
metrics = Metrics()
if sys.argv[1] == "die":  # a worker that counts a request, sees the circuit open, and is killed
    metrics.request("/api/v1", "GET", 200, "none", 0.001)
    metrics.circuit(True)
    os._exit(0)  # no shutdown: as SIGKILL leaves it
sys.stdout.write(metrics.exposition()[0].decode())
"""


def test_a_killed_worker_keeps_its_counts_but_not_its_gauges(tmp_path: Path) -> None:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    subprocess.run([sys.executable, "-c", _WORKER, "die"], cwd=ROOT, env=env, check=True)
    scrape = subprocess.run(
        [sys.executable, "-c", _WORKER, "scrape"], cwd=ROOT, env=env, check=True, capture_output=True, text=True
    ).stdout
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(scrape)
        for s in family.samples
    }
    labels = (("access_type", "none"), ("method", "GET"), ("route", "/api/v1"), ("status", "200"))
    assert samples[("identity_http_requests_total", labels)] == 1
    assert samples.get(("identity_store_circuit_open", ()), 0) == 0  # the dead worker's open circuit is forgotten
