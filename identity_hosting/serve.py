"""`identity-service` (or `python -m identity_hosting.serve`): Hypercorn serving `asgi_app:app`, kept running. The
supported way to run the service in production.

Why not `hypercorn asgi_app:app --workers N` alone: Hypercorn's master does not replace a worker that dies (SIGKILL,
the OOM killer). It stops the other workers and exits, and when the dead worker was the last one it exits with
status 0, so a supervisor told to restart on failure leaves the service down. This command runs that master as its
child, with the options given (`identity-service --bind 0.0.0.0:8000 --workers 4`: any Hypercorn option; the
application is always `asgi_app:app`), and starts it again whenever it exits without having been asked to stop:
the service answers again about a second after a worker's death. SIGTERM and SIGINT are passed on to the master,
which stops its workers gracefully; the command then exits with the master's status.

Not restarted (the command exits non-zero, for the supervisor above it to see): a master that fails within
`START_GRACE_S` of starting (a busy port: its own message says which), or one that exits more than `MAX_RESTARTS`
times within `RESTART_WINDOW_S`. "Fails" means a non-zero status: after a worker's death Hypercorn's master stops
the others and exits with the last one's status, 0 when it stopped gracefully (or when the dead one was the only
one), so a status of 0 is a worker's death however soon after the start it came, and is restarted. A bad
environment is found before Hypercorn starts: one line naming the variable, status 3, as under
`hypercorn asgi_app:app`.

Metrics (`IDENTITY_METRICS=on`): the workers keep them in prometheus_client's multiprocess files
(`identity_hosting.observability`), in the directory `PROMETHEUS_MULTIPROC_DIR` names, emptied here before the first
start (files of an earlier run would be added in) and kept across restarts (counters never go back). When it is not
set, this command makes a fresh directory and removes it at exit.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Sequence
from types import FrameType

from identity_hosting.settings import (
    CONFIGURATION_EXIT_STATUS,
    ConfigurationError,
    Settings,
    report_configuration_error,
)

__all__ = ["main"]

APP = "asgi_app:app"
#: A master that exits sooner than this after its start failed to start: restarting it would fail the same way.
START_GRACE_S = 2.0
MAX_RESTARTS = 5
RESTART_WINDOW_S = 60.0


def _say(message: str) -> None:
    print(f"identity-service: {message}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Run Hypercorn with `argv` (default: this process's arguments) until asked to stop; its exit status."""
    command = [sys.executable, "-m", "hypercorn", *(sys.argv[1:] if argv is None else argv), APP]
    try:  # the environment the application will read: refused here, in one line, before any worker starts
        settings = Settings.from_env()
    except ConfigurationError as exc:
        report_configuration_error(exc)
        return CONFIGURATION_EXIT_STATUS
    made_directory = _metrics_directory() if settings.metrics else None
    try:
        return _serve(command)
    finally:
        if made_directory is not None:
            shutil.rmtree(made_directory, ignore_errors=True)


def _metrics_directory() -> str | None:
    """Prepare the workers' shared metrics directory (see the module's docstring); the one made here, if any."""
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory:
        for name in os.listdir(directory):
            if name.endswith(".db"):
                os.remove(os.path.join(directory, name))
        return None
    made = tempfile.mkdtemp(prefix="identity-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = made  # the child, and its workers, inherit it
    return made


def _serve(command: list[str]) -> int:
    stopping: list[int] = []  # the signal we were asked to stop with
    child: subprocess.Popen[bytes] | None = None

    def stop(signum: int, _frame: FrameType | None) -> None:
        stopping.append(signum)
        if child is not None and child.poll() is None:
            child.send_signal(signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    restarts: deque[float] = deque()
    while True:
        started = time.monotonic()
        child = subprocess.Popen(command)  # noqa: S603 (our interpreter, Hypercorn, and the operator's own options)
        if stopping and child.poll() is None:  # asked to stop while it was being started
            child.send_signal(stopping[0])
        status = child.wait()
        if stopping:
            return status if status >= 0 else 128 - status
        if status != 0 and time.monotonic() - started < START_GRACE_S:
            _say(f"hypercorn exited while starting (status {status}); not restarting it")
            return status if status > 0 else 1
        now = time.monotonic()
        restarts.append(now)
        while restarts and restarts[0] < now - RESTART_WINDOW_S:
            restarts.popleft()
        if len(restarts) > MAX_RESTARTS:
            _say(f"hypercorn exited {len(restarts)} times within {RESTART_WINDOW_S:.0f} s; giving up")
            return status if status > 0 else 1
        _say(f"hypercorn exited (status {status}) without being asked to stop, a worker died: starting it again")


if __name__ == "__main__":
    sys.exit(main())
