"""No secret ever reaches a log line.

The flows that handle secrets run with the service's loggers at DEBUG: sign-in by code (the code typed, the magic
link's code, a wrong code, check-code), two-factor sign-in (TOTP secret, attempt code, a wrong TOTP), password
sign-up and sign-in (right and wrong passwords), refreshes (header and OAuth form, and a wrong refresh token),
sessions made by the server, password changes, password resets (the code, check-code, a wrong code) and the
password update and set routes, requests with wrong keys, projects created with fresh keys, mail kept in the
outbox, API keys (created, checked, a wrong one checked, revoked), sign-out.

- in process (an `IdentityFake`, both hosts), with the `identity_proto` and `identity_service` loggers captured by
  `caplog` at DEBUG: none of the values above, nor the keys of the project used, is in any record;
- a real Hypercorn in production mode (IDENTITY_PROJECT_ID, the three keys and IDENTITY_INTERNAL_ADMIN_KEY set to
  values of our own) at IDENTITY_LOG_LEVEL=DEBUG, with the JSON access log on (IDENTITY_ACCESS_LOG=json): its whole
  stderr holds none of those values, nor any secret the flows handled, and one access-log line per request, with
  that request's id. (The dev keys are printed at a dev start on purpose; production keys must never be.)

A 500 is not triggered here (no request reaches one).
"""

from __future__ import annotations

import base64
import json
import logging
import re
import secrets
import shutil
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pyotp
import pytest
import redis

from identity_testing import IdentityFake
from tests.e2e.conftest import start_hypercorn
from tests.hardening._results import write_results
from tests.processes import free_port, stop

CALLBACK = "http://localhost:3000/handler/magic-link-callback"
_OTP = re.compile(r"Your code is ([0-9A-Z]{6})$")
_LINK_CODE = re.compile(r"[?&]code=([0-9a-z]{45})")


@dataclass
class Keys:
    project_id: str
    client: str
    server: str
    admin: str
    internal: str | None = None

    def headers(self, access: str, **extra: str) -> dict[str, str]:
        name, value = {
            "client": ("x-service-publishable-client-key", self.client),
            "server": ("x-service-secret-server-key", self.server),
            "admin": ("x-service-super-secret-admin-key", self.admin),
        }[access]
        return {"x-service-access-type": access, "x-service-project-id": self.project_id, name: value, **extra}


@dataclass
class Secrets:
    """Every secret value a flow handled, by what it is."""

    values: dict[str, str] = field(default_factory=dict)

    def add(self, what: str, value: str | None) -> None:
        assert value, f"the flow did not produce {what}"
        self.values[what] = value

    def found_in(self, text: str) -> list[str]:
        return [f"{what} ({value[:12]}...)" for what, value in self.values.items() if value in text]


def _expect(response: httpx.Response, status: int) -> Any:
    assert response.status_code == status, f"{response.request.method} {response.request.url}: {response.text}"
    return response.json() if response.content and "json" in response.headers.get("content-type", "") else None


def _code_from_outbox(http: httpx.Client, keys: Keys, email: str, nonce: str, found: Secrets) -> tuple[str, str]:
    """The code as typed (OTP + nonce) and the magic link's code, read from the mail."""
    items = _expect(http.get("/api/v1/emails/outbox", headers=keys.headers("server"), params={"to": email}), 200)
    for mail in items["items"]:
        otp, link = _OTP.search(mail["subject"]), _LINK_CODE.search(mail["text"])
        if otp and link and link.group(1)[6:] == nonce:
            found.add(f"otp for {email} ({nonce[:4]})", otp.group(1))
            found.add(f"magic link code ({nonce[:4]})", link.group(1))
            found.add(f"typed code ({nonce[:4]})", otp.group(1) + nonce)
            return otp.group(1) + nonce, link.group(1)
    raise AssertionError(f"no mail for {email} with nonce {nonce}")


def _send_code(http: httpx.Client, keys: Keys, email: str, found: Secrets) -> tuple[str, str]:
    sent = _expect(
        http.post(
            "/api/v1/auth/otp/send-sign-in-code",
            headers=keys.headers("client"),
            json={"email": email, "callback_url": CALLBACK},
        ),
        200,
    )
    found.add(f"nonce ({sent['nonce'][:4]})", sent["nonce"])
    return _code_from_outbox(http, keys, email, sent["nonce"], found)


def exercise(http: httpx.Client, keys: Keys, *, now: Any = time.time) -> Secrets:
    """Run every flow that handles a secret; return the secrets seen."""
    found = Secrets()
    found.add("publishable client key", keys.client)
    found.add("secret server key", keys.server)
    found.add("super secret admin key", keys.admin)
    if keys.internal:
        found.add("internal admin key", keys.internal)
    client, server = keys.headers("client"), keys.headers("server")
    suffix = uuid.uuid4().hex[:8]

    # Sign-in by code: a wrong code, check-code, the right code; then a magic link.
    email = f"code-{suffix}@example.com"
    typed, link_code = _send_code(http, keys, email, found)
    wrong = ("ZZZZZZ" if not typed.startswith("ZZZZZZ") else "YYYYYY") + typed[6:]
    found.add("wrong code", wrong)
    _expect(http.post("/api/v1/auth/otp/sign-in", headers=client, json={"code": wrong}), 404)
    _expect(http.post("/api/v1/auth/otp/sign-in/check-code", headers=client, json={"code": link_code}), 200)
    tokens = _expect(http.post("/api/v1/auth/otp/sign-in", headers=client, json={"code": typed}), 200)
    found.add("refresh token (code)", tokens["refresh_token"])
    found.add("access token (code)", tokens["access_token"])
    _, link_code = _send_code(http, keys, email, found)
    by_link = _expect(http.post("/api/v1/auth/otp/sign-in", headers=client, json={"code": link_code}), 200)
    found.add("refresh token (link)", by_link["refresh_token"])

    # Refresh: by header, by the OAuth form, and with a wrong token.
    refreshed = _expect(
        http.post(
            "/api/v1/auth/sessions/current/refresh",
            headers={**client, "x-service-refresh-token": tokens["refresh_token"]},
        ),
        200,
    )
    found.add("refreshed access token", refreshed["access_token"])
    form = {
        "grant_type": "refresh_token",
        "refresh_token": tokens["refresh_token"],
        "client_id": keys.project_id,
        "client_secret": keys.client,
    }
    granted = _expect(http.post("/api/v1/auth/oauth/token", data=form), 200)
    found.add("oauth access token", granted["access_token"])
    wrong_refresh = "wrongrefreshtoken" + secrets.token_hex(14)
    found.add("wrong refresh token", wrong_refresh)
    _expect(
        http.post(
            "/api/v1/auth/sessions/current/refresh", headers={**client, "x-service-refresh-token": wrong_refresh}
        ),
        401,
    )

    # Two-factor sign-in.
    raw_secret = secrets.token_bytes(20)
    totp_b64 = base64.b64encode(raw_secret).decode()
    totp_b32 = base64.b32encode(raw_secret).decode()
    found.add("totp secret (base64)", totp_b64)
    found.add("totp secret (base32)", totp_b32)
    me = {**client, "x-service-access-token": tokens["access_token"]}
    _expect(http.patch("/api/v1/users/me", headers=me, json={"totp_secret_base64": totp_b64}), 200)
    typed, _ = _send_code(http, keys, email, found)
    required = http.post("/api/v1/auth/otp/sign-in", headers=client, json={"code": typed})
    assert required.headers.get("x-service-known-error") == "MULTI_FACTOR_AUTHENTICATION_REQUIRED", required.text
    attempt = required.json()["details"]["attempt_code"]
    found.add("mfa attempt code", attempt)
    totp = pyotp.TOTP(totp_b32)
    current = totp.at(now())
    wrong_totp = "000000" if current != "000000" else "111111"
    mfa = {"type": "totp", "code": attempt}
    _expect(http.post("/api/v1/auth/mfa/sign-in", headers=client, json={**mfa, "totp": wrong_totp}), 400)
    signed = _expect(http.post("/api/v1/auth/mfa/sign-in", headers=client, json={**mfa, "totp": current}), 200)
    found.add("refresh token (mfa)", signed["refresh_token"])
    found.add("access token (mfa)", signed["access_token"])

    # Passwords: sign-up, sign-in right and wrong, set by the server.
    password = "pw-" + secrets.token_urlsafe(18)
    wrong_password = "pw-" + secrets.token_urlsafe(18)
    found.add("password", password)
    found.add("wrong password", wrong_password)
    account = {"email": f"pw-{suffix}@example.com", "password": password}
    up = _expect(http.post("/api/v1/auth/password/sign-up", headers=client, json=account), 200)
    found.add("refresh token (sign-up)", up["refresh_token"])
    into = _expect(http.post("/api/v1/auth/password/sign-in", headers=client, json=account), 200)
    found.add("refresh token (password)", into["refresh_token"])
    refused = http.post("/api/v1/auth/password/sign-in", headers=client, json={**account, "password": wrong_password})
    assert refused.status_code == 400, refused.text
    server_password = "srv-" + secrets.token_urlsafe(18)
    found.add("password set by the server", server_password)
    created = _expect(
        http.post(
            "/api/v1/users",
            headers=server,
            json={"primary_email": f"srv-{suffix}@example.com", "password": server_password},
        ),
        201,
    )
    changed_password = "chg-" + secrets.token_urlsafe(18)
    found.add("changed password", changed_password)
    _expect(http.patch(f"/api/v1/users/{created['id']}", headers=server, json={"password": changed_password}), 200)
    session = _expect(http.post("/api/v1/auth/sessions", headers=server, json={"user_id": created["id"]}), 200)
    found.add("refresh token (server session)", session["refresh_token"])

    # passwords: a reset code (checked, wrong, used), the password it sets, a change (wrong old password, then
    # right) and a password set by a user who had none.
    reset_email = account["email"]  # signed up with a password: its address signs it in
    _expect(
        http.post(
            "/api/v1/auth/password/send-reset-code",
            headers=client,
            json={"email": reset_email, "callback_url": CALLBACK},
        ),
        200,
    )
    mail = _expect(http.get("/api/v1/emails/outbox", headers=server, params={"to": reset_email}), 200)["items"][0]
    reset_code = mail["magic_link"].rsplit("code=", 1)[1]
    found.add("password reset code", reset_code)
    wrong_reset_code = secrets.token_hex(22) + "x"
    found.add("wrong password reset code", wrong_reset_code)
    _expect(http.post("/api/v1/auth/password/reset/check-code", headers=client, json={"code": reset_code}), 200)
    _expect(http.post("/api/v1/auth/password/reset/check-code", headers=client, json={"code": wrong_reset_code}), 404)
    reset_password = "rst-" + secrets.token_urlsafe(18)
    found.add("password set by a reset", reset_password)
    reset_body = {"code": reset_code, "password": reset_password}
    _expect(http.post("/api/v1/auth/password/reset", headers=client, json=reset_body), 200)
    signed_in = _expect(
        http.post(
            "/api/v1/auth/password/sign-in", headers=client, json={"email": reset_email, "password": reset_password}
        ),
        200,
    )
    mine = {**client, "x-service-access-token": signed_in["access_token"]}
    updated_password = "upd-" + secrets.token_urlsafe(18)
    found.add("password set by an update", updated_password)
    update = {"old_password": wrong_password, "new_password": updated_password}
    _expect(http.post("/api/v1/auth/password/update", headers=mine, json=update), 400)
    update = {"old_password": reset_password, "new_password": updated_password}
    _expect(http.post("/api/v1/auth/password/update", headers=mine, json=update), 200)
    set_password = "set-" + secrets.token_urlsafe(18)
    found.add("password set by its user", set_password)
    _expect(http.post("/api/v1/auth/password/set", headers=me, json={"password": set_password}), 200)

    # Wrong keys are somebody's secrets too.
    for access, prefix in (("client", "pck_"), ("server", "ssk_"), ("admin", "sak_")):
        wrong_key = prefix + "wrong_" + secrets.token_hex(12)
        found.add(f"wrong {access} key", wrong_key)
        name = {"client": "publishable-client", "server": "secret-server", "admin": "super-secret-admin"}[access]
        refused = http.get(
            "/api/v1/projects/current",
            headers={**keys.headers(access), f"x-service-{name}-key": wrong_key},
        )
        assert refused.status_code == 401, refused.text

    # A project created with fresh keys (internal admin).
    if keys.internal:
        internal = {
            "x-service-access-type": "admin",
            "x-service-project-id": "internal",
            "x-service-super-secret-admin-key": keys.internal,
        }
        project = _expect(http.post("/api/v1/internal/projects", headers=internal, json={"display_name": "P"}), 201)
        for name, value in project.items():
            if isinstance(value, str) and name.endswith("_key"):
                found.add(f"new project's {name}", value)

    # API keys: created (shown once), checked, a wrong one checked, revoked.
    admin = keys.headers("admin")
    switch = {"config": {"allow_user_api_keys": True}}
    _expect(http.patch("/api/v1/projects/current", headers=admin, json=switch), 200)
    api_key = _expect(
        http.post(
            "/api/v1/user-api-keys",
            headers=server,
            json={"user_id": created["id"], "description": "d", "expires_at_millis": None},
        ),
        200,
    )
    found.add("user API key", api_key["value"])
    _expect(http.post("/api/v1/user-api-keys/check", headers=server, json={"api_key": api_key["value"]}), 200)
    wrong_api_key = "sk_wrong_" + secrets.token_hex(20)
    found.add("wrong API key", wrong_api_key)
    _expect(http.post("/api/v1/user-api-keys/check", headers=server, json={"api_key": wrong_api_key}), 404)
    _expect(http.patch(f"/api/v1/user-api-keys/{api_key['id']}", headers=server, json={"revoked": True}), 200)

    # Sign-out.
    _expect(http.request("DELETE", "/api/v1/auth/sessions/current", headers=me), 200)
    return found


# ----------------------------------------------------------------------------------------------------------------


@pytest.fixture
def debug_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    for name in ("identity_proto", "identity_service"):
        caplog.set_level(logging.DEBUG, logger=name)
    return caplog


def _everything_logged(caplog: pytest.LogCaptureFixture) -> str:
    """Each record as formatted, plus its raw message, arguments and traceback: nothing a handler could print."""
    parts = [caplog.text]
    for record in caplog.records:
        parts += [str(record.msg), repr(record.args), record.exc_text or "", repr(record.__dict__)]
    return "\n".join(parts)


def test_no_secret_in_the_in_process_logs(debug_logs: pytest.LogCaptureFixture) -> None:
    fake = IdentityFake()
    project = fake.create_project(display_name="Secrets")  # keys of its own, never logged
    keys = Keys(
        project.id,
        project.keys.publishable_client_key,
        project.keys.secret_server_key,
        project.keys.super_secret_admin_key,
    )
    with fake.client() as http:  # the WSGI host
        found = exercise(http, keys, now=lambda: fake.clock.now_ms() / 1000)
    with fake.client() as http:
        found.values.update({f"{k} (second run)": v for k, v in exercise(http, keys).values.items()})
    logged = _everything_logged(debug_logs)
    assert "identity service starting" in logged, "the capture saw nothing: is the logger name right?"
    leaked = found.found_in(logged)
    print(
        f"\nsecrets in logs, in process: {len(found.values)} secret values checked against "
        f"{len(debug_logs.records)} log records at DEBUG; leaked: {leaked}"
    )
    assert leaked == [], f"secrets in the log: {leaked}"


@pytest.mark.e2e
def test_no_secret_in_a_production_hypercorns_stderr() -> None:
    keys = Keys(
        project_id=str(uuid.uuid4()),
        client="pck_" + secrets.token_hex(20),
        server="ssk_" + secrets.token_hex(20),
        admin="sak_" + secrets.token_hex(20),
        internal="sak_" + secrets.token_hex(20),
    )
    env = {
        "IDENTITY_PROJECT_ID": keys.project_id,
        "IDENTITY_PUBLISHABLE_CLIENT_KEY": keys.client,
        "IDENTITY_SECRET_SERVER_KEY": keys.server,
        "IDENTITY_SUPER_SECRET_ADMIN_KEY": keys.admin,
        "IDENTITY_INTERNAL_ADMIN_KEY": keys.internal or "",
        "IDENTITY_LOG_LEVEL": "DEBUG",
        "IDENTITY_PASSWORD_ROUNDS": "4",
        "IDENTITY_MAIL": "outbox",
        "IDENTITY_ACCESS_LOG": "json",
    }
    server = start_hypercorn(env)
    chunks: list[bytes] = []
    request_ids: list[str] = []  # of every answer the exercise got
    assert server.process.stderr is not None
    stderr = server.process.stderr
    reader = threading.Thread(target=lambda: chunks.append(stderr.read()), daemon=True)
    reader.start()  # drained while we run: a full pipe would stall the server
    try:
        hooks = {"response": [lambda response: request_ids.append(response.headers["x-service-request-id"])]}
        with httpx.Client(base_url=server.base_url, timeout=10.0, event_hooks=hooks) as http:
            found = exercise(http, keys)
            # The one 500 we know how to trigger (a NUL byte in a password, a known bug pinned in
            # test_properties.py): its traceback is logged; the password must not be.
            nul_password = "nul-" + secrets.token_urlsafe(12) + "\x00" + secrets.token_urlsafe(12)
            found.add("password with a NUL byte", nul_password)
            found.add("password with a NUL byte, before the NUL", nul_password.split("\x00")[0])
            crash = http.post(
                "/api/v1/auth/password/sign-up",
                headers=keys.headers("client"),
                json={"email": "nul@example.com", "password": nul_password},
            )
    finally:
        stop(server.process)
        reader.join(timeout=10)
        stderr.close()
    text = b"".join(chunks).decode(errors="replace")
    assert "identity service starting" in text, f"nothing captured from stderr: {text[:500]!r}"
    assert "mode=production" in text
    if crash.status_code == 500:  # while the bug lasts, the 500 path's logging is exercised too
        assert "unhandled error" in text, text
    leaked = found.found_in(text)
    dev_keys_printed = "DEV PROJECT" in text
    write_results(
        "secrets_in_logs",
        {"secrets_checked": len(found.values), "stderr_bytes": len(text), "leaked": leaked, "stderr": text[-4000:]},
    )
    print(
        f"\nsecrets in logs, Hypercorn stderr at DEBUG: {len(found.values)} secret values checked against "
        f"{len(text)} bytes of stderr; leaked: {leaked}; dev announcement printed: {dev_keys_printed}"
    )
    assert leaked == [], f"secrets in Hypercorn's stderr: {leaked}\n{text}"
    assert not dev_keys_printed, "a production start announced the dev project"
    access = [json.loads(line) for line in text.splitlines() if line.startswith('{"time":')]
    logged = [line["request_id"] for line in access if line["route"] != "/api/v1"]  # not start_hypercorn's polls
    assert sorted(logged) == sorted(request_ids), "not one access-log line per request"
    assert len(request_ids) > 40


# ----------------------------------------------------------------------------------------------------------------
# The paths that do log: mail delivery failing, the store going away, a failed start. Their URLs carry passwords.


def _start_redis_with_password(workdir: Path, password: str) -> tuple[subprocess.Popen[bytes], int]:
    executable = shutil.which("redis-server")
    if executable is None:
        pytest.fail("redis-server is not on PATH (apt-get install redis-server)", pytrace=False)
    for _attempt in range(3):
        port = free_port()
        command = [executable, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        command += ["--requirepass", password, "--dir", str(workdir)]
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=workdir)
        client = redis.Redis(host="127.0.0.1", port=port, password=password, socket_connect_timeout=0.2)
        try:
            deadline = time.monotonic() + 10
            while process.poll() is None and time.monotonic() < deadline:
                try:
                    if client.ping():
                        return process, port
                except (redis.exceptions.ConnectionError, OSError):
                    time.sleep(0.05)
        finally:
            client.close()
        stop(process)
    pytest.fail("could not start a redis-server with a password", pytrace=False)


@pytest.mark.e2e
def test_no_password_of_a_store_or_mailer_url_in_the_logs_when_they_fail(tmp_path: Path) -> None:
    redis_password = "redispw" + secrets.token_hex(12)
    smtp_password = "smtppw" + secrets.token_hex(12)
    internal_key = "sak_" + secrets.token_hex(20)
    redis_process, redis_port = _start_redis_with_password(tmp_path, redis_password)
    dead_port = free_port()
    keys = Keys(
        str(uuid.uuid4()),
        "pck_" + secrets.token_hex(20),
        "ssk_" + secrets.token_hex(20),
        "sak_" + secrets.token_hex(20),
        internal_key,
    )
    env = {
        "IDENTITY_PROJECT_ID": keys.project_id,
        "IDENTITY_PUBLISHABLE_CLIENT_KEY": keys.client,
        "IDENTITY_SECRET_SERVER_KEY": keys.server,
        "IDENTITY_SUPER_SECRET_ADMIN_KEY": keys.admin,
        "IDENTITY_INTERNAL_ADMIN_KEY": internal_key,
        "IDENTITY_LOG_LEVEL": "DEBUG",
        "IDENTITY_PASSWORD_ROUNDS": "4",
        "IDENTITY_BACKEND": "redis",
        "IDENTITY_REDIS_URL": f"redis://:{redis_password}@127.0.0.1:{redis_port}/0",
        "IDENTITY_MAIL": f"smtp://mailer:{smtp_password}@127.0.0.1:{dead_port}",
    }
    chunks: list[bytes] = []
    try:
        server = start_hypercorn(env)
        assert server.process.stderr is not None
        stderr = server.process.stderr
        reader = threading.Thread(target=lambda: chunks.append(stderr.read()), daemon=True)
        reader.start()
        try:
            with httpx.Client(base_url=server.base_url, timeout=10.0) as http:
                password = "pw-" + secrets.token_urlsafe(18)
                account = {"email": "fail@example.com", "password": password}
                _expect(http.post("/api/v1/auth/password/sign-up", headers=keys.headers("client"), json=account), 200)
                mail = http.post(
                    "/api/v1/auth/otp/send-sign-in-code",
                    headers=keys.headers("client"),
                    json={"email": "mail-fails@example.com", "callback_url": CALLBACK},
                )
                assert (mail.status_code, mail.headers.get("x-service-known-error")) == (502, "EMAIL_DELIVERY_FAILED")
                stop(redis_process)  # the store goes away
                gone = http.post("/api/v1/auth/password/sign-in", headers=keys.headers("client"), json=account)
                assert (gone.status_code, gone.headers.get("x-service-known-error")) == (503, "STORAGE_UNAVAILABLE")
        finally:
            stop(server.process)
            reader.join(timeout=10)
            stderr.close()
    finally:
        stop(redis_process)
    text = b"".join(chunks).decode(errors="replace")
    assert "e-mail delivery failed" in text, text
    assert "storage unavailable" in text, text

    # A start that fails (the store is unreachable): the traceback is logged, the URL's password is not.
    failed_start = ""
    try:
        stop(
            start_hypercorn({**env, "IDENTITY_REDIS_URL": f"redis://:{redis_password}@127.0.0.1:{dead_port}/0"}).process
        )
    except RuntimeError as exc:  # hypercorn exited: its stderr is in the message
        failed_start = str(exc)
    assert "start-up failed" in failed_start, failed_start[:2000]

    secret_values = {
        "redis password": redis_password,
        "smtp password": smtp_password,
        "sign-up password": password,
        "internal admin key": internal_key,
        "publishable client key": keys.client,
        "secret server key": keys.server,
        "super secret admin key": keys.admin,
    }
    leaked = [what for what, value in secret_values.items() if value in text or value in failed_start]
    print(
        f"\nsecrets in logs, failure paths: {len(text) + len(failed_start)} bytes of stderr (mail failure, store "
        f"unavailable, failed start), {len(secret_values)} secrets checked; leaked: {leaked}"
    )
    assert leaked == [], f"{leaked}\n{text}\n{failed_start}"
