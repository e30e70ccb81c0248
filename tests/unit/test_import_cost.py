"""What importing and starting the ASGI host costs, guarded by what it loads (read from `sys.modules` in fresh
interpreters; no timing here: `benchmarks.inproc startup` and the benchmark's `startup.hypercorn_*` figures measure).

A worker's start and its first answer wait for every module `asgi_app` imports, so what only some requests or
some configurations need is imported when first needed:

- the OAuth provider client (authlib, joserfc for the providers' ID tokens, httpx and httpcore) when a flow first
  talks to a provider (`IdentityASGI.provider_client`);
- the webhook sender (httpx, httpcore and the guarded transport) when the delivery task first POSTs
  (`IdentityASGI.webhook_sender`): creating its client also loads the system's CA certificates;
- smtplib and the MIME classes when the first message is sent;
- prometheus_client only with `IDENTITY_METRICS=on`; the OpenAPI document when it is first asked for;
- the Redis client only on the Redis store;
- a route's flow module and its models (and so pydantic) when a request first reaches the route
  (`identity_proto.routing.Deferred`): the route table names them without importing them.

The token machinery (joserfc, cryptography), the password hashers, and every route's flow and models (pydantic) are
loaded by `Service.prepare`, in a thread once the service answers (`tests/unit/test_start_up_imports.py`), so they
are not on this list after start-up.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Never imported by `import asgi_app`, nor by starting it (lifespan) and answering a first request without OAuth,
#: webhooks to deliver, mail to send or metrics. A package name covers its submodules.
NOT_AT_START = (
    "authlib",
    "joserfc",
    "cryptography",
    "httpx",
    "httpcore",
    "h11",
    "h2",
    "anyio",
    "trio",
    "certifi",
    "prometheus_client",
    "smtplib",
    "email.mime",
    "redis",
    "hiredis",
    "schemathesis",
    "jsonschema",
    "jsonschema_rs",
    "hypercorn",
    "identity_hosting.oauth_client",
    "identity_hosting.oauth_client_async",
    "identity_hosting.oauth_client_sync",
    "identity_hosting.oauth_answers",
    "identity_hosting.egress",
    "identity_hosting.egress_async",
    "identity_hosting.egress_sync",
    "identity_hosting.egress_check",
    "identity_hosting.webhook_sender",
    "identity_hosting.webhook_sender_async",
    "identity_hosting.webhook_sender_sync",
    "identity_hosting.wsgi",
    "identity_proto.openapi",
    "pydantic",
    "pydantic_core",
    "annotated_types",
    "identity_proto.schemas.base",
    "identity_proto.schemas.users",
    "identity_proto.flows.users",
    "identity_proto.flows.api_keys",
)

#: Loaded by the start-up's preparation (in a thread): not on the list once the service has started.
PREPARED = (
    "annotated_types",
    "cryptography",
    "identity_proto.flows.api_keys",
    "identity_proto.flows.users",
    "identity_proto.schemas.base",
    "identity_proto.schemas.users",
    "joserfc",
    "pydantic",
    "pydantic_core",
)

#: Nor by importing the pytest plugin, which pytest loads in every suite where the package is installed.
NOT_BY_THE_PLUGIN = (*NOT_AT_START, "identity_proto", "identity_hosting", "backends", "asgi_app")


def _run(script: str, *, env: dict[str, str] | None = None) -> object:
    """What `script` prints as JSON, run by a fresh interpreter in the repository's root."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("IDENTITY_")}
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**environ, **(env or {})},
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


LOADED = """
    def loaded(names):
        return sorted(n for n in names if n in sys.modules or any(m.startswith(n + ".") for m in sys.modules))
"""


def test_importing_the_asgi_host_loads_nothing_only_some_requests_need() -> None:
    script = (
        "import json, sys\n"
        + textwrap.dedent(LOADED)
        + f"import asgi_app\nprint(json.dumps(loaded({NOT_AT_START!r})))\n"
    )
    assert _run(script) == []


START_AND_ANSWER = """
    import asyncio, json, sys
    import asgi_app

    async def main():
        app = asgi_app.app
        messages = asyncio.Queue()
        await messages.put({"type": "lifespan.startup"})
        lifespan_sent = []

        async def lifespan_send(message):
            lifespan_sent.append(message["type"])

        lifespan = asyncio.create_task(
            app({"type": "lifespan", "asgi": {"version": "3.0"}}, messages.get, lifespan_send)
        )
        while not lifespan_sent:
            await asyncio.sleep(0.001)
        sent = []

        async def receive():
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message):
            sent.append(message)

        scope = {"type": "http", "method": "GET", "path": "/api/v1", "headers": [], "query_string": b"",
                 "client": ("127.0.0.1", 1)}
        await app(scope, receive, send)
        first = loaded([n for n in NAMES if n not in PREPARED])  # the preparation's thread may have begun
        await messages.put({"type": "lifespan.shutdown"})
        await lifespan  # the start-up's preparation is over by then
        print(json.dumps({"lifespan": lifespan_sent, "status": sent[0]["status"], "after_first_answer": first,
                          "after_shutdown": loaded(NAMES)}))

    asyncio.run(main())
"""


def _start_and_answer(env: dict[str, str]) -> object:
    names = f"NAMES = {NOT_AT_START!r}\nPREPARED = {PREPARED!r}\n"
    script = names + textwrap.dedent(LOADED) + textwrap.dedent(START_AND_ANSWER)
    return _run(script, env=env)


PRODUCTION = {
    "IDENTITY_PROJECT_ID": "5b7a1c1e-be4c-4000-8000-00000000be4c",
    "IDENTITY_PUBLISHABLE_CLIENT_KEY": "pck_import_cost_publishable_client_key_value",
    "IDENTITY_SECRET_SERVER_KEY": "ssk_import_cost_secret_server_key_fixed_value_00",
    "IDENTITY_SUPER_SECRET_ADMIN_KEY": "sak_import_cost_super_secret_admin_key_value_0",
    "IDENTITY_INTERNAL_ADMIN_KEY": "sak_import_cost_internal_admin_key_fixed_value",
    "IDENTITY_MAIL": "smtp://mail.example.com:587?from=id%40example.com",
}


def test_a_production_worker_starts_and_answers_without_them() -> None:
    # SMTP mail configured (nothing sent), metrics off, webhooks with nothing to deliver, no OAuth.
    assert _start_and_answer(PRODUCTION) == {
        "lifespan": ["lifespan.startup.complete", "lifespan.shutdown.complete"],
        "status": 200,
        "after_first_answer": [],
        "after_shutdown": list(PREPARED),
    }


def test_a_dev_worker_starts_and_answers_without_them() -> None:
    # Dev mode: the dev project, the console mailer, the dashboard and the explorer's pages (not yet asked for).
    assert _start_and_answer({"IDENTITY_DEV": "1"}) == {
        "lifespan": ["lifespan.startup.complete", "lifespan.shutdown.complete"],
        "status": 200,
        "after_first_answer": [],
        "after_shutdown": list(PREPARED),
    }


def test_metrics_on_load_prometheus_client_at_start_up() -> None:
    # The contrast that shows the check above can fail: with metrics on, the client library is loaded when the app
    # is built (a missing package then fails the start, not the first scrape).
    result = _start_and_answer({"IDENTITY_DEV": "1", "IDENTITY_METRICS": "on"})
    assert isinstance(result, dict)
    assert result["after_first_answer"] == ["prometheus_client"]


ON_DEMAND = """
    import asyncio, json, sys
    from asgi_app import IdentityASGI
    from identity_hosting.settings import Settings

    async def main():
        app = IdentityASGI(Settings.from_env({"IDENTITY_DEV": "1"}))
        await app.startup()
        before = loaded(NAMES)
        provider, sender = app.provider_client(), app.webhook_sender()
        same = provider is app.provider_client() and sender is app.webhook_sender()
        kinds = [type(provider).__name__, type(sender).__name__]
        after = loaded(NAMES)
        await app.shutdown()
        print(json.dumps({"before": before, "kinds": kinds, "same": same, "after": after,
                          "closed": app._provider is None and app._webhook_sender is None}))

    asyncio.run(main())
"""


def test_the_provider_client_and_the_webhook_sender_are_built_on_first_use_and_closed_at_shutdown() -> None:
    names = ("authlib", "httpx", "identity_hosting.oauth_client", "identity_hosting.webhook_sender")
    script = "NAMES = " + repr(names) + "\n" + textwrap.dedent(LOADED) + textwrap.dedent(ON_DEMAND)
    assert _run(script) == {
        "before": [],
        "kinds": ["AsyncProviderHttpClient", "AsyncWebhookHttpSender"],
        "same": True,
        "after": sorted(names),
        "closed": True,
    }


def test_the_pytest_plugin_loads_none_of_them() -> None:
    script = (
        "import json, sys\n"
        + textwrap.dedent(LOADED)
        + f"import identity_testing.pytest_plugin\nprint(json.dumps(loaded({NOT_BY_THE_PLUGIN!r})))\n"
    )
    assert _run(script) == []


#: Not loaded by making the in-process fake and a project, nor by a test that goes through `DirectClient`: the HTTP
#: clients (the `identity_client` fixture loads httpx), the OAuth client, the webhook sender, pydantic (a route's
#: models, on its first request).
NOT_BY_THE_FAKE = (
    "httpx",
    "httpcore",
    "authlib",
    "identity_hosting.oauth_client",
    "identity_hosting.webhook_sender",
    "identity_hosting.egress",
    "pydantic",
    "identity_proto.flows.api_keys",
)


def test_the_fake_and_a_project_load_none_of_the_clients_nor_pydantic() -> None:
    """The first test of a session that uses the fake waits for what its import loads (about 0.6 s of CPU when the
    WSGI host imported the OAuth client and the fake imported httpx and the API-key flows eagerly)."""
    script = (
        "import json, sys\n"
        + textwrap.dedent(LOADED)
        + "from identity_testing.fake import IdentityFake\n"
        + "fake = IdentityFake()\nproject = fake.create_project()\nproject.direct_client()\n"
        + f"print(json.dumps(loaded({NOT_BY_THE_FAKE!r})))\n"
    )
    assert _run(script) == []
