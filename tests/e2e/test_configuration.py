"""The environment is read when the service is first served, not when its modules are imported; a bad variable
stops every host (`hypercorn asgi_app:app`, `identity-service`, an app embedding the service in FastAPI or Flask)
with one line that names it and a non-zero status; production mode warns about development settings."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx
import pytest

from tests.e2e.conftest import ROOT, start_hypercorn, stop_server
from tests.processes import free_port

pytestmark = pytest.mark.e2e

PROJECT_ID = "6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f"
PRODUCTION = {
    "IDENTITY_PROJECT_ID": PROJECT_ID,
    "IDENTITY_PUBLISHABLE_CLIENT_KEY": "pck_production_client_key_0123456789",
    "IDENTITY_SECRET_SERVER_KEY": "ssk_production_server_key_0123456789",
    "IDENTITY_SUPER_SECRET_ADMIN_KEY": "sak_production_admin_key_0123456789",
}
#: (variable the message must name, environment)
BAD_ENVIRONMENTS = {
    "unknown-backend": ("IDENTITY_BACKEND", {"IDENTITY_BACKEND": "bogus"}),
    "production-without-keys": ("IDENTITY_PUBLISHABLE_CLIENT_KEY", {"IDENTITY_PROJECT_ID": PROJECT_ID}),
    "rounds-out-of-range": ("IDENTITY_PASSWORD_ROUNDS", {"IDENTITY_PASSWORD_ROUNDS": "99"}),
    "project-id-not-a-uuid": ("IDENTITY_PROJECT_ID", {**PRODUCTION, "IDENTITY_PROJECT_ID": "not-a-uuid"}),
    # With its keys, the admin key would have been the internal project's: every project created, listed, deleted.
    "project-id-internal": ("IDENTITY_PROJECT_ID", {**PRODUCTION, "IDENTITY_PROJECT_ID": "internal"}),
}


def _environment(extra: dict[str, str]) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("IDENTITY_")}, **extra}


@pytest.mark.parametrize(("variable", "env"), BAD_ENVIRONMENTS.values(), ids=BAD_ENVIRONMENTS.keys())
def test_importing_the_hosts_with_a_bad_environment_succeeds(variable: str, env: dict[str, str]) -> None:
    finished = subprocess.run(
        [sys.executable, "-c", "import asgi_app, identity_hosting.wsgi, identity_testing.fake; print('imported')"],
        cwd=ROOT,
        env=_environment(env),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (finished.returncode, finished.stdout, finished.stderr) == (0, "imported\n", "")


#: Every way the service is started, given a bind address: each reads the environment and must refuse a bad one alike.
HOSTS = {
    "hypercorn": lambda bind: [sys.executable, "-m", "hypercorn", "asgi_app:app", "--bind", bind],
    # the installed production command (the console script runs `identity_hosting.serve:main`)
    "identity-service": lambda bind: [sys.executable, "-m", "identity_hosting.serve", "--bind", bind],
    # embedded: an app module that builds the service at import (`IdentityASGI.from_env()` / `IdentityWSGI...`)
    "fastapi-under-hypercorn": lambda bind: [
        sys.executable,
        "-m",
        "hypercorn",
        "tests.downstream.mounted_fastapi:app",
        "--bind",
        bind,
    ],
    "flask-run": lambda bind: [
        sys.executable,
        "-m",
        "flask",
        "--app",
        "tests.downstream.mounted_flask",
        "run",
        "--port",
        bind.rsplit(":", 1)[1],
    ],
    "flask-imported": lambda bind: [sys.executable, "-c", "import tests.downstream.mounted_flask"],
}


@pytest.mark.parametrize("host", HOSTS)
@pytest.mark.parametrize(("variable", "env"), BAD_ENVIRONMENTS.values(), ids=BAD_ENVIRONMENTS.keys())
def test_bad_configuration_exits_non_zero_with_one_line(host: str, variable: str, env: dict[str, str]) -> None:
    finished = subprocess.run(
        HOSTS[host](f"127.0.0.1:{free_port()}"),
        cwd=ROOT,
        env=_environment(env),
        capture_output=True,
        text=True,
        timeout=60,
    )
    output = finished.stdout + finished.stderr
    assert finished.returncode != 0, output
    assert "Traceback" not in output
    said = [line for line in output.splitlines() if "configuration error" in line]
    assert len(said) == 1, output
    assert said[0].startswith("identity service: configuration error: ")
    assert variable in said[0]
    assert output.splitlines()[0] == said[0]  # the first line says why
    if host != "hypercorn" and host != "fastapi-under-hypercorn":  # see `settings.end_hypercorn_worker`
        assert finished.returncode == 3, output


def test_wsgi_app_with_a_bad_environment_answers_500_and_says_why_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from identity_hosting import wsgi

    monkeypatch.setenv("IDENTITY_PASSWORD_ROUNDS", "99")
    app = type(wsgi.app)()  # a fresh, unbuilt one: the module's `app` may have been served already
    with httpx.Client(transport=httpx.WSGITransport(app=app), base_url="http://identity.test") as http:
        answers = [http.get("/api/v1") for _ in range(2)]
    assert [a.status_code for a in answers] == [500, 500]
    assert all(a.json()["code"] == "INTERNAL_ERROR" for a in answers)
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "identity service: configuration error: IDENTITY_PASSWORD_ROUNDS must be between 4 and 16",
    ]


def test_asgi_app_without_lifespan_and_a_bad_environment_answers_500(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import asgi_app

    monkeypatch.setenv("IDENTITY_BACKEND", "bogus")
    app = type(asgi_app.app)()
    transport = httpx.ASGITransport(app=app)  # sends no lifespan events, like a framework that mounts the app

    async def two_requests() -> list[httpx.Response]:
        async with httpx.AsyncClient(transport=transport, base_url="http://identity.test") as http:
            return [await http.get("/api/v1") for _ in range(2)]

    import asyncio

    answers = asyncio.run(two_requests())
    assert [a.status_code for a in answers] == [500, 500]
    assert capsys.readouterr().err.count("configuration error: IDENTITY_BACKEND") == 1


def test_production_mode_warns_about_memory_store_outbox_and_localhost() -> None:
    server = start_hypercorn({**PRODUCTION, "IDENTITY_INTERNAL_ADMIN_KEY": "sak_internal_production_key_0123456789"})
    stop_server_keeping_stderr = server.process.stderr
    try:
        assert httpx.get(f"{server.base_url}/api/v1", timeout=10).status_code == 200
    finally:
        server.process.stderr = None  # read it here, after the process ends
        stop_server(server)
    assert stop_server_keeping_stderr is not None
    warnings = [line for line in stop_server_keeping_stderr.read().decode().splitlines() if "[WARNING]" in line]
    stop_server_keeping_stderr.close()
    assert len(warnings) == 3, warnings
    assert "IDENTITY_BACKEND=memory" in warnings[0]
    assert "IDENTITY_MAIL=outbox" in warnings[1]
    assert f"project {PROJECT_ID} allows localhost callback URLs" in warnings[2]


def test_dev_mode_and_a_production_setup_do_not_warn() -> None:
    for env in ({}, {**PRODUCTION, "IDENTITY_MAIL": "smtp://127.0.0.1:2525"}):
        server = start_hypercorn(env)
        stderr = server.process.stderr
        server.process.stderr = None
        stop_server(server)
        assert stderr is not None
        lines = stderr.read().decode().splitlines()
        stderr.close()
        production_warnings = [line for line in lines if "[WARNING]" in line and "production mode" in line]
        if env:  # memory store and allow_localhost still warn; mail goes to SMTP, so that one does not
            assert not any("IDENTITY_MAIL" in line for line in production_warnings), production_warnings
            assert len(production_warnings) == 2
        else:
            assert production_warnings == []
