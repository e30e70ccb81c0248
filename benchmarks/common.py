"""What every part of the benchmark shares: the production-mode configuration the services run with, request
headers and bodies, CPU placement, free ports, and stopping exactly the processes we started."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable

# ---- the service's configuration: production mode, fixed benchmark values (never real secrets)

PROJECT_ID = "5b7a1c1e-be4c-4000-8000-00000000be4c"
PUBLISHABLE_CLIENT_KEY = "pck_benchmark_publishable_client_key_fixed_value"
SECRET_SERVER_KEY = "ssk_benchmark_secret_server_key_fixed_value_0000"  # noqa: S105 - fixed, not a secret
SUPER_SECRET_ADMIN_KEY = "sak_benchmark_super_secret_admin_key_fixed_value"  # noqa: S105 - fixed, not a secret
INTERNAL_ADMIN_KEY = "sak_benchmark_internal_admin_key_fixed_value_000"
CALLBACK_URL = "http://localhost:3000/handler"


def service_env(*, backend: str = "memory", redis_url: str = "", rate_limits: bool = False) -> dict[str, str]:
    """The IDENTITY_* variables of a service under test.

    Production mode (a project id and its three keys, an internal admin key), so dev-only work (the test clock
    kept in the store) is not measured; rate limits off unless asked; mail printed to standard output (the
    harness reads the sign-in codes there; a console write costs the service less than an SMTP hand-off and, like
    SMTP, it is no storage round trip)."""
    env = {
        "IDENTITY_PROJECT_ID": PROJECT_ID,
        "IDENTITY_PUBLISHABLE_CLIENT_KEY": PUBLISHABLE_CLIENT_KEY,
        "IDENTITY_SECRET_SERVER_KEY": SECRET_SERVER_KEY,
        "IDENTITY_SUPER_SECRET_ADMIN_KEY": SUPER_SECRET_ADMIN_KEY,
        "IDENTITY_INTERNAL_ADMIN_KEY": INTERNAL_ADMIN_KEY,
        "IDENTITY_RATE_LIMITS": "on" if rate_limits else "off",
        "IDENTITY_MAIL": "console",
        "IDENTITY_BACKEND": backend,
    }
    if redis_url:
        env["IDENTITY_REDIS_URL"] = redis_url
    return env


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a process we start: ours without any IDENTITY_* variable, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("IDENTITY_")}
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra or {})
    return env


def client_headers(access_token: str | None = None, **extra: str) -> dict[str, str]:
    headers = {
        "x-service-access-type": "client",
        "x-service-project-id": PROJECT_ID,
        "x-service-publishable-client-key": PUBLISHABLE_CLIENT_KEY,
    }
    if access_token:
        headers["x-service-access-token"] = access_token
    return {**headers, **extra}


def server_headers(**extra: str) -> dict[str, str]:
    return {
        "x-service-access-type": "server",
        "x-service-project-id": PROJECT_ID,
        "x-service-secret-server-key": SECRET_SERVER_KEY,
        **extra,
    }


def admin_headers(**extra: str) -> dict[str, str]:
    return {
        "x-service-access-type": "admin",
        "x-service-project-id": PROJECT_ID,
        "x-service-super-secret-admin-key": SUPER_SECRET_ADMIN_KEY,
        **extra,
    }


def _padded(base: dict[str, Any], size: int) -> bytes:
    """`base` as JSON with a `note` string in its metadata grown until the body is exactly `size` bytes."""
    body = orjson.dumps(base)
    pad = size - len(body)
    if pad < 0:
        raise ValueError("base body larger than the wanted size")
    meta_key = "server_metadata" if "server_metadata" in base else "client_metadata"
    base = {**base, meta_key: {**base[meta_key], "note": "n" * (pad - len(',"note":""'))}}
    body = orjson.dumps(base)
    assert len(body) == size, len(body)
    return body


#: PATCH /users/me: a ~300-byte client update (display name, client metadata).
CLIENT_PATCH_BODY = _padded(
    {
        "display_name": "Ada Lovelace (benchmark)",
        "client_metadata": {"theme": "dark", "locale": "en-GB", "onboarded": True, "tabs": ["home", "billing"]},
    },
    300,
)
#: PATCH /users/{id} (server): a ~300-byte server update (display name, server metadata).
SERVER_PATCH_BODY = _padded(
    {
        "display_name": "Ada Lovelace (benchmark)",
        "server_metadata": {"plan": "pro", "seats": 12, "crm_id": "cus_0123456789", "flags": ["beta", "sso"]},
    },
    300,
)

# ---- CPU placement: on a machine with two or more cores the server (or the in-process loop) gets one core, the
# load generator, Redis and this harness another, so neither steals the other's time.

SERVER_CPU = 0
CLIENT_CPU = 1


def pinning_available() -> bool:
    return (
        hasattr(os, "sched_setaffinity")
        and len(os.sched_getaffinity(0)) >= 2
        and {SERVER_CPU, CLIENT_CPU} <= os.sched_getaffinity(0)
        and shutil.which("taskset") is not None
    )


class Placement:
    """Where processes run: `server(cmd)` / `client(cmd)` prefix a command with `taskset -c N` when pinning."""

    def __init__(self, pin: bool) -> None:
        self.pin = pin and pinning_available()

    def server(self, command: list[str]) -> list[str]:
        return ["taskset", "-c", str(SERVER_CPU), *command] if self.pin else command

    def client(self, command: list[str]) -> list[str]:
        return ["taskset", "-c", str(CLIENT_CPU), *command] if self.pin else command

    def pin_self_to_client_cpu(self) -> None:
        if self.pin:
            os.sched_setaffinity(0, {CLIENT_CPU})

    def describe(self) -> str:
        if not self.pin:
            return "not pinned"
        return f"servers and in-process loops on CPU {SERVER_CPU}; load generators, Redis, harness on CPU {CLIENT_CPU}"


def free_port() -> int:
    """A loopback TCP port nothing listens on (at the moment of asking)."""
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _cmdline(pid: int) -> bytes | None:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None


def _children(pid: int) -> list[tuple[int, bytes | None]]:
    """The direct children of `pid` with their command lines (to recognise them later: a PID can be reused)."""
    try:
        pids = [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (OSError, ValueError):
        return []
    return [(child, _cmdline(child)) for child in pids]


def stop(process: subprocess.Popen[Any], timeout: float = 10.0) -> None:
    """SIGTERM (then SIGKILL if it lingers) exactly this process, by its handle, and reap it. Hypercorn forwards
    the shutdown to the worker it spawned; should the parent have to be killed, that worker (found by PID as the
    parent's child before the kill) is ended too."""
    if process.poll() is not None:
        return
    children = _children(process.pid)
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=timeout)
        for child, cmdline in children:
            if cmdline is not None and _cmdline(child) == cmdline:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child, signal.SIGKILL)


#: Our code, as an installed wheel ships it: compiled (`compile_ours`).
OUR_CODE = ("identity_proto", "backends", "identity_hosting", "identity_testing", "asgi_app.py", "benchmarks")


def compile_ours() -> None:
    """Write the bytecode of our modules, as installing a wheel does (pip compiles what it installs). Without it, an
    interpreter started with PYTHONDONTWRITEBYTECODE (these machines set it) compiles every changed module again at
    each import, and start-up figures would count the compiler."""
    import compileall

    for name in OUR_CODE:
        path = ROOT / name
        if path.is_dir():
            compileall.compile_dir(path, quiet=1)
        else:
            compileall.compile_file(path, quiet=1)
