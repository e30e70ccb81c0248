"""The in-process half of the benchmark: the core driven by the sync driver (`identity_proto.run`), no HTTP.

Run as subprocesses by `benchmarks.run` (each task in a fresh interpreter, pinned to the server's CPU):

    python -m benchmarks.inproc rates --duration 1.0          # operations per second, memory store
    python -m benchmarks.inproc roundtrips --redis-url URL    # Redis round trips per operation, counted
    python -m benchmarks.inproc startup --runs 5              # import to first response, seconds (medians)
    python -m benchmarks.inproc plugin-overhead --runs 7      # CPU seconds the pytest plugin adds to a run
    python -m benchmarks.inproc observability --duration 4    # the ASGI host with metrics / access log on vs off
    python -m benchmarks.inproc growth-worker --store memory --users 1000000   # see benchmarks.growth

Each prints one JSON document (growth workers speak a line protocol on stdin/stdout instead).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import hashlib
import itertools
import os
import random
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from benchmarks.common import (
    CALLBACK_URL,
    CLIENT_PATCH_BODY,
    PROJECT_ID,
    SERVER_PATCH_BODY,
    child_env,
    client_headers,
    server_headers,
    service_env,
)

_SUBJECT_CODE = re.compile(r"Your code is ([0-9A-Za-z]{6})")


class CaptureMailer:
    """A sync mailer that keeps the last message to each address (the in-process stand-in for SMTP)."""

    def __init__(self) -> None:
        self.last: dict[str, Any] = {}

    def send(self, email: Any) -> None:
        self.last[email.to] = email

    def otp(self, to: str) -> str:
        found = _SUBJECT_CODE.search(self.last.pop(to).subject)
        assert found is not None
        return found.group(1)


class Driver:
    """A production-mode service (the benchmark's settings) on `store`, driven in process."""

    def __init__(self, store: Any, *, rate_limits: bool = False, dev_mode: bool = False) -> None:
        """`dev_mode`: the same service in dev mode (the clock override read on every request), else production."""
        from identity_hosting.settings import Settings, SystemEntropy, wall_clock_ms
        from identity_proto import Request, Service, run

        settings = Settings.from_env(service_env(rate_limits=rate_limits))
        self.settings = settings
        options = settings.service_options()
        self.service = Service(dataclasses.replace(options, dev_mode=True) if dev_mode else options)
        self.store = store
        self.entropy = SystemEntropy()
        self.mailer = CaptureMailer()
        self.clock = wall_clock_ms
        self._run = run
        self._request = Request
        run(
            self.service.bootstrap(
                settings.default_project, settings.internal_admin_key, now_ms=wall_clock_ms(), entropy=self.entropy
            ),
            store,
        )

    def request(self, method: str, path: str, headers: dict[str, str], body: bytes = b"") -> Any:
        """A prepared `Request` (what a host would build from the wire)."""
        items = dict(headers)
        if body:
            items["content-type"] = "application/json"
        return self._request(method, path, tuple(items.items()), body, "", "127.0.0.1")

    def handle(self, request: Any) -> Any:
        return self._run(self.service.handle(request, self.clock(), self.entropy), self.store, self.mailer)

    def call(self, method: str, path: str, headers: dict[str, str], body: Any = None, status: int = 200) -> Any:
        raw = b"" if body is None else body if isinstance(body, bytes) else orjson.dumps(body)
        response = self.handle(self.request(method, path, headers, raw))
        if response.status != status:
            raise RuntimeError(f"{method} {path}: {response.status} {response.body[:300]!r}")
        return orjson.loads(response.body) if response.body else None

    # ---- the benchmark's operations

    def new_user(self, email: str) -> dict[str, Any]:
        """A user made through the API, signed in: {id, access_token, refresh_token}."""
        user = self.call(
            "POST",
            "/api/v1/users",
            server_headers(),
            {"primary_email": email, "primary_email_verified": True, "primary_email_auth_enabled": True},
            status=201,
        )
        return {"id": user["id"], **self.session(user["id"])}

    def session(self, user_id: str) -> dict[str, str]:
        tokens = self.call("POST", "/api/v1/auth/sessions", server_headers(), {"user_id": user_id})
        return {"access_token": tokens["access_token"], "refresh_token": tokens["refresh_token"]}

    def operations(self, user: dict[str, Any]) -> dict[str, Callable[[], None]]:
        """Each operation of the benchmark as a call that performs it once (and checks its status)."""
        prepared = {
            "get_me": self.request("GET", "/api/v1/users/me", client_headers(user["access_token"])),
            "patch_me": self.request(
                "PATCH", "/api/v1/users/me", client_headers(user["access_token"]), CLIENT_PATCH_BODY
            ),
            "server_patch": self.request("PATCH", f"/api/v1/users/{user['id']}", server_headers(), SERVER_PATCH_BODY),
            "refresh": self.request(
                "POST",
                "/api/v1/auth/sessions/current/refresh",
                client_headers(**{"x-service-refresh-token": user["refresh_token"]}),
            ),
        }
        ops: dict[str, Callable[[], None]] = {name: self._checked(req) for name, req in prepared.items()}
        ops["otp_sign_in"] = self.otp_unit("bench-otp-inproc@example.com")
        return ops

    def _checked(self, request: Any) -> Callable[[], None]:
        handle = self.handle

        def once() -> None:
            response = handle(request)
            if response.status != 200:
                raise RuntimeError(f"{request.method} {request.path}: {response.status} {response.body[:300]!r}")

        return once

    def otp_send(self, email: str) -> Callable[[], str]:
        body = orjson.dumps({"email": email, "callback_url": CALLBACK_URL})
        request = self.request("POST", "/api/v1/auth/otp/send-sign-in-code", client_headers(), body)

        def send() -> str:
            response = self.handle(request)
            if response.status != 200:
                raise RuntimeError(f"send-sign-in-code: {response.status} {response.body[:300]!r}")
            nonce: str = orjson.loads(response.body)["nonce"]
            return self.mailer.otp(email).lower() + nonce

        return send

    def otp_sign_in(self, code: str) -> None:
        body = orjson.dumps({"code": code})
        response = self.handle(self.request("POST", "/api/v1/auth/otp/sign-in", client_headers(), body))
        if response.status != 200:
            raise RuntimeError(f"otp sign-in: {response.status} {response.body[:300]!r}")

    def otp_unit(self, email: str) -> Callable[[], None]:
        """Send a code, read it from the mail, sign in with it: one OTP sign-in."""
        send = self.otp_send(email)

        def unit() -> None:
            self.otp_sign_in(send())

        return unit


def measure(operation: Callable[[], None], duration: float, batch: int = 20, warmup: int = 20) -> dict[str, float]:
    """Operations per second (wall clock) over `duration` seconds, and CPU microseconds per operation (after
    `warmup` uncounted operations); also the raw counts, so slices can be added up."""
    for _ in range(warmup):
        operation()
    done = 0
    started, cpu_started = time.perf_counter(), time.process_time()
    deadline = started + duration
    while True:
        for _ in range(batch):
            operation()
        done += batch
        now = time.perf_counter()
        if now >= deadline:
            cpu = time.process_time() - cpu_started
            return {
                "rate": done / (now - started),
                "cpu_us": cpu / done * 1e6,
                "ops": done,
                "seconds": now - started,
                "cpu_s": cpu,
            }


# --------------------------------------------------------------------------------------------------------------
# rates


RATE_SLICES = 10


def task_rates(args: argparse.Namespace) -> dict[str, Any]:
    """Each operation for `duration` seconds, in RATE_SLICES slices taken round robin across the operations; an
    operation's rate is the median of its slices' rates (a slice in which another process held the CPU does not
    drag it down), its CPU cost the total CPU time over the total operations."""
    from backends.memory import MemoryStore

    driver = Driver(MemoryStore())
    ops = driver.operations(driver.new_user("bench-inproc@example.com"))
    ops["otp_sign_in"]()  # the first sign-in signs the address up; later ones are returning users
    names = list(ops)
    slices: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    for k in range(RATE_SLICES):
        for name in names if k % 2 == 0 else reversed(names):
            slices[name].append(measure(ops[name], args.duration / RATE_SLICES, batch=5, warmup=20 if k == 0 else 0))
    out = {}
    for name, got in slices.items():
        ops_done = sum(s["ops"] for s in got)
        cpu = sum(s["cpu_s"] for s in got)
        wall = sum(s["seconds"] for s in got)
        out[name] = {
            "rate": statistics.median(s["rate"] for s in got),
            "cpu_us": cpu / ops_done * 1e6,
            "cpu_share": cpu / wall,
        }
    return out


# --------------------------------------------------------------------------------------------------------------
# the operators' view: what metrics and the access log cost the ASGI host

#: Each mode's settings (`identity_hosting.observability`); "off" is the default.
OBSERVABILITY_MODES: dict[str, dict[str, Any]] = {
    "off": {},
    "metrics": {"metrics": True},
    "access_log": {"access_log": "json"},
    "both": {"metrics": True, "access_log": "json"},
}


def task_observability(args: argparse.Namespace) -> dict[str, Any]:
    """Authenticated GETs (`/api/v1/projects/current`, server access, memory store) through the raw ASGI host in
    process, no server and no socket: each mode in RATE_SLICES slices taken round robin, the median slice's rate and
    the CPU microseconds per request, with the ratio to "off". The access log goes to /dev/null (one write per line,
    as to a pipe). Metrics single-process (no PROMETHEUS_MULTIPROC_DIR), unless the caller's environment sets it."""
    import asyncio

    from asgi_app import IdentityASGI
    from identity_hosting.settings import DEV_KEYS, DEV_PROJECT_ID, Settings

    headers = [
        (b"x-service-access-type", b"server"),
        (b"x-service-project-id", DEV_PROJECT_ID.encode()),
        (b"x-service-secret-server-key", DEV_KEYS.secret_server_key.encode()),
    ]
    scope = {
        "type": "http",
        "method": "GET",
        "path": "/api/v1/projects/current",
        "headers": headers,
        "query_string": b"",
        "client": ("127.0.0.1", 50000),
        "scheme": "http",
        "root_path": "",
    }

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    statuses: list[int] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    loop = asyncio.new_event_loop()
    apps = {name: IdentityASGI(Settings(rate_limits=False, **kw)) for name, kw in OBSERVABILITY_MODES.items()}
    for app in apps.values():  # started, without the delivery task (nothing to deliver: it would only add noise)
        loop.run_until_complete(app.startup())
        if app.webhook_loop is not None:
            loop.run_until_complete(app.webhook_loop.stop())

    async def twenty(app: Any) -> None:
        for _ in range(20):
            await app(scope, receive, send)

    null = open(os.devnull, "w")  # noqa: SIM115 (open for the whole task)
    saved, sys.stderr = sys.stderr, null
    try:
        slices: dict[str, list[dict[str, float]]] = {name: [] for name in apps}
        for k in range(RATE_SLICES):
            for name in apps if k % 2 == 0 else reversed(list(apps)):
                app = apps[name]
                got = measure(lambda app=app: loop.run_until_complete(twenty(app)), args.duration / RATE_SLICES, 1, 5)
                slices[name].append(got)
    finally:
        sys.stderr = saved
        null.close()
        for app in apps.values():
            loop.run_until_complete(app.shutdown())
        loop.close()
    assert set(statuses) == {200}, set(statuses)
    out: dict[str, Any] = {}
    for name, got in slices.items():
        requests = sum(s["ops"] for s in got) * 20
        out[name] = {
            "rate": statistics.median(s["rate"] for s in got) * 20,
            "cpu_us": sum(s["cpu_s"] for s in got) / requests * 1e6,
        }
    for name in out:
        out[name]["rate_vs_off"] = out[name]["rate"] / out["off"]["rate"]
        out[name]["cpu_vs_off"] = out[name]["cpu_us"] / out["off"]["cpu_us"]
    return out


# --------------------------------------------------------------------------------------------------------------
# Redis round trips, counted


def counting_client(url: str) -> Any:
    """A redis-py client that counts round trips: every `execute_command` outside a pipeline (scripts too: a
    registered Script calls `evalsha`, which is `execute_command`), and every pipeline `execute` as one. Each round
    trip is logged by its command name(s)."""
    import redis

    class CountingRedis(redis.Redis):
        trips: list[str]

        def execute_command(self, *args: Any, **options: Any) -> Any:
            self.trips.append(_describe(args))
            return super().execute_command(*args, **options)

        def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> Any:
            pipe = super().pipeline(transaction=transaction, shard_hint=shard_hint)
            execute = pipe.execute
            trips = self.trips

            def counted_execute(*a: Any, **k: Any) -> Any:
                names = ", ".join(_describe(stack[0]) for stack in pipe.command_stack)
                trips.append(f"pipeline[{names}]")
                return execute(*a, **k)

            pipe.execute = counted_execute
            return pipe

    client = CountingRedis.from_url(url, socket_timeout=5.0)
    client.trips = []
    return client


_SCRIPT_NAMES: dict[str, str] = {}


def _describe(args: tuple[Any, ...]) -> str:
    name = str(args[0]).upper() if args else "?"
    if name == "EVALSHA" and len(args) > 1:
        return f"EVALSHA {_SCRIPT_NAMES.get(str(args[1]), str(args[1])[:8])}"
    return name


def task_roundtrips(args: argparse.Namespace) -> dict[str, Any]:
    """Each operation twice against RedisStore on a real redis-server; the second (caches warm) is the figure."""
    from backends import redis as redis_backend
    from backends.redis import RedisStore

    for name, source in getattr(redis_backend, "SCRIPTS", {}).items():
        _SCRIPT_NAMES[hashlib.sha1(source.encode()).hexdigest()] = name  # noqa: S324 - how Redis names scripts

    results: dict[str, Any] = {}

    def count(store: Any, operation: Callable[[], Any]) -> tuple[int, list[str], Any]:
        store.client.trips.clear()
        value = operation()
        trips = list(store.client.trips)
        return len(trips), trips, value

    # Production mode with rate limits off and on (the shipped default), then dev mode (the clock override read on
    # every request) with them on.
    for rate_limits, dev_mode in ((False, False), (True, False), (True, True)):
        client = counting_client(args.redis_url)
        client.flushdb()
        store = RedisStore(client)
        driver = Driver(store, rate_limits=rate_limits, dev_mode=dev_mode)
        user = driver.new_user(f"bench-trips-{int(rate_limits)}@example.com")
        ops = driver.operations(user)
        names = ["get_me", "patch_me", "server_patch", "refresh"]
        suffix = ("+rate_limits" if rate_limits else "") + ("+dev_mode" if dev_mode else "")
        for name in names:
            cold, _, _ = count(store, ops[name])
            warm, trips, _ = count(store, ops[name])
            results[name + suffix] = {"cold": cold, "warm": warm, "trips": trips}
        email = f"bench-trips-otp-{int(rate_limits)}@example.com"
        send = driver.otp_send(email)
        cold_units = []
        for _ in range(2):  # the first signs the address up; the second is a returning user's sign-in
            sent, send_trips, code = count(store, send)
            signed, sign_trips, _ = count(store, lambda code=code, driver=driver: driver.otp_sign_in(code))
            cold_units.append((sent, send_trips, signed, sign_trips))
        sent, send_trips, signed, sign_trips = cold_units[-1]
        results["otp_send" + suffix] = {"cold": cold_units[0][0], "warm": sent, "trips": send_trips}
        results["otp_sign_in_step" + suffix] = {"cold": cold_units[0][2], "warm": signed, "trips": sign_trips}
        results["otp_sign_in" + suffix] = {
            "cold": cold_units[0][0] + cold_units[0][2],
            "warm": sent + signed,
            "trips": send_trips + sign_trips,
        }
        client.close()
    return results


# --------------------------------------------------------------------------------------------------------------
# start-up

STARTUP_SCRIPT = """
import time
t0, c0 = time.perf_counter(), time.process_time()
from backends.memory import MemoryStore
from identity_hosting.settings import Settings, SystemEntropy, wall_clock_ms
from identity_proto import Request, Service, run
settings = Settings.from_env(ENV)
service, store, entropy = Service(settings.service_options()), MemoryStore(), SystemEntropy()
run(service.bootstrap(settings.default_project, settings.internal_admin_key, now_ms=wall_clock_ms(), entropy=entropy),
    store)
response = run(service.handle(Request("GET", "/api/v1/projects/current", HEADERS), wall_clock_ms(), entropy), store)
elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
assert response.status == 200, response
print(elapsed, cpu)
"""


def startup_script() -> str:
    """A script that prints the seconds from the first import to the first (authenticated) response, wall clock
    and CPU time."""
    headers = tuple(client_headers().items())
    return f"ENV = {service_env()!r}\nHEADERS = {headers!r}\n" + STARTUP_SCRIPT


def task_startup(args: argparse.Namespace) -> dict[str, Any]:
    """`startup_script` in `args.runs` fresh interpreters: medians and every run's CPU seconds."""
    runs = []
    for _ in range(args.runs):
        out = subprocess.run(
            [sys.executable, "-c", startup_script()], env=child_env(), capture_output=True, text=True, check=True
        )
        wall, cpu = out.stdout.split()
        runs.append((float(wall), float(cpu)))
    return {
        "wall_s": statistics.median(wall for wall, _ in runs),
        "cpu_s": statistics.median(cpu for _, cpu in runs),
        "cpu_runs_s": [cpu for _, cpu in runs],
    }


# --------------------------------------------------------------------------------------------------------------
# the pytest plugin's cost to a suite that does not use it

_TRIVIAL_TEST = "def test_trivial():\n    assert 1 + 1 == 2\n"


def _child_cpu_seconds(command: list[str], cwd: str, env: dict[str, str]) -> float:
    """CPU seconds (user + system) a child process spends running `command` to its end."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, cwd=cwd, env=env, capture_output=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def task_plugin_overhead(args: argparse.Namespace) -> dict[str, Any]:
    """CPU seconds the pytest plugin (entry point `identity`) adds to a run that uses none of its fixtures: one
    trivial test in a scratch directory, run by fresh interpreters without and with the plugin, alternately,
    `args.runs` times each; medians. The other installed plugins are left out of both runs
    (PYTEST_DISABLE_PLUGIN_AUTOLOAD; `-p identity` loads ours by its entry point name): they cost the same either
    way and would only add noise to the difference."""
    env = {**child_env(), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_trivial.py"]
    without: list[float] = []
    with_plugin: list[float] = []
    with tempfile.TemporaryDirectory() as scratch:
        Path(scratch, "test_trivial.py").write_text(_TRIVIAL_TEST)
        for _ in range(args.runs):
            without.append(_child_cpu_seconds(command, scratch, env))
            with_plugin.append(_child_cpu_seconds([*command, "-p", "identity"], scratch, env))
    return {
        "without_cpu_s": statistics.median(without),
        "with_cpu_s": statistics.median(with_plugin),
        "added_cpu_s": statistics.median(b - a for a, b in zip(without, with_plugin, strict=True)),
    }


# --------------------------------------------------------------------------------------------------------------
# growth workers (see benchmarks.growth): a store filled with N users, then measured on request

FILL_BASE_MS = 1_767_225_600_000


def bench_user_id(index: int, seed: int) -> str:
    digest = hashlib.blake2b(f"{seed}:{index}".encode(), digest_size=16).digest()
    return str(uuid.UUID(bytes=digest, version=4))


def bench_user(index: int, seed: int) -> Any:
    """The index-th filled user (a pure function of index and seed, so fills can be split across processes):
    what a code sign-in creates, plus a display name."""
    from identity_proto.records import User

    at = FILL_BASE_MS + index
    return User(
        id=bench_user_id(index, seed),
        signed_up_at_millis=at,
        last_active_at_millis=at,
        display_name=f"Bench User {index}",
        primary_email=f"user{index}@bench.example.com",
        primary_email_verified=True,
        primary_email_auth_enabled=True,
        otp_auth_enabled=True,
    )


def _sign_up(i: int, seed: int) -> Any:
    """The `Commit` a sign-up of bench user i makes (`commit_new_user`'s one effect: no team, session or grant)."""
    from identity_proto.flows.signin import NewUser, commit_new_user

    return next(commit_new_user(PROJECT_ID, NewUser(bench_user(i, seed))))


def _create_users(start: int, stop: int, seed: int) -> Iterator[Any]:
    for i in range(start, stop):
        yield _sign_up(i, seed)


def _chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    chunk: list[Any] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _arg_bytes(arg: Any) -> bytes:
    return arg if isinstance(arg, bytes) else str(arg).encode()


class TemplateMismatch(Exception):
    """The store's plan for a user is not what the template predicts: fill through the plans instead."""


#: The `commit` script's reply for a commit applied that returns no records.
COMMITTED = -1


class SignUpTemplate:
    """The store's own EVALSHA command for a bench user's sign-up, made fast: the store's plan encodes user 0 once;
    user i's command is that encoding with user 0's varying values (id, times, name, e-mail) replaced by user i's.
    Constant arguments are packed once. `check(i)` runs the store's real plan for user i and raises
    TemplateMismatch unless it is byte for byte the template's; the fill checks the first 50 users and every 997th
    after them."""

    def __init__(self, store: Any, seed: int, shas: dict[str, str]) -> None:
        self.store, self.seed, self.shas = store, seed, shas
        name, items = self._real(0)
        self.markers0 = self._markers(0)
        self.parts: list[bytes | int] = []  # packed constant segments, or the index of a varying item
        self.varying: list[bytes] = []
        self.count = len(items)
        for item in items:
            if any(marker in item for marker in self.markers0):
                self.parts.append(len(self.varying))
                self.varying.append(item)
            else:
                self.parts.append(b"$%d\r\n%s\r\n" % (len(item), item))
        self.name = name

    def _markers(self, i: int) -> list[bytes]:
        # What differs between bench users (see bench_user): id, times, e-mail, display name.
        return [
            bench_user_id(i, self.seed).encode(),
            str(FILL_BASE_MS + i).encode(),
            f"user{i}@".encode(),
            f'Bench User {i}\\"'.encode(),  # its JSON text, in the commit's JSON document
        ]

    def _real(self, i: int) -> tuple[str, list[bytes]]:
        """The store's plan for user i: its one step, as the arguments of EVALSHA."""
        from backends.redis import Script
        from identity_proto.effects import Committed

        effect = _sign_up(i, self.seed)
        plan = self.store.performs[type(effect)](self.store.keys, effect)
        op = plan.send(None)
        if not isinstance(op, Script):
            raise TemplateMismatch(f"the sign-up's first step is {type(op).__name__}, not a script")
        try:
            plan.send(COMMITTED)
            raise TemplateMismatch("the sign-up's plan has more than one step")
        except StopIteration as stop:
            if not isinstance(stop.value, Committed):
                raise TemplateMismatch(f"the sign-up's plan answers {stop.value!r} to {COMMITTED}") from None
        items = [b"EVALSHA", self.shas[op.name].encode(), str(len(op.keys)).encode()]
        items += [_arg_bytes(a) for a in (*op.keys, *op.args)]
        return op.name, items

    def command(self, i: int) -> bytes:
        new = self._markers(i)
        out = [b"*%d\r\n" % self.count]
        for part in self.parts:
            if isinstance(part, bytes):
                out.append(part)
            else:
                item = self.varying[part]
                for old, replacement in zip(self.markers0, new, strict=True):
                    item = item.replace(old, replacement)
                out.append(b"$%d\r\n%s\r\n" % (len(item), item))
        return b"".join(out)

    def check(self, i: int) -> None:
        name, items = self._real(i)
        expected = b"*%d\r\n" % len(items) + b"".join(b"$%d\r\n%s\r\n" % (len(x), x) for x in items)
        if name != self.name or expected != self.command(i):
            raise TemplateMismatch(f"user {i}: the store's plan differs from the template")


def fill_redis_range(url: str, start: int, stop: int, seed: int, batch: int = 2000) -> int:
    """Create users `start`..`stop` in Redis exactly as RedisStore's plan of a sign-up's commit writes them (see
    `SignUpTemplate`), `batch` EVALSHA commands per pipelined write; every reply must be `COMMITTED`."""
    import redis

    from backends.redis import SCRIPTS, RedisStore

    store = RedisStore.from_url(url, socket_timeout=60.0)
    shas = {name: store.client.script_load(source) for name, source in SCRIPTS.items()}
    template = SignUpTemplate(store, seed, shas)
    conn = redis.ConnectionPool.from_url(url, socket_timeout=60.0).make_connection()
    conn.connect()
    done = 0
    try:
        for first in range(start, stop, batch):
            last = min(stop, first + batch)
            for i in range(first, last):
                if i < start + 50 or i % 997 == 0:
                    template.check(i)
            conn.send_packed_command([b"".join(template.command(i) for i in range(first, last))])
            for i in range(first, last):
                reply = conn.read_response()
                if reply != COMMITTED:
                    raise RuntimeError(f"fill: user {i} not created ({reply!r})")
            done += last - first
    finally:
        conn.disconnect()
        store.close()
    return done


def fill_redis_pipelined(store: Any, effects: Iterable[Any], batch: int = 1000) -> int:
    """The general (slower) fill: any plan, its steps pipelined through redis-py, `batch` plans at a time."""
    from backends.redis import SCRIPTS, Batch, Call, Script
    from identity_proto.effects import Conflict

    client = store.client
    shas = {name: client.script_load(source) for name, source in SCRIPTS.items()}
    done = 0
    for chunk in _chunks(effects, batch):
        plans = [store.performs[type(effect)](store.keys, effect) for effect in chunk]
        replies: list[Any] = [None] * len(plans)
        active = list(range(len(plans)))
        while active:
            ops = []
            for i in active:
                try:
                    ops.append((i, plans[i].send(replies[i])))
                except StopIteration as stop:
                    if isinstance(stop.value, Conflict):
                        raise RuntimeError(f"fill: {chunk[i]!r} answered {stop.value!r}") from None
                    done += 1
            if not ops:
                break
            with client.pipeline(transaction=False) as pipe:
                for _, op in ops:
                    if isinstance(op, Call):
                        pipe.execute_command(op.command, *op.args)
                    elif isinstance(op, Script):
                        pipe.evalsha(shas[op.name], len(op.keys), *op.keys, *op.args)
                    elif isinstance(op, Batch):
                        for call in op.calls:
                            pipe.execute_command(call.command, *call.args)
                    else:
                        raise TypeError(op)
                out = pipe.execute()
            position = 0
            for i, op in ops:
                if isinstance(op, Batch):
                    replies[i] = out[position : position + len(op.calls)]
                    position += len(op.calls)
                else:
                    replies[i] = out[position]
                    position += 1
            active = [i for i, _ in ops]
    return done


def fill_redis(url: str, users: int, seed: int, processes: int) -> int:
    """Fill Redis with `users` users: the fast fill split across `processes` processes (each generating and
    encoding its own range), or the general pipelined fill where the fast one does not apply."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    processes = max(1, min(processes, users // 10_000 or 1))
    bounds = [users * k // processes for k in range(processes + 1)]
    try:
        if processes == 1:
            return fill_redis_range(url, 0, users, seed)
        with ProcessPoolExecutor(processes, mp_context=get_context("fork")) as pool:
            futures = [pool.submit(fill_redis_range, url, a, b, seed) for a, b in itertools.pairwise(bounds)]
            return sum(f.result() for f in futures)
    except TemplateMismatch:
        from backends.redis import RedisStore

        store = RedisStore.from_url(url, socket_timeout=60.0)
        try:
            store.client.flushdb()
            return fill_redis_pipelined(store, _create_users(0, users, seed))
        finally:
            store.close()


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def task_growth_worker(args: argparse.Namespace) -> None:
    """Fill a store with `--users` users, report, then answer `measure <op> <seconds>` lines until `quit`."""
    import resource
    import tracemalloc

    def children_cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    seed = args.users
    info: dict[str, Any] = {"store": args.store, "users": args.users}
    started, cpu_started, children_started = time.perf_counter(), time.process_time(), children_cpu()
    if args.store == "memory":
        from backends.memory import MemoryStore

        store: Any = MemoryStore()
        driver = Driver(store)
        effects = _create_users(0, args.users, seed)
        traced = min(args.users, args.traced_users)
        gc.collect()
        # The first users under tracemalloc (what Python allocates per user), the rest without (RSS delta: what
        # the process really pays, allocator overhead included; tracemalloc's own tables would inflate it).
        tracemalloc.start()
        before, _ = tracemalloc.get_traced_memory()
        for _ in range(traced):
            store.apply(next(effects))
        gc.collect()
        after, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        gc.collect()
        rss_before = _rss_bytes()
        for effect in effects:
            store.apply(effect)
        gc.collect()
        rest = args.users - traced
        info["tracemalloc_bytes_per_user"] = (after - before) / traced if traced else None
        info["tracemalloc_users"] = traced
        info["rss_bytes_per_user"] = (_rss_bytes() - rss_before) / rest if rest >= 50_000 else None
        info["rss_users"] = rest
        stored = len(store.tenant(PROJECT_ID).users)
    else:
        from backends.redis import RedisStore

        store = RedisStore.from_url(args.redis_url, socket_timeout=60.0)
        store.client.flushdb()
        driver = Driver(store)

        def redis_cpu() -> float:
            cpu = store.client.info("cpu")
            return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])

        used_before, redis_cpu_before = int(store.client.info("memory")["used_memory"]), redis_cpu()
        stored = fill_redis(args.redis_url, args.users, seed, args.fill_processes)
        used_after = int(store.client.info("memory")["used_memory"])
        info["redis_bytes_per_user"] = (used_after - used_before) / args.users
        info["fill_redis_cpu_seconds"] = redis_cpu() - redis_cpu_before
        info["fill_processes"] = args.fill_processes
    info["fill_seconds"] = time.perf_counter() - started
    info["fill_cpu_seconds"] = (
        time.process_time() - cpu_started + children_cpu() - children_started + info.get("fill_redis_cpu_seconds", 0.0)
    )
    if stored != args.users:
        raise RuntimeError(f"filled {stored} users, wanted {args.users}")
    # Sessions for a sample of users spread over the whole store (the same sample size at every size).
    sample = random.Random(seed).sample(range(args.users), min(args.sample, args.users))
    tokens = [driver.session(bench_user(i, seed).id)["access_token"] for i in sample]
    requests = {
        "get_me": [driver.request("GET", "/api/v1/users/me", client_headers(t)) for t in tokens],
        "patch_me": [driver.request("PATCH", "/api/v1/users/me", client_headers(t), CLIENT_PATCH_BODY) for t in tokens],
    }
    for prepared in requests.values():  # warm: every token's signature verified once
        for request in prepared:
            driver.handle(request)
    if args.pin_cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.pin_cpu})
    print(orjson.dumps({"ready": True, **info}).decode(), flush=True)
    positions = dict.fromkeys(requests, 0)
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "quit":
            break
        op, seconds = words[1], float(words[2])
        prepared = requests[op]

        def once(op: str = op, prepared: list[Any] = prepared) -> None:
            i = positions[op]
            positions[op] = (i + 1) % len(prepared)
            response = driver.handle(prepared[i])
            if response.status != 200:
                raise RuntimeError(f"{op}: {response.status} {response.body[:300]!r}")

        print(orjson.dumps({"op": op, **measure(once, seconds, batch=5, warmup=0)}).decode(), flush=True)
    store.close()


# --------------------------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="task", required=True)
    rates = sub.add_parser("rates")
    rates.add_argument("--duration", type=float, default=1.0)
    sub.add_parser("startup").add_argument("--runs", type=int, default=5)
    sub.add_parser("plugin-overhead").add_argument("--runs", type=int, default=7)
    sub.add_parser("observability").add_argument("--duration", type=float, default=4.0)
    trips = sub.add_parser("roundtrips")
    trips.add_argument("--redis-url", required=True)
    worker = sub.add_parser("growth-worker")
    worker.add_argument("--store", choices=("memory", "redis"), required=True)
    worker.add_argument("--users", type=int, required=True)
    worker.add_argument("--redis-url", default="")
    worker.add_argument("--sample", type=int, default=1000)
    worker.add_argument("--traced-users", type=int, default=20_000)
    worker.add_argument("--pin-cpu", type=int, default=None)
    worker.add_argument("--fill-processes", type=int, default=2)
    args = parser.parse_args()
    if args.task == "rates":
        print(orjson.dumps(task_rates(args)).decode())
    elif args.task == "roundtrips":
        print(orjson.dumps(task_roundtrips(args)).decode())
    elif args.task == "startup":
        print(orjson.dumps(task_startup(args)).decode())
    elif args.task == "plugin-overhead":
        print(orjson.dumps(task_plugin_overhead(args)).decode())
    elif args.task == "observability":
        print(orjson.dumps(task_observability(args), option=orjson.OPT_INDENT_2).decode())
    else:
        task_growth_worker(args)


if __name__ == "__main__":
    main()
