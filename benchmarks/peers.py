"""Peers (`--peers`, not in the default run): the service side by side with the Firebase Auth emulator, the peer a
test author would otherwise pick.

The emulator is `firebase-tools` from npm, installed once into `benchmarks/.peers/` (git-ignored; reused while its
version is the pinned one), started alone (`firebase emulators:start --only auth`) on free loopback ports with a
`demo-` project, which needs no credentials (the CLI treats demo- projects as offline). It runs in a process
group of its own, with HOME, XDG_CONFIG_HOME and TMPDIR in a temporary directory (so no login or state of the
user's is read or written), and that group is what is stopped, always, Ctrl-C included. Measured:

- start-up: process start to the first 200, polled every 5 ms: the emulator's `GET /` (its readiness answer) and
  the service's `GET /api/v1` (Hypercorn, memory store, the command line of the HTTP section), alternating, one
  pair per repeat; wall seconds and CPU seconds of each process tree at that moment. Target: emulator / ours >= 15;
- load: the emulator's `POST /identitytoolkit.googleapis.com/v1/accounts:update` (a signed-up user's idToken and a
  displayName) against the service's `PATCH /users/me` of the HTTP section, by the same load generator with the
  same duration and connections, after one uncounted run of each (warm JIT and caches), alternating E P E P ... E:
  each of ours against the mean of the emulator runs around it, median over the repeats. The emulator's answer
  to the loaded request is checked (200, the name written) before any load, and the load generator's error count
  (non-2xx answers included) of every run is part of the result: a run with errors gives no ratio.
  CPU per request of each side's whole process tree. Target: ours / emulator >= 2. (The emulator's ID tokens are
  unsigned, `alg: none`; the service verifies an ES256 access token on every request.) The floor of the HTTP
  section is measured in the same alternation: the most any application could reach on Hypercorn.

When firebase-tools cannot be installed or started, the section says why and its targets read "not measured".
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from benchmarks.common import ROOT, Placement, child_env, free_port, service_env
from benchmarks.servers import Hypercorn, expect, http_request, start_hypercorn

if TYPE_CHECKING:
    from benchmarks.run import Options, Recorder

PEERS_DIR = ROOT / "benchmarks" / ".peers"
FIREBASE_TOOLS_VERSION = "15.34.2"
#: `demo-` project ids are offline by design: the emulators accept any credentials and call no Google service.
PROJECT_ID = "demo-bench"
API_KEY = "fake-api-key"
IDENTITY_TOOLKIT = "/identitytoolkit.googleapis.com/v1"
UPDATE_PATH = f"{IDENTITY_TOOLKIT}/accounts:update?key={API_KEY}"
DISPLAY_NAME = "Ada Lovelace (benchmark)"
INSTALL_TIMEOUT_S = 900.0
READY_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 15.0

SECTION = "Peers: the Firebase Auth emulator (firebase-tools {version}, auth only) on loopback"


class PeerUnavailable(RuntimeError):
    """The peer could not be installed, started or checked: the section reports why, and measures nothing."""


# --------------------------------------------------------------------------------------------------------------
# Installing and starting


def firebase_js(prefix: Path = PEERS_DIR) -> Path:
    return prefix / "node_modules" / "firebase-tools" / "lib" / "bin" / "firebase.js"


def _installed_marker(prefix: Path) -> Path:
    return prefix / f"installed-firebase-tools-{FIREBASE_TOOLS_VERSION}"


def install(say: Callable[[str], None], prefix: Path = PEERS_DIR) -> Path:
    """firebase-tools at the pinned version under `prefix` (installed by npm unless a finished install is there);
    returns its CLI script."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        raise PeerUnavailable("node and npm are needed to run the Firebase Auth emulator (node >= 20)")
    script = firebase_js(prefix)
    if _installed_marker(prefix).exists() and script.exists():
        return script
    prefix.mkdir(parents=True, exist_ok=True)
    (prefix / ".gitignore").write_text("*\n")
    say(f"installing firebase-tools@{FIREBASE_TOOLS_VERSION} with npm into {prefix} (once; ~300 MB)")
    command = ["npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--loglevel=error"]
    command.append(f"firebase-tools@{FIREBASE_TOOLS_VERSION}")
    try:
        out = subprocess.run(command, cwd=prefix, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise PeerUnavailable(f"npm install did not finish within {INSTALL_TIMEOUT_S:.0f} s") from None
    if out.returncode or not script.exists():
        said = [line for line in (out.stderr or out.stdout).splitlines() if "complete log of this run" not in line]
        tail = " ".join(" ".join(said).split())[-400:]
        raise PeerUnavailable(f"npm install firebase-tools@{FIREBASE_TOOLS_VERSION} failed ({out.returncode}): {tail}")
    _installed_marker(prefix).write_text(FIREBASE_TOOLS_VERSION + "\n")
    return script


def installed_version(script: Path) -> str:
    package = script.parents[2] / "package.json"
    version: str = json.loads(package.read_text())["version"]
    return version


def firebase_json(auth_port: int, hub_port: int, logging_port: int) -> dict[str, Any]:
    """The firebase.json of a run: the auth emulator and the two helpers the CLI always starts with it (the hub and
    the logging emulator), each on a port of ours on 127.0.0.1 (never the defaults, which anything else may hold),
    and no Emulator UI."""
    return {
        "emulators": {
            "auth": {"host": "127.0.0.1", "port": auth_port},
            "hub": {"host": "127.0.0.1", "port": hub_port},
            "logging": {"host": "127.0.0.1", "port": logging_port},
            "ui": {"enabled": False},
            "singleProjectMode": True,
        }
    }


def emulator_command(script: Path, project: str = PROJECT_ID) -> list[str]:
    """The auth emulator alone, the way a test author starts it: `firebase emulators:start --only auth`."""
    if not project.startswith("demo-"):
        raise ValueError("only a demo- project runs without credentials")
    node = shutil.which("node") or "node"
    return [node, str(script), "emulators:start", "--only", "auth", "--project", project]


def emulator_env(workdir: Path) -> dict[str, str]:
    """The CLI's environment: home, configuration and temporary files in `workdir` (no credentials or state of the
    user's are read; the hub's locator file, kept per project id in TMPDIR, cannot meet another run's)."""
    env = child_env(
        {
            "HOME": str(workdir),
            "XDG_CONFIG_HOME": str(workdir / "config"),
            "TMPDIR": str(workdir),
            "NO_UPDATE_NOTIFIER": "1",
        }
    )
    for name in ("GOOGLE_APPLICATION_CREDENTIALS", "FIREBASE_TOKEN", "GOOGLE_CLOUD_PROJECT", "GCLOUD_PROJECT"):
        env.pop(name, None)
    return env


# --------------------------------------------------------------------------------------------------------------
# Process trees: CPU time, and stopping exactly what we started

_TICKS = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it (read now: the emulator's CLI may start children at any time)."""
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        found.append(current)
        with contextlib.suppress(OSError, ValueError):
            queue += [int(c) for c in Path(f"/proc/{current}/task/{current}/children").read_text().split()]
    return found


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds of a process tree: each live process's own time and that of its children it has reaped."""
    total = 0
    for member in descendants(pid):
        fields = _stat(member)
        if fields is not None:  # utime, stime, cutime, cstime
            total += int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
    return total / _TICKS


@dataclass
class Emulator:
    """A Firebase Auth emulator we started, in its own process group."""

    port: int
    process: subprocess.Popen[bytes] = field(repr=False)
    workdir: tempfile.TemporaryDirectory[str] = field(repr=False)
    log: Path
    seconds_to_first_answer: float = math.nan
    cpu_seconds_to_first_answer: float = math.nan

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        """SIGTERM to the group (the CLI shuts its emulators down), SIGKILL to it if it lingers: sent while the
        group's leader is not reaped, so the group id is still ours; then SIGKILL to any member seen before that
        outlived it (same PID, same start time)."""
        try:
            if self.process.poll() is None:
                members = [(pid, _start_time(pid)) for pid in descendants(self.process.pid)]
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGTERM)
                try:
                    self.process.wait(timeout=STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(self.process.pid, signal.SIGKILL)
                    self.process.wait(timeout=STOP_TIMEOUT_S)
                for pid, started in members:
                    if pid != self.process.pid and started is not None and _start_time(pid) == started:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(pid, signal.SIGKILL)
        finally:
            self.workdir.cleanup()


def _start_time(pid: int) -> str | None:
    fields = _stat(pid)
    return fields[19] if fields is not None else None


def start_emulator(script: Path, placement: Placement, logdir: Path) -> Emulator:
    """The auth emulator on free loopback ports; returns once `GET /` answers 200, with the time from process
    start to that answer (wall and CPU seconds of the whole tree)."""
    workdir = tempfile.TemporaryDirectory(prefix="bench-firebase-")
    home = Path(workdir.name)
    port = free_port()
    (home / "firebase.json").write_text(json.dumps(firebase_json(port, free_port(), free_port()), indent=2))
    log = logdir / f"firebase-auth-emulator-{port}.log"
    with log.open("wb") as out:
        started = time.perf_counter()
        process = subprocess.Popen(
            placement.server(emulator_command(script)),
            cwd=home,
            env=emulator_env(home),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a process group of its own: what stop() signals
        )
    emulator = Emulator(port, process, workdir, log)
    try:
        while True:
            if process.poll() is not None:
                raise PeerUnavailable(f"the emulator exited with {process.returncode}: {log.read_text()[-1500:]}")
            with contextlib.suppress(OSError):
                if http_request(port, "GET", "/")[0] == 200:
                    emulator.seconds_to_first_answer = time.perf_counter() - started
                    emulator.cpu_seconds_to_first_answer = tree_cpu_seconds(process.pid)
                    return emulator
            if time.perf_counter() - started > READY_TIMEOUT_S:
                raise PeerUnavailable(f"the emulator did not answer within {READY_TIMEOUT_S:.0f} s")
            time.sleep(0.005)
    except BaseException:
        emulator.stop()
        raise


def start_service(opts: Options) -> tuple[Hypercorn, float]:
    """The service as the HTTP section runs it (Hypercorn, memory store), and the CPU seconds of its processes
    when its first 200 came."""
    server = start_hypercorn(
        "peers-service-memory",
        "asgi_app:app",
        service_env(backend="memory"),
        opts.placement,
        ready_path="/api/v1",
        logdir=opts.logdir,
        extra_args=opts.service_hypercorn_args,
    )
    return server, tree_cpu_seconds(server.process.pid)


# --------------------------------------------------------------------------------------------------------------
# Measuring


def sign_up(emulator: Emulator) -> bytes:
    """A user signed up in the emulator; the body of its accounts:update, checked to answer 200 and to write."""
    account = expect(
        http_request(
            emulator.port,
            "POST",
            f"{IDENTITY_TOOLKIT}/accounts:signUp?key={API_KEY}",
            body={"email": "bench-peer@example.com", "password": "bench-password-1", "returnSecureToken": True},
        ),
        200,
        "emulator: accounts:signUp",
    )
    body = orjson.dumps({"idToken": account["idToken"], "displayName": DISPLAY_NAME})
    answer = expect(http_request(emulator.port, "POST", UPDATE_PATH, body=body), 200, "emulator: accounts:update")
    if answer.get("displayName") != DISPLAY_NAME or answer.get("localId") != account["localId"]:
        raise PeerUnavailable(f"the emulator's accounts:update did not write the name: {answer!r}")
    return body


@dataclass(frozen=True)
class Run:
    rate: float
    p50_ms: float
    p99_ms: float
    cpu_us: float
    errors: int


def pair_ratios(emulator: list[Run], ours: list[Run]) -> list[tuple[float, float]]:
    """(req/s ratio, CPU-per-request ratio) of each of ours against the mean of the emulator runs either side
    (E P E P ... E); NaN where a run had errors, so a run with refused requests never counts."""
    if len(emulator) != len(ours) + 1:
        raise ValueError("the emulator runs must bracket ours: E P E ... P E")
    ratios = []
    for i, run in enumerate(ours):
        around = (emulator[i], emulator[i + 1])
        if run.errors or any(e.errors for e in around):
            ratios.append((math.nan, math.nan))
            continue
        ratios.append(
            (run.rate / ((around[0].rate + around[1].rate) / 2), (around[0].cpu_us + around[1].cpu_us) / 2 / run.cpu_us)
        )
    return ratios


def run_peers(opts: Options, rec: Recorder, say: Callable[[str], None]) -> dict[str, Any]:
    """The peers section: figures into `rec` under `peers.*`; returns what the report needs beyond them (the
    emulator's version, or why nothing was measured)."""
    try:
        script = install(say)
        version = installed_version(script)
    except PeerUnavailable as exc:
        say(f"peers: not measured: {exc}")
        return {"error": str(exc)}
    info: dict[str, Any] = {"emulator": f"firebase-tools {version}", "project": PROJECT_ID}
    try:
        _measure(opts, rec, script, say)
    except (PeerUnavailable, RuntimeError, OSError, subprocess.SubprocessError) as exc:
        say(f"peers: not measured: {exc}")
        info["error"] = str(exc)
    return info


def _measure(opts: Options, rec: Recorder, script: Path, say: Callable[[str], None]) -> None:
    from benchmarks import run as bench  # run.py imports this module

    emulator: Emulator | None = None
    service: Hypercorn | None = None
    floor: Hypercorn | None = None
    try:
        # Start-up, alternating; the last pair stays up for the load.
        for repeat in range(opts.repeat):
            say(f"peers: start-up {repeat + 1}/{opts.repeat}")
            service, cpu = start_service(opts)
            rec.add("peers.startup.service_s", service.seconds_to_first_200)
            rec.add("peers.startup.service_cpu_s", cpu)
            emulator = start_emulator(script, opts.placement, opts.logdir)
            rec.add("peers.startup.emulator_s", emulator.seconds_to_first_answer)
            rec.add("peers.startup.emulator_cpu_s", emulator.cpu_seconds_to_first_answer)
            rec.add("peers.startup.ratio", emulator.seconds_to_first_answer / service.seconds_to_first_200)
            rec.add("peers.startup.cpu_ratio", emulator.cpu_seconds_to_first_answer / cpu)
            if repeat < opts.repeat - 1:
                service.stop()
                emulator.stop()
        assert service is not None
        assert emulator is not None

        say("peers: load, accounts:update against PATCH /users/me")
        body = sign_up(emulator)
        target = bench.set_up(service, "peers", rate_limits=False, redis=None)
        method, path, headers, our_body = bench.http_operation(target, "patch_me")
        our_meter = target.meter()
        # The floor, as in the HTTP section: the baseline app answering the same PATCH in the service's shape, what
        # Hypercorn alone costs for these messages (the most any application on this server could reach).
        floor = start_hypercorn(
            "peers-shaped", "benchmarks.shaped_app:app", {}, opts.placement, ready_path="/", logdir=opts.logdir
        )
        floor_meter = bench.CpuMeter([floor.process.pid])

        def measure(prefix: str, read_cpu: Callable[[], float], port: int, *request: Any) -> Run:
            before = read_cpu()
            result = bench.load(opts, port, *request)
            used = read_cpu() - before
            run = Run(
                result.rate,
                result.p50_ms,
                result.p99_ms,
                used / result.count * 1e6 if result.count else math.nan,
                result.errors,
            )
            for name in ("rate", "p50_ms", "p99_ms", "cpu_us", "errors"):
                rec.add(f"{prefix}.{name}", float(getattr(run, name)))
            # The share of its core the server used: well under 1 while 16 connections wait on it, the core was
            # busy with something else (req/s then measure that share; CPU per request much less so).
            rec.add(f"{prefix}.busy", run.rate * run.cpu_us / 1e6)
            return run

        def emulator_run() -> Run:
            assert emulator is not None
            return measure(
                "peers.emulator.update",
                lambda: tree_cpu_seconds(emulator.process.pid),
                emulator.port,
                "POST",
                UPDATE_PATH,
                {},
                body,
            )

        # One uncounted run of each first: node's JIT (and CPython's caches) warm, so both are measured warm.
        bench.load(opts, emulator.port, "POST", UPDATE_PATH, {}, body)
        bench.load(opts, service.port, method, path, headers, our_body)
        emulator_runs, our_runs, floor_runs = [emulator_run()], [], []
        for _ in range(opts.repeat):  # E P F E P F ... E
            our_runs.append(
                measure("peers.service.patch_me", our_meter.read, service.port, method, path, headers, our_body)
            )
            floor_runs.append(
                measure("peers.floor.patch_me", floor_meter.read, floor.port, method, path, headers, our_body)
            )
            emulator_runs.append(emulator_run())
        for ratio, cpu_ratio in pair_ratios(emulator_runs, our_runs):
            rec.add("peers.load.ratio", ratio)
            rec.add("peers.load.cpu_ratio", cpu_ratio)
        for ratio, cpu_ratio in pair_ratios(emulator_runs, floor_runs):
            rec.add("peers.floor.ratio", ratio)
            rec.add("peers.floor.cpu_ratio", cpu_ratio)
        # The emulator's state after the load: still answering the request it was loaded with.
        expect(http_request(emulator.port, "POST", UPDATE_PATH, body=body), 200, "emulator after the load")
        for name, alive in (
            ("the emulator", emulator.alive()),
            ("the service", service.alive()),
            ("the floor", floor.alive()),
        ):
            if not alive:
                raise PeerUnavailable(f"{name} died during the run")
    finally:
        if emulator is not None:
            emulator.stop()
        for server in (service, floor):
            if server is not None:
                server.stop()


# --------------------------------------------------------------------------------------------------------------
# The table


def add_to_report(report: dict[str, Any], rec: Recorder, info: dict[str, Any]) -> None:
    """The section's rows and targets, appended to `report` (run.py's build_report format). Nothing when the
    section did not run; targets "not measured" when it could not measure."""
    if not info:
        return
    m = rec.median
    section = SECTION.format(version=info.get("emulator", FIREBASE_TOOLS_VERSION).removeprefix("firebase-tools "))
    rows: list[dict[str, Any]] = report["rows"]
    targets: list[dict[str, Any]] = report["targets"]

    def target(name: str, value: float, threshold: float) -> str:
        met = None if math.isnan(value) else value >= threshold
        targets.append(
            {"target": name, "value": value, "op": ">=", "threshold": threshold, "met": met, "where": "peers"}
        )
        return f">= {threshold:g}: " + ("met" if met else "NOT MET" if met is not None else "not measured")

    def row(
        label: str,
        value: Any = None,
        ratio: Any = None,
        p50: Any = None,
        p99: Any = None,
        cpu_ratio: Any = None,
        tgt: str = "",
        detail: str = "",
    ) -> None:
        entry = {
            "section": section,
            "figure": label,
            "rate": value,
            "ratio": ratio,
            "p50_ms": p50,
            "p99_ms": p99,
            "cpu_ratio": cpu_ratio,
            "target": tgt,
        }
        if detail:
            entry["detail"] = detail
        rows.append(entry)

    if "error" in info:
        row("not measured", detail=" ".join(str(info["error"]).split())[-600:])
    if not any(name.startswith("peers.") for name in rec.runs):
        target("start-up to first answer: Firebase Auth emulator / ours", math.nan, 15.0)
        target("PATCH /users/me req/s / the emulator's accounts:update req/s", math.nan, 2.0)
        return
    startup = target("start-up to first answer: Firebase Auth emulator / ours", m("peers.startup.ratio"), 15.0)
    row(
        "start-up, emulator: process start to first 200 (s)",
        m("peers.startup.emulator_s"),
        1.0,
        cpu_ratio=1.0,
        detail=f"CPU seconds by then (whole process tree): {_num(m('peers.startup.emulator_cpu_s'))}",
    )
    row(
        "start-up, ours (Hypercorn, memory store): the same (s); ratio = emulator / ours",
        m("peers.startup.service_s"),
        m("peers.startup.ratio"),
        cpu_ratio=m("peers.startup.cpu_ratio"),
        tgt=startup,
        detail=f"CPU seconds by then (Hypercorn and its worker): {_num(m('peers.startup.service_cpu_s'))}",
    )
    load = target("PATCH /users/me req/s / the emulator's accounts:update req/s", m("peers.load.ratio"), 2.0)
    e, s = "peers.emulator.update", "peers.service.patch_me"
    row(
        "emulator: POST accounts:update (idToken, displayName)",
        m(f"{e}.rate"),
        1.0,
        m(f"{e}.p50_ms"),
        m(f"{e}.p99_ms"),
        1.0,
        detail=_cpu_and_errors(rec, e),
    )
    row(
        "ours: PATCH /users/me (300 B), memory store",
        m(f"{s}.rate"),
        m("peers.load.ratio"),
        m(f"{s}.p50_ms"),
        m(f"{s}.p99_ms"),
        m("peers.load.cpu_ratio"),
        load,
        detail=_cpu_and_errors(rec, s),
    )
    f = "peers.floor.patch_me"
    row(
        "floor: Hypercorn, baseline app answering that PATCH in the service's shape",
        m(f"{f}.rate"),
        m("peers.floor.ratio"),
        m(f"{f}.p50_ms"),
        m(f"{f}.p99_ms"),
        m("peers.floor.cpu_ratio"),
        detail=_cpu_and_errors(rec, f),
    )


def _num(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.2f}"


def _cpu_and_errors(rec: Recorder, prefix: str) -> str:
    cpu = rec.median(f"{prefix}.cpu_us")
    busy = rec.median(f"{prefix}.busy")
    share = "-" if math.isnan(busy) else f"{busy:.0%}"
    errors = int(sum(rec.runs.get(f"{prefix}.errors", [])))
    runs = len(rec.runs.get(f"{prefix}.errors", []))
    return (
        f"CPU per request {_num(cpu)} µs (whole process tree), {share} of its core; "
        f"failed or non-2xx requests: {errors} in {runs} runs"
    )
