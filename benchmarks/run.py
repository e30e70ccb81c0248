"""Benchmarks: every figure is a ratio against a baseline measured in the same run, repeated, median reported.

    .venv/bin/python -m benchmarks.run [--repeat 3] [--requests 2000]

Prints a table and writes it to benchmarks/results/latest.json. Measured here:

- HTTP, one Hypercorn worker, memory store: GET /api/v1/projects/current (server key) against the baseline app
  (benchmarks/baseline_app.py) served by the same Hypercorn, loaded by the same keep-alive client on loopback;
- in process: the same request through the sync driver and the memory store, as a ratio to the HTTP baseline;
- start-up: process start to first 200 for Hypercorn (service vs baseline), and import to first response in
  process, through the core alone and through the testing API (`identity_testing.IdentityFake`);
- the cost of a fresh project in the testing API (what the pytest plugin pays per test).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.e2e.conftest import start_hypercorn, stop_server  # noqa: E402

SERVER_HEADERS = {
    "x-service-access-type": "server",
    "x-service-project-id": "00000000-0000-4000-8000-000000000000",
    "x-service-secret-server-key": "ssk_dev_secret_server_key_not_secret",
}


def _http_rate(base_url: str, path: str, requests: int) -> tuple[float, float, float]:
    """(requests per second, p50 ms, p99 ms) for sequential keep-alive requests."""
    latencies: list[float] = []
    with httpx.Client(base_url=base_url, headers=SERVER_HEADERS, timeout=10.0) as client:
        for _ in range(50):  # warm-up
            client.get(path)
        started = time.perf_counter()
        for _ in range(requests):
            t0 = time.perf_counter()
            response = client.get(path)
            latencies.append(time.perf_counter() - t0)
            if response.status_code != 200:
                raise RuntimeError(f"{path}: {response.status_code} {response.text}")
        elapsed = time.perf_counter() - started
    latencies.sort()
    return requests / elapsed, latencies[len(latencies) // 2] * 1000, latencies[int(len(latencies) * 0.99)] * 1000


IN_PROCESS_SCRIPT = """
import time
t0 = time.perf_counter()
from backends.memory import MemoryStore
from hosting import DEV_INTERNAL_ADMIN_KEY, DEV_PROJECT, SystemEntropy, wall_clock_ms
from identity_proto import Request, Service, run
service, store, entropy = Service(), MemoryStore(), SystemEntropy()
run(service.bootstrap(DEV_PROJECT, DEV_INTERNAL_ADMIN_KEY, now_ms=wall_clock_ms(), entropy=entropy), store)
response = run(service.handle(Request("GET", "/api/v1"), wall_clock_ms(), entropy), store)
assert response.status == 200
print(time.perf_counter() - t0)
"""


FAKE_START_SCRIPT = """
import time
t0 = time.perf_counter()
from identity_testing import IdentityFake
fake = IdentityFake()
with fake.client() as http:
    assert http.get("/api/v1").status_code == 200
print(time.perf_counter() - t0)
"""


def _fake_start() -> float:
    """The testing API: import, an IdentityFake, and its first response through an httpx client."""
    out = subprocess.run(
        [sys.executable, "-c", FAKE_START_SCRIPT], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return float(out.stdout.strip())


def _fresh_project_ms(count: int = 2000) -> float:
    """Milliseconds per fresh project in the testing API (what the pytest plugin does per test)."""
    from identity_testing import IdentityFake

    fake = IdentityFake()
    started = time.perf_counter()
    for _ in range(count):
        fake.create_project()
    return (time.perf_counter() - started) * 1000 / count


def _in_process_start() -> float:
    out = subprocess.run(
        [sys.executable, "-c", IN_PROCESS_SCRIPT], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return float(out.stdout.strip())


def _in_process_rate(requests: int) -> float:
    from backends.memory import MemoryStore
    from hosting import DEV_INTERNAL_ADMIN_KEY, DEV_PROJECT, SystemEntropy, wall_clock_ms
    from identity_proto import Request, Service, run

    service, store, entropy = Service(), MemoryStore(), SystemEntropy()
    run(service.bootstrap(DEV_PROJECT, DEV_INTERNAL_ADMIN_KEY, now_ms=wall_clock_ms(), entropy=entropy), store)
    request = Request("GET", "/api/v1/projects/current", tuple(SERVER_HEADERS.items()))
    started = time.perf_counter()
    for _ in range(requests):
        if run(service.handle(request, wall_clock_ms(), entropy), store).status != 200:
            raise RuntimeError("in-process request failed")
    return requests / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()

    rows: dict[str, list[float]] = {}
    for _ in range(args.repeat):
        baseline = start_hypercorn(target="benchmarks.baseline_app:app", ready_path="/")
        try:
            base_rps, base_p50, base_p99 = _http_rate(baseline.base_url, "/", args.requests)
        finally:
            stop_server(baseline)
        service = start_hypercorn()
        try:
            rps, p50, p99 = _http_rate(service.base_url, "/api/v1/projects/current", args.requests)
        finally:
            stop_server(service)
        base_start, start = baseline.seconds_to_first_200, service.seconds_to_first_200
        in_process = _in_process_rate(args.requests * 5)
        for name, value in {
            "baseline req/s": base_rps,
            "baseline p50 ms": base_p50,
            "baseline p99 ms": base_p99,
            "GET /projects/current req/s (memory, HTTP)": rps,
            "GET /projects/current ratio to baseline": rps / base_rps,
            "GET /projects/current p50 ms": p50,
            "GET /projects/current p99 ms": p99,
            "in-process GET /projects/current ratio to HTTP baseline": in_process / base_rps,
            "hypercorn start to first 200, s (service)": start,
            "hypercorn start to first 200, s (baseline)": base_start,
            "hypercorn start ratio service/baseline": start / base_start,
            "in-process import to first response, s": _in_process_start(),
            "testing API: import + fake + first response, s": _fake_start(),
            "testing API: fresh project, ms": _fresh_project_ms(),
        }.items():
            rows.setdefault(name, []).append(value)

    medians = {name: statistics.median(values) for name, values in rows.items()}
    width = max(map(len, medians))
    print(f"{'figure'.ljust(width)}  median of {args.repeat}")
    for name, value in medians.items():
        print(f"{name.ljust(width)}  {value:,.3f}")
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "latest.json").write_text(
        json.dumps({"repeat": args.repeat, "requests": args.requests, "median": medians, "runs": rows}, indent=2)
    )


if __name__ == "__main__":
    main()
