"""What start-up imports, read from `sys.modules` in fresh interpreters (no timing here; benchmarks.inproc measures):

- answering with API keys builds no request model (pydantic's validators are deferred to a model's first use, and a
  route that takes no input has no model) and needs no token machinery (joserfc, cryptography: no token is signed or
  verified), so none is built or imported;
- `Service.prepare` (what a serving host calls at start-up) leaves nothing for the requests it prepares for to
  import: a request then builds no model and loads no module;
- the pytest plugin, which pytest loads in every suite where the package is installed, imports none of the service.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(script: str) -> object:
    """What `script` prints as JSON, run by a fresh interpreter in the repository's root."""
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


FIRST_RESPONSE = """
    import json, sys
    from backends.memory import MemoryStore
    from identity_hosting.settings import DEV_INTERNAL_ADMIN_KEY, DEV_PROJECT
    from identity_proto import Request, SeededEntropy, Service, run

    service, store, entropy = Service(), MemoryStore(), SeededEntropy(1)
    run(service.bootstrap(DEV_PROJECT, DEV_INTERNAL_ADMIN_KEY, now_ms=1, entropy=entropy), store)
    headers = (
        ("x-service-access-type", "client"),
        ("x-service-project-id", DEV_PROJECT.id),
        ("x-service-publishable-client-key", DEV_PROJECT.keys.publishable_client_key),
    )
    response = run(service.handle(Request("GET", "/api/v1/projects/current", headers), 2, entropy), store)
    assert response.status == 200, response
    from identity_proto.routes import ROUTES
    models = {m for r in ROUTES for m in (r.body_model(None), r.query, r.params) if m is not None}
    built = sorted(m.__name__ for m in models if m.__pydantic_complete__)
    print(json.dumps(built + sorted({name.split(".")[0] for name in sys.modules} & {"joserfc", "cryptography"})))
"""


def test_a_first_response_with_api_keys_builds_no_model_and_imports_no_token_machinery() -> None:
    assert _run(FIRST_RESPONSE) == []


FIRST_RESPONSES = """
    import json, sys
    from backends.memory import MemoryStore
    from identity_hosting.settings import DEV_INTERNAL_ADMIN_KEY, DEV_PROJECT
    from identity_proto import Request, SeededEntropy, Service, run

    def flows_and_models():
        prefixes = ("identity_proto.flows.", "identity_proto.schemas.", "pydantic")
        return sorted(name for name in sys.modules if name.startswith(prefixes))

    service, store, entropy = Service(), MemoryStore(), SeededEntropy(1)
    run(service.bootstrap(DEV_PROJECT, DEV_INTERNAL_ADMIN_KEY, now_ms=1, entropy=entropy), store)
    headers = (
        ("x-service-access-type", "server"),
        ("x-service-project-id", DEV_PROJECT.id),
        ("x-service-secret-server-key", DEV_PROJECT.keys.secret_server_key),
    )
    seen = [flows_and_models()]
    for method, path in (("GET", "/api/v1/projects/current"), ("GET", "/api/v1/users"), ("GET", "/api/v1/users")):
        response = run(service.handle(Request(method, path, headers), 2, entropy), store)
        assert response.status == 200, response
        seen.append(flows_and_models())
    print(json.dumps(seen))
"""


def test_a_route_s_flow_and_models_are_imported_when_a_request_first_reaches_it() -> None:
    # A service starts with the flows it needs to bootstrap (projects, and what they import) and no model: the route
    # table names the others (`identity_proto.routing.Deferred`). The first GET /users imports its flow, its query
    # model's module and pydantic; the second imports nothing more.
    at_start, after_project, after_users, after_users_again = _run(FIRST_RESPONSES)  # type: ignore[misc]
    assert not [name for name in at_start if name.startswith(("pydantic", "identity_proto.schemas.base"))]
    assert "identity_proto.flows.users" not in at_start
    assert after_project == at_start
    assert {"identity_proto.flows.users", "identity_proto.schemas.users", "pydantic"} <= set(after_users)
    assert after_users_again == after_users


PREPARED = """
    import json, sys
    from backends.memory import MemoryStore
    from identity_hosting.settings import DEV_INTERNAL_ADMIN_KEY, DEV_PROJECT
    from identity_proto import Request, SeededEntropy, Service, ServiceOptions, run

    service, store, entropy = Service(ServiceOptions(password_rounds=4)), MemoryStore(), SeededEntropy(1)
    run(service.bootstrap(DEV_PROJECT, DEV_INTERNAL_ADMIN_KEY, now_ms=1, entropy=entropy), store)
    service.prepare()
    loaded = set(sys.modules)

    def call(method, path, access, body=b"", query="", token=None):
        key = {"client": "publishable-client-key", "server": "secret-server-key"}[access]
        headers = {
            "x-service-access-type": access,
            "x-service-project-id": DEV_PROJECT.id,
            f"x-service-{key}": getattr(DEV_PROJECT.keys, key.replace("-", "_")),
            "content-type": "application/json",
        }
        if token is not None:
            headers["x-service-access-token"] = token
        response = run(service.handle(Request(method, path, tuple(headers.items()), body, query), 2, entropy), store)
        assert response.status in (200, 201), response
        return json.loads(response.body)

    ada = {"primary_email": "ada@example.com", "primary_email_auth_enabled": True, "password": "correct horse"}
    user = call("POST", "/api/v1/users", "server", json.dumps(ada).encode())
    signing_in = {"email": "ada@example.com", "password": "correct horse"}
    call("POST", "/api/v1/auth/password/sign-in", "client", json.dumps(signing_in).encode())
    token = call("POST", "/api/v1/auth/sessions", "server", b'{"user_id": "%s"}' % user["id"].encode())["access_token"]
    call("PATCH", "/api/v1/users/me", "client", b'{"display_name": "Ada"}', token=token)
    call("GET", "/api/v1/users", "server", query="limit=5")
    call("GET", "/api/v1/teams", "client", query="user_id=me", token=token)
    print(json.dumps(sorted(set(sys.modules) - loaded)))
"""


def test_a_prepared_service_imports_nothing_more_to_answer() -> None:
    # Hashing and checking a password, signing (a session), verifying (a token), and body, query and update models
    # of several resources.
    assert _run(PREPARED) == []


def test_the_pytest_plugin_imports_none_of_the_service() -> None:
    imported = _run(
        """
        import json, sys
        import identity_testing.pytest_plugin
        ours = ("identity_proto", "identity_hosting", "backends", "asgi_app", "identity_testing.fake")
        print(json.dumps(sorted(name for name in sys.modules if name.startswith(ours))))
        """
    )
    assert imported == []


ASGI_START = """
    import asyncio, json, sys
    from asgi_app import IdentityASGI
    from identity_hosting.settings import Settings

    async def main():
        app = IdentityASGI(Settings.from_env({"IDENTITY_DEV": "1"}))
        messages = iter([{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])
        sent = []

        async def receive():
            return next(messages)

        async def send(message):
            sent.append(message)

        await app({"type": "lifespan", "asgi": {"version": "3.0"}}, receive, send)
        after = sorted({n.split(".")[0] for n in sys.modules} & {"pydantic", "joserfc"})
        print(json.dumps({"sent": [m["type"] for m in sent], "after_shutdown": after}))

    asyncio.run(main())
"""


def test_the_asgi_host_has_prepared_by_the_time_shutdown_returns() -> None:
    # The preparation runs in a thread once start-up is complete (the first answer does not wait for it), and
    # shutdown waits for it: models and the token machinery are loaded by then.
    result = _run(ASGI_START)
    assert result == {
        "sent": ["lifespan.startup.complete", "lifespan.shutdown.complete"],
        "after_shutdown": ["joserfc", "pydantic"],
    }
