"""Projects and the API's welcome over HTTP, in process: in compatibility mode as the original answers them (its
e2e files `projects.test.ts` and `index.test.ts`), ours otherwise."""

from __future__ import annotations

from typing import Any

import httpx

from identity_testing import IdentityFake

INTERNAL = "internal"
WELCOME = "Welcome to the Stack API endpoint! Please refer to the documentation at https://docs.stack-auth.com."


def _internal_client(fake: IdentityFake) -> httpx.Client:
    return fake.client(
        {
            "x-service-access-type": "admin",
            "x-service-project-id": INTERNAL,
            "x-service-super-secret-admin-key": fake.internal_admin_key,
        }
    )


def _stack(headers: dict[str, str]) -> dict[str, str]:
    return {name.replace("x-service-", "x-stack-"): value for name, value in headers.items()}


def test_the_welcome_text_is_the_originals_in_compatibility_mode() -> None:
    fake = IdentityFake(compat=True)
    project = fake.create_project()
    with fake.client() as http:
        assert http.get("/api/v1").text == f"{WELCOME}\n\nAuthentication: None"
    for access in ("client", "server", "admin"):
        with fake.client(_stack(project.headers(access))) as http:
            reply = http.get("/api/v1")
        assert (reply.status_code, reply.text) == (
            200,
            f"{WELCOME}\n\nAuthentication: {access.capitalize()}\n  Project: {project.id}\n  User: None",
        )
    # a signed-in user is named by their primary e-mail, as the original names them
    user_id = project.create_user("ada@example.com")["id"]
    token = project.sign_in(user_id)["access_token"]
    with project.client("client", access_token=token) as http:
        assert http.get("/api/v1").text.endswith("\n  User: ada@example.com")


def test_the_welcome_text_is_ours_otherwise() -> None:
    fake = IdentityFake()
    project = fake.create_project()
    with fake.client() as http:
        welcome = http.get("/api/v1").text
    assert welcome == "Welcome to the identity service REST API (version 1).\n\nAuthentication: None\n"
    with project.client("client") as http:
        assert http.get("/api/v1").text.endswith(f"Authentication: Client\n  Project: {project.id}\n  User: None\n")


def _refusal(fake: IdentityFake, headers: dict[str, str]) -> tuple[int, str | None, Any]:
    with fake.client(headers) as http:
        reply = http.get("/api/v1/projects/current")
    return reply.status_code, reply.headers.get("x-stack-known-error"), reply.json()


def test_key_refusals_are_worded_as_the_originals_in_compatibility_mode() -> None:
    fake = IdentityFake(compat=True)
    project = fake.create_project()
    pid = project.id
    wrong = {
        "client": ("x-stack-publishable-client-key", "INVALID_PUBLISHABLE_CLIENT_KEY", "publishable key"),
        "server": ("x-stack-secret-server-key", "INVALID_SECRET_SERVER_KEY", "secret server key"),
        "admin": ("x-stack-super-secret-admin-key", "INVALID_SUPER_SECRET_ADMIN_KEY", "super secret admin key"),
    }
    for access, (header, code, words) in wrong.items():
        headers = {**_stack(project.headers(access)), header: "wrong-key"}
        assert _refusal(fake, headers) == (
            401,
            code,
            {
                "code": code,
                "details": {"project_id": pid},
                "error": f'The {words} is not valid for the project "{pid}". Does the project and/or the key exist?',
            },
        )
    required = fake.create_project(require_publishable_client_key=True)
    keyless = {"x-stack-access-type": "client", "x-stack-project-id": required.id}
    assert _refusal(fake, keyless) == (
        401,
        "PUBLISHABLE_CLIENT_KEY_REQUIRED_FOR_PROJECT",
        {
            "code": "PUBLISHABLE_CLIENT_KEY_REQUIRED_FOR_PROJECT",
            "details": {"project_id": required.id},
            "error": "Publishable client keys are required for this project. Create one in Project Keys, or disable "
            "this requirement there to allow keyless client access.",
        },
    )


def test_key_refusals_keep_our_words_otherwise() -> None:
    fake = IdentityFake()
    project = fake.create_project()
    with fake.client({**project.headers("client"), "x-service-publishable-client-key": "wrong-key"}) as http:
        reply = http.get("/api/v1/projects/current")
    assert reply.json()["error"] == (
        f"The publishable key is not valid for the project {project.id}. Does the project and/or the key exist?"
    )


def test_a_key_the_internal_project_does_not_have_is_refused_as_the_original_refuses_it() -> None:
    """The internal project admits admin access only, in both modes; in compatibility mode a client key it does
    not have is refused first as an invalid key, as the original refuses it for its internal project."""
    for compat, code in ((True, "INVALID_PUBLISHABLE_CLIENT_KEY"), (False, "INSUFFICIENT_ACCESS_TYPE")):
        fake = IdentityFake(compat=compat)
        with_key = {
            "x-service-access-type": "client",
            "x-service-project-id": INTERNAL,
            "x-service-publishable-client-key": "publish-key",
        }
        with fake.client(with_key) as http:
            reply = http.get("/api/v1")
        assert (reply.status_code, reply.headers["x-service-known-error"]) == (401, code)
        if compat:
            assert reply.json()["details"] == {"project_id": INTERNAL}
        without_key = {"x-service-access-type": "client", "x-service-project-id": INTERNAL}
        with fake.client(without_key) as http:
            reply = http.get("/api/v1")
        assert (reply.status_code, reply.headers["x-service-known-error"]) == (401, "INSUFFICIENT_ACCESS_TYPE")
