"""Downstream (`--only downstream`, not in the default run): the time ONE typical test of another project's suite
takes, written the way its author would write it against each fake, median per test.

    .venv/bin/python -m benchmarks.downstream                  # ~1-3 min (npm installs firebase-tools once)
    .venv/bin/python -m benchmarks.downstream --repeat 3 --downstream-tests 30

The test: a clean project (or a clean emulator), a user signed up by a one-time code (send it, read it from the
fake's outbox, sign in with it), the user's display name changed, the user read back and checked, the project
torn down. Each contender does it its own documented way:

- `fake (pytest plugin)`: our in-process fake through the plugin's fixtures (`identity_project`, a fresh project
  deleted after the test, and `identity_client`, an in-process httpx client): a generated test file of
  `--downstream-tests` K such tests, run by `pytest -p identity` in a fresh interpreter (other plugins off). Each
  test's time is pytest's own (set-up + call + tear-down, from its reports); the first test's set-up also makes
  the session's fake (imports the service), which the median leaves out and the "amortised" row puts back: (wall
  time of the run - wall time of the same file with K empty tests) / K;
- `fake (same fixtures, called directly)`: the same fixture code and steps in this process without pytest (one
  `IdentityFake` for the run, `create_project()` / `client()` / `delete()` per test): where the time goes;
- `lower bound`: the same requests handed straight to that fake's core (`Service.handle`), the code read from its
  store: no HTTP client, no WSGI. Not a way to write tests: what a lighter fixture client could reach;
- `standalone fake (HTTP)`: `python -m identity_testing.server --port 0` (Hypercorn, dev mode, memory store),
  started once; per test the same steps over a keep-alive `httpx.Client` (the code's 6 characters from
  `GET /emails/outbox`, followed by the nonce the send returned), tear-down `POST /testing/projects/{id}/reset`;
- `Firebase Auth emulator`: firebase-tools (benchmarks.peers installs and starts it), started once; Firebase has
  no e-mail one-time code, so the nearest: e-mail link sign-in (`accounts:sendOobCode` EMAIL_SIGNIN, the code
  read from `/emulator/v1/projects/{project}/oobCodes`, `accounts:signInWithEmailLink`), then `accounts:update`
  (displayName) and `accounts:lookup`; tear-down `DELETE /emulator/v1/projects/{project}/accounts`, as its docs
  advise. Same keep-alive httpx client;
- `moto (cognito-idp)`: in process, per test `with mock_aws():` (start to finish: moto's tear-down is leaving it)
  a user pool and an app client, then Cognito has no e-mail code sign-in without Lambda triggers (which moto does
  not run), so the nearest: `sign_up` + `admin_confirm_sign_up` (in place of the mailed code),
  `initiate_auth` USER_PASSWORD_AUTH, `admin_update_user_attributes` (name), `admin_get_user`. The boto3 client
  is made once per repeat, outside the tests (moto at its cheapest; a client per test adds ~10-30 ms).

Alternation: each repeat runs the pytest file (K tests), then K rounds of one test of every other contender in
turn (the order rotated each round), so load from elsewhere on the machine hits all alike. Targets: the fake
through the plugin >= 10x faster per test than the Firebase emulator, and faster than moto (ratio > 1).

When firebase-tools cannot be installed or started, or moto is not installed (`pip install -e .[bench]`), that
contender says why and its target reads "not measured".
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from benchmarks.common import PYTHON, ROOT, child_env

if TYPE_CHECKING:
    from benchmarks.run import Options, Recorder
    from identity_testing.fake import IdentityFake, TestProject

SECTION = "Downstream: one typical test (sign up by code, update, read back, tear down), ms per test"
CALLBACK_URL = "http://localhost:3000/handler"
DISPLAY_NAME = "Ada Lovelace (downstream)"
PASSWORD = "Downstream-password-1"  # noqa: S105 - a fixed test value; moto's sign-up (Cognito's default policy: upper, lower, digit, symbol)
READY_TIMEOUT_S = 30.0
#: where a moto client's requests would go if moto did not take them: a closed loopback port, never AWS
UNREACHABLE = "http://127.0.0.1:9"
STOP_TIMEOUT_S = 10.0

#: contender key -> its row's label, in the table's order
CONTENDERS = {
    "plugin_direct": "fake (pytest plugin, `identity_direct`: the fastest client, `pytest -p identity`)",
    "plugin": "fake (pytest plugin, `identity_client`: an httpx client, `pytest -p identity`)",
    "direct": "fake (the same fixtures' code, called directly)",
    "core": "lower bound: the same requests into the fake's core, no HTTP client",
    "server": "standalone fake over HTTP (`python -m identity_testing.server`)",
    "firebase": "Firebase Auth emulator over REST (e-mail link in place of a code)",
    "moto": "moto cognito-idp in process (password in place of a code)",
}


class StepFailed(AssertionError):
    """A step of the test did not answer what the test expects."""


def _json(response: Any, what: str, status: int = 200) -> Any:
    # an httpx.Response, or the fake's DirectResponse (the same surface)
    if response.status_code != status:
        raise StepFailed(f"{what}: expected {status}, got {response.status_code}: {response.text[:500]}")
    return response.json()


def email_of(index: int) -> str:
    return f"downstream-{index}@example.com"


# --------------------------------------------------------------------------------------------------------------
# The test, as each contender's author writes it. Each returns the user as read back at the end.


def fake_steps(project: TestProject, client: Any, email: str) -> dict[str, Any]:
    """Our fake, in process: `client` is the `identity_direct` or the `identity_client` fixture (client access,
    the project's headers)."""
    _json(
        client.post("/api/v1/auth/otp/send-sign-in-code", json={"email": email, "callback_url": CALLBACK_URL}),
        "send the sign-in code",
    )
    tokens = _json(client.post("/api/v1/auth/otp/sign-in", json={"code": project.last_code(email)}), "sign in")
    signed_in = {"x-service-access-token": tokens["access_token"]}
    _json(client.patch("/api/v1/users/me", json={"display_name": DISPLAY_NAME}, headers=signed_in), "update")
    user: dict[str, Any] = _json(client.get("/api/v1/users/me", headers=signed_in), "read back")
    if user.get("display_name") != DISPLAY_NAME or user.get("primary_email") != email:
        raise StepFailed(f"read back: {user!r}")
    return user


def direct_test(fake: IdentityFake, email: str) -> dict[str, Any]:
    """One test through the fixtures' own code, without pytest: `identity_project` (a fresh project, deleted
    after), `identity_client` (`project.client("client")`)."""
    project = fake.create_project()
    try:
        with project.client("client") as client:
            return fake_steps(project, client, email)
    finally:
        project.delete()


def core_test(fake: IdentityFake, email: str) -> dict[str, Any]:
    """A lower bound, not a way to write tests: the same project, requests and outbox read as `direct_test`, each
    request handed straight to the fake's core (`Service.handle` under the sync driver, the fake's clock and store)
    and the code read from the store, with no HTTP client and no WSGI: what a lighter fixture client than
    `httpx.Client` could reach."""
    import orjson

    from identity_proto import Request, run
    from identity_proto.effects import ListOutbox, perform
    from identity_testing.fake import CODE_KINDS

    project = fake.create_project()

    def call(method: str, path: str, body: Any = None, token: str | None = None) -> Any:
        headers = project.headers("client", access_token=token)
        raw = b"" if body is None else orjson.dumps(body)
        if raw:
            headers["content-type"] = "application/json"
        request = Request(method, path, tuple(headers.items()), raw, "", "127.0.0.1")
        response = run(fake.service.handle(request, fake.clock.now_ms(), fake.entropy), fake.store)
        if response.status != 200:
            raise StepFailed(f"{method} {path}: {response.status} {response.body[:500]!r}")
        return orjson.loads(response.body)

    try:
        call("POST", "/api/v1/auth/otp/send-sign-in-code", {"email": email, "callback_url": CALLBACK_URL})
        (mail,) = run(perform(ListOutbox(project.id, email, 1)), fake.store)
        code = CODE_KINDS["sign_in"]({"code": mail.code, "magic_link": mail.magic_link})
        tokens = call("POST", "/api/v1/auth/otp/sign-in", {"code": code})
        call("PATCH", "/api/v1/users/me", {"display_name": DISPLAY_NAME}, tokens["access_token"])
        user: dict[str, Any] = call("GET", "/api/v1/users/me", token=tokens["access_token"])
    finally:
        project.delete()
    if user.get("display_name") != DISPLAY_NAME or user.get("primary_email") != email:
        raise StepFailed(f"read back: {user!r}")
    return user


@dataclass(frozen=True)
class ServerInfo:
    """What `python -m identity_testing.server` prints once it answers."""

    base_url: str
    project_id: str
    publishable_client_key: str
    secret_server_key: str
    internal_admin_key: str

    def client_headers(self, access_token: str | None = None) -> dict[str, str]:
        headers = {
            "x-service-access-type": "client",
            "x-service-project-id": self.project_id,
            "x-service-publishable-client-key": self.publishable_client_key,
        }
        if access_token is not None:
            headers["x-service-access-token"] = access_token
        return headers

    def server_headers(self) -> dict[str, str]:
        return {
            "x-service-access-type": "server",
            "x-service-project-id": self.project_id,
            "x-service-secret-server-key": self.secret_server_key,
        }

    def internal_headers(self) -> dict[str, str]:
        return {
            "x-service-access-type": "admin",
            "x-service-project-id": "internal",
            "x-service-super-secret-admin-key": self.internal_admin_key,
        }


def server_steps(http: httpx.Client, info: ServerInfo, email: str) -> dict[str, Any]:
    """Our standalone fake over HTTP: the code is the 6 characters of the outbox mail, then the send's nonce."""
    sent = _json(
        http.post(
            "/api/v1/auth/otp/send-sign-in-code",
            headers=info.client_headers(),
            json={"email": email, "callback_url": CALLBACK_URL},
        ),
        "send the sign-in code",
    )
    outbox = _json(http.get("/api/v1/emails/outbox", params={"to": email}, headers=info.server_headers()), "outbox")
    code = next((mail["code"] for mail in outbox["items"] if mail.get("code")), None)
    if code is None:
        raise StepFailed(f"no code was mailed to {email}: {outbox!r}")
    tokens = _json(
        http.post("/api/v1/auth/otp/sign-in", headers=info.client_headers(), json={"code": code + sent["nonce"]}),
        "sign in",
    )
    signed_in = info.client_headers(tokens["access_token"])
    _json(http.patch("/api/v1/users/me", headers=signed_in, json={"display_name": DISPLAY_NAME}), "update")
    user: dict[str, Any] = _json(http.get("/api/v1/users/me", headers=signed_in), "read back")
    if user.get("display_name") != DISPLAY_NAME or user.get("primary_email") != email:
        raise StepFailed(f"read back: {user!r}")
    return user


def server_teardown(http: httpx.Client, info: ServerInfo) -> None:
    _json(http.post(f"/api/v1/testing/projects/{info.project_id}/reset", headers=info.internal_headers()), "reset")


def server_test(http: httpx.Client, info: ServerInfo, email: str) -> dict[str, Any]:
    try:
        return server_steps(http, info, email)
    finally:
        server_teardown(http, info)


def firebase_steps(http: httpx.Client, email: str, project: str, api_key: str) -> dict[str, Any]:
    """The Firebase Auth emulator over its REST API: e-mail link sign-in, its code read from the emulator."""
    toolkit = f"/identitytoolkit.googleapis.com/v1/accounts:{{}}?key={api_key}"
    _json(
        http.post(
            toolkit.format("sendOobCode"),
            json={"requestType": "EMAIL_SIGNIN", "email": email, "continueUrl": CALLBACK_URL},
        ),
        "accounts:sendOobCode",
    )
    codes = _json(http.get(f"/emulator/v1/projects/{project}/oobCodes"), "oobCodes")["oobCodes"]
    code = next(
        (c["oobCode"] for c in reversed(codes) if c.get("email") == email and c.get("requestType") == "EMAIL_SIGNIN"),
        None,
    )
    if code is None:
        raise StepFailed(f"no sign-in link for {email}: {codes!r}")
    account = _json(
        http.post(toolkit.format("signInWithEmailLink"), json={"email": email, "oobCode": code}),
        "accounts:signInWithEmailLink",
    )
    _json(
        http.post(toolkit.format("update"), json={"idToken": account["idToken"], "displayName": DISPLAY_NAME}),
        "accounts:update",
    )
    users = _json(http.post(toolkit.format("lookup"), json={"idToken": account["idToken"]}), "accounts:lookup")
    user: dict[str, Any] = users["users"][0]
    if user.get("displayName") != DISPLAY_NAME or user.get("email") != email:
        raise StepFailed(f"read back: {user!r}")
    return user


def firebase_teardown(http: httpx.Client, project: str) -> None:
    _json(http.delete(f"/emulator/v1/projects/{project}/accounts"), "clear accounts")


def firebase_test(http: httpx.Client, email: str, project: str, api_key: str) -> dict[str, Any]:
    try:
        return firebase_steps(http, email, project, api_key)
    finally:
        firebase_teardown(http, project)


def moto_client() -> Any:
    """A boto3 cognito-idp client with fixed fake credentials (never the user's), made once: moto intercepts its
    requests while a `mock_aws()` is active. moto is imported first (its interception is registered with botocore
    at import, for the clients made after it), and the client's proxy is a closed loopback port: a request moto
    did not take fails there instead of leaving the machine."""
    import boto3
    import moto  # noqa: F401 - registers moto's hook before the client is made
    from botocore.config import Config

    session = boto3.session.Session(
        aws_access_key_id="testing",
        aws_secret_access_key="testing",  # noqa: S106 - moto's documented fake credentials
        region_name="us-east-1",
    )
    return session.client("cognito-idp", config=Config(proxies={"http": UNREACHABLE, "https": UNREACHABLE}))


def moto_test(cognito: Any, email: str) -> dict[str, Any]:
    """moto, the way its docs show it: everything inside `with mock_aws():`, whose end drops every resource."""
    from moto import mock_aws

    with mock_aws():
        pool = cognito.create_user_pool(
            PoolName="downstream", UsernameAttributes=["email"], AutoVerifiedAttributes=["email"]
        )["UserPool"]["Id"]
        app = cognito.create_user_pool_client(
            UserPoolId=pool,
            ClientName="app",
            ExplicitAuthFlows=["ALLOW_USER_PASSWORD_AUTH", "ALLOW_REFRESH_TOKEN_AUTH"],
        )["UserPoolClient"]["ClientId"]
        cognito.sign_up(
            ClientId=app, Username=email, Password=PASSWORD, UserAttributes=[{"Name": "email", "Value": email}]
        )
        cognito.admin_confirm_sign_up(UserPoolId=pool, Username=email)
        auth = cognito.initiate_auth(
            ClientId=app, AuthFlow="USER_PASSWORD_AUTH", AuthParameters={"USERNAME": email, "PASSWORD": PASSWORD}
        )
        if not auth.get("AuthenticationResult", {}).get("AccessToken"):
            raise StepFailed(f"initiate_auth: {auth!r}")
        cognito.admin_update_user_attributes(
            UserPoolId=pool, Username=email, UserAttributes=[{"Name": "name", "Value": DISPLAY_NAME}]
        )
        got = cognito.admin_get_user(UserPoolId=pool, Username=email)
    attributes = {a["Name"]: a["Value"] for a in got["UserAttributes"]}
    if attributes.get("name") != DISPLAY_NAME or attributes.get("email") != email:
        raise StepFailed(f"read back: {attributes!r}")
    return attributes


# --------------------------------------------------------------------------------------------------------------
# The pytest contender: a generated test file run by a fresh interpreter

CONFTEST = '''"""Measurement only: each test's set-up + call + tear-down, as pytest's reports time them."""
import json
import os

_seconds = {}


def pytest_runtest_logreport(report):
    _seconds[report.nodeid] = _seconds.get(report.nodeid, 0.0) + report.duration


def pytest_sessionfinish(session, exitstatus):
    with open(os.environ["DOWNSTREAM_TIMES"], "w") as out:
        json.dump(list(_seconds.values()), out)
'''

PLUGIN_TEST = """
def test_sign_up_by_code_{index}(identity_project, identity_client):
    fake_steps(identity_project, identity_client, "{email}")
"""

PLUGIN_DIRECT_TEST = """
def test_sign_up_by_code_{index}(identity_project, identity_direct):
    fake_steps(identity_project, identity_direct, "{email}")
"""

EMPTY_TEST = """
def test_nothing_{index}():
    pass
"""


def write_test_files(directory: Path, tests: int) -> tuple[Path, Path, Path]:
    """The generated suites (K tests using the plugin's fixtures: with `identity_direct`, with `identity_client`)
    and their empty twin (K tests doing nothing)."""
    (directory / "pytest.ini").write_text("[pytest]\n")
    (directory / "conftest.py").write_text(CONFTEST)
    files = []
    for name, template in (("test_downstream_direct.py", PLUGIN_DIRECT_TEST), ("test_downstream.py", PLUGIN_TEST)):
        generated = directory / name
        generated.write_text(
            "from benchmarks.downstream import fake_steps\n"
            + "".join(template.format(index=i, email=email_of(i)) for i in range(tests))
        )
        files.append(generated)
    empty = directory / "test_empty.py"
    empty.write_text("".join(EMPTY_TEST.format(index=i) for i in range(tests)))
    return files[0], files[1], empty


@dataclass(frozen=True)
class PytestRun:
    wall_s: float
    per_test_s: list[float]


def run_pytest(test_file: Path, placement_prefix: Callable[[list[str]], list[str]] = lambda c: c) -> PytestRun:
    """`pytest -p identity` on `test_file` in a fresh interpreter (other plugins off: their cost is the same with
    any fake); its wall time and each test's seconds."""
    times = test_file.parent / f"{test_file.stem}.times.json"
    env = child_env({"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "DOWNSTREAM_TIMES": str(times)})
    command = [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "identity", test_file.name]
    started = time.perf_counter()
    out = subprocess.run(
        placement_prefix(command), cwd=test_file.parent, env=env, capture_output=True, text=True, timeout=600
    )
    wall = time.perf_counter() - started
    if out.returncode:
        raise StepFailed(f"pytest {test_file.name} failed ({out.returncode}): {(out.stdout + out.stderr)[-1500:]}")
    per_test: list[float] = json.loads(times.read_text())
    return PytestRun(wall, per_test)


# --------------------------------------------------------------------------------------------------------------
# The standalone fake server


@dataclass
class StandaloneFake:
    """`python -m identity_testing.server` we started, in a process group of its own."""

    info: ServerInfo
    process: subprocess.Popen[str] = field(repr=False)

    def stop(self) -> None:
        """SIGTERM to the group (the server shuts down), SIGKILL if it lingers; sent while the leader is unreaped."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=STOP_TIMEOUT_S)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


def start_standalone(placement_prefix: Callable[[list[str]], list[str]] = lambda c: c) -> StandaloneFake:
    """The standalone fake on a free loopback port; returns once it printed its JSON line (it answers then)."""
    process = subprocess.Popen(
        placement_prefix([PYTHON, "-m", "identity_testing.server", "--host", "127.0.0.1", "--port", "0"]),
        cwd=ROOT,
        env=child_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert process.stdout is not None
        import selectors

        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            if not selector.select(READY_TIMEOUT_S):
                raise RuntimeError(f"the standalone fake printed nothing within {READY_TIMEOUT_S:.0f} s")
        line = process.stdout.readline()
        if not line:
            err = process.stderr.read() if process.stderr is not None else ""
            raise RuntimeError(f"the standalone fake exited ({process.poll()}): {err[-1500:]}")
        data = json.loads(line)
        info = ServerInfo(
            base_url=data["base_url"],
            project_id=data["project_id"],
            publishable_client_key=data["publishable_client_key"],
            secret_server_key=data["secret_server_key"],
            internal_admin_key=data["internal_admin_key"],
        )
        if process.stderr is not None:
            process.stderr.close()  # Hypercorn's access log is off; nothing to drain
            process.stderr = None
        return StandaloneFake(info, process)
    except BaseException:
        StandaloneFake(ServerInfo("", "", "", "", ""), process).stop()
        raise


def loopback_client(base_url: str) -> httpx.Client:
    """A keep-alive httpx client for one of the HTTP contenders (no proxy from the environment)."""
    return httpx.Client(base_url=base_url, trust_env=False, timeout=30.0)


# --------------------------------------------------------------------------------------------------------------
# Measuring


def timed(test: Callable[[int], Any], index: int) -> float:
    started = time.perf_counter()
    test(index)
    return time.perf_counter() - started


def _rotated(items: list[str], by: int) -> list[str]:
    by %= len(items) or 1
    return items[by:] + items[:by]


def run_downstream(opts: Options, rec: Recorder, say: Callable[[str], None]) -> dict[str, Any]:
    """The downstream section: ms per test into `rec` under `downstream.<contender>.ms` (every test), plus the
    pytest runs' wall times; returns what the report needs (why a contender was not measured)."""
    from benchmarks import peers

    info: dict[str, Any] = {"tests": opts.downstream_tests, "repeat": opts.repeat, "errors": {}}
    errors: dict[str, str] = info["errors"]
    tests = opts.downstream_tests
    runners: dict[str, Callable[[int], Any]] = {}
    with contextlib.ExitStack() as stack:
        # Our fake, in this process (the fixtures' code without pytest).
        from identity_testing.fake import IdentityFake

        fake = IdentityFake()
        runners["direct"] = lambda i: direct_test(fake, email_of(i))
        runners["core"] = lambda i: core_test(fake, email_of(i))

        say("downstream: starting the standalone fake")
        try:
            server = start_standalone(opts.placement.server)
            stack.callback(server.stop)
            server_http = stack.enter_context(loopback_client(server.info.base_url))
            runners["server"] = lambda i: server_test(server_http, server.info, email_of(i))
        except (RuntimeError, OSError, ValueError) as exc:
            errors["server"] = str(exc)

        try:
            script = peers.install(say)
            info["emulator"] = f"firebase-tools {peers.installed_version(script)}"
            say("downstream: starting the Firebase Auth emulator")
            emulator = peers.start_emulator(script, opts.placement, opts.logdir)
            stack.callback(emulator.stop)
            firebase_http = stack.enter_context(loopback_client(f"http://127.0.0.1:{emulator.port}"))
            runners["firebase"] = lambda i: firebase_test(firebase_http, email_of(i), peers.PROJECT_ID, peers.API_KEY)
        except (peers.PeerUnavailable, RuntimeError, OSError, subprocess.SubprocessError) as exc:
            errors["firebase"] = str(exc)

        try:
            cognito = moto_client()
            runners["moto"] = lambda i: moto_test(cognito, email_of(i))
        except ImportError as exc:
            errors["moto"] = f"moto is not installed (pip install -e '.[bench]'): {exc}"

        # One uncounted test of each: imports, JIT and connections warm.
        for name, runner in list(runners.items()):
            try:
                runner(0)
            except (StepFailed, httpx.HTTPError, RuntimeError, OSError) as exc:
                errors[name] = f"the warm-up test failed: {exc}"
                del runners[name]

        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-downstream-")))
        direct_file, plugin_file, empty_file = write_test_files(scratch, tests)
        order = list(runners)
        for repeat in range(opts.repeat):
            say(f"downstream: repeat {repeat + 1}/{opts.repeat}: pytest, {tests} tests and {tests} empty ones")
            try:
                empty = run_pytest(empty_file, opts.placement.server)
                direct_run = run_pytest(direct_file, opts.placement.server)
                run = run_pytest(plugin_file, opts.placement.server)
            except (StepFailed, subprocess.SubprocessError, OSError, ValueError) as exc:
                errors["plugin"] = errors["plugin_direct"] = str(exc)
            else:
                for seconds in direct_run.per_test_s:
                    rec.add("downstream.plugin_direct.ms", seconds * 1000)
                for seconds in run.per_test_s:
                    rec.add("downstream.plugin.ms", seconds * 1000)
                rec.add("downstream.plugin.first_ms", run.per_test_s[0] * 1000)
                rec.add("downstream.plugin.wall_s", run.wall_s)
                rec.add("downstream.empty.wall_s", empty.wall_s)
                rec.add("downstream.empty.ms", statistics.median(empty.per_test_s) * 1000)
                rec.add("downstream.plugin.amortised_ms", (run.wall_s - empty.wall_s) / tests * 1000)
            say(f"downstream: repeat {repeat + 1}/{opts.repeat}: {tests} tests of each of {', '.join(order)}")
            for i in range(tests):
                for name in _rotated(order, i + repeat):
                    if name in errors:
                        continue
                    try:
                        rec.add(f"downstream.{name}.ms", timed(runners[name], 1 + i) * 1000)
                    except (StepFailed, httpx.HTTPError, RuntimeError, OSError) as exc:
                        errors[name] = f"test {i} failed: {exc}"
    return info


# --------------------------------------------------------------------------------------------------------------
# The table


def add_to_report(report: dict[str, Any], rec: Recorder, info: dict[str, Any]) -> None:
    """The section's rows and targets, appended to `report` (run.py's build_report format). Nothing when the
    section did not run; a contender that could not be measured says why, and its target reads "not measured"."""
    if not info:
        return
    rows: list[dict[str, Any]] = report["rows"]
    targets: list[dict[str, Any]] = report["targets"]
    errors: dict[str, str] = info.get("errors", {})
    ms = {name: rec.median(f"downstream.{name}.ms") for name in CONTENDERS}
    ours = ms["plugin_direct"]  # the fastest fixture a test author can pick

    def ratio(name: str) -> float:
        return ms[name] / ours if ours > 0 else math.nan

    def target(name: str, value: float, op: str, threshold: float) -> str:
        met = None if math.isnan(value) else (value >= threshold if op == ">=" else value > threshold)
        targets.append({"target": name, "value": value, "op": op, "threshold": threshold, "met": met})
        return f"{op} {threshold:g}: " + ("met" if met else "NOT MET" if met is not None else "not measured")

    goals = {
        "firebase": target(
            "one downstream test: Firebase Auth emulator ms / our fake's (pytest plugin, identity_direct)",
            ratio("firebase"),
            ">=",
            10.0,
        ),
        "moto": target(
            "one downstream test: moto's ms / our fake's (pytest plugin, identity_direct)", ratio("moto"), ">", 1.0
        ),
    }
    tests = len(rec.runs.get("downstream.plugin.ms", []))
    for name, label in CONTENDERS.items():
        count = len(rec.runs.get(f"downstream.{name}.ms", []))
        detail = f"{count} tests"
        if name in errors:
            detail = f"not measured: {' '.join(errors[name].split())[-600:]}"
        elif name == "plugin" and tests:
            detail += (
                f"; first test (its set-up makes the session's fake) {_num(rec.median('downstream.plugin.first_ms'))}"
                f" ms; {_num(rec.median('downstream.empty.ms'))} ms per empty test"
            )
        elif name == "firebase" and "emulator" in info:
            detail += f"; {info['emulator']}"
        rows.append(
            {
                "section": SECTION,
                "figure": label,
                "rate": ms[name],
                "ratio": ratio(name),
                "p50_ms": ms[name],
                "p99_ms": _percentile(rec.runs.get(f"downstream.{name}.ms", []), 0.99),
                "cpu_ratio": None,
                "target": goals.get(name, ""),
                "detail": detail,
            }
        )
    rows.append(
        {
            "section": SECTION,
            "figure": "fake (pytest plugin), amortised: (wall of K tests - wall of K empty tests) / K",
            "rate": rec.median("downstream.plugin.amortised_ms"),
            "ratio": None,
            "p50_ms": None,
            "p99_ms": None,
            "cpu_ratio": None,
            "target": "",
            "detail": (
                f"pytest wall time {_num(rec.median('downstream.plugin.wall_s'))} s for K tests, "
                f"{_num(rec.median('downstream.empty.wall_s'))} s for K empty ones (K = {info.get('tests')}); "
                "ratio column: contender's ms / the plugin's with identity_direct"
            ),
        }
    )


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def _num(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.2f}"


def main(argv: list[str] | None = None) -> None:
    """`python -m benchmarks.downstream [run.py options]`: run.py with `--only downstream`, written to
    benchmarks/results/downstream.json unless --output says otherwise."""
    from benchmarks import run

    args = list(sys.argv[1:] if argv is None else argv)
    if not any(a == "--output" or a.startswith("--output=") for a in args):
        args += ["--output", str(ROOT / "benchmarks" / "results" / "downstream.json")]
    run.main(["--only", "downstream", *args])


if __name__ == "__main__":
    main()
