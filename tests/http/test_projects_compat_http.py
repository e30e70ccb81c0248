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


PROVIDERS = [
    {"id": "spotify", "type": "spotify", "client_id": "spotify-client", "client_secret": "spotify-secret-long"},
    {"id": "github", "type": "mock"},
    {"id": "google", "type": "google", "client_id": "g", "client_secret": "g-secret", "allow_sign_in": False},
]
DOMAINS = [
    {"domain": "https://b.example.com", "handler_path": "/handler"},
    {"domain": "https://a.example.com", "handler_path": "/auth"},
]


def _configured(fake: IdentityFake) -> Any:
    project = fake.create_project()
    with project.client("admin") as http:
        reply = http.patch(
            "/api/v1/projects/current",
            json={"config": {"oauth_providers": PROVIDERS, "domains": DOMAINS, "user_default_permissions": []}},
        )
        assert reply.status_code == 200, reply.text
    return project


def test_client_and_server_see_the_originals_client_view_of_the_project_in_compatibility_mode() -> None:
    fake = IdentityFake(compat=True)
    project = _configured(fake)
    for access in ("client", "server"):
        with project.client(access) as http:
            body = http.get("/api/v1/projects/current").json()
        assert body == {
            "id": project.id,
            "display_name": "Test project",
            "config": {
                "sign_up_enabled": True,
                "credential_enabled": True,
                "magic_link_enabled": True,
                "passkey_enabled": False,
                "client_team_creation_enabled": False,
                "client_user_deletion_enabled": False,
                "allow_user_api_keys": False,
                "allow_team_api_keys": False,
                # sorted, and only providers that sign in
                "enabled_oauth_providers": [{"id": "github"}, {"id": "spotify"}],
                "domains": sorted(DOMAINS, key=lambda d: d["domain"]),
            },
        }
    # outside compatibility mode: ours (with allow_localhost, in the order configured)
    ours = _configured(IdentityFake())
    with ours.client("client") as http:
        config = http.get("/api/v1/projects/current").json()["config"]
    assert config["allow_localhost"] is True
    assert config["enabled_oauth_providers"] == [{"id": "spotify"}, {"id": "github"}]
    assert config["domains"] == DOMAINS


def test_internal_projects_current_answers_the_originals_admin_view_in_compatibility_mode() -> None:
    fake = IdentityFake(compat=True)
    project = _configured(fake)
    with project.client("admin") as http:
        reply = http.get("/api/v1/internal/projects/current")
        ours = http.get("/api/v1/projects/current").json()
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body == {
        "id": project.id,
        "display_name": "Test project",
        "description": "",
        "logo_url": None,
        "logo_full_url": None,
        "logo_dark_mode_url": None,
        "logo_full_dark_mode_url": None,
        "created_at_millis": ours["created_at_millis"],
        "is_production_mode": False,
        "owner_team_id": None,
        "onboarding_status": "completed",
        "config": {
            "allow_localhost": True,
            "client_team_creation_enabled": False,
            "client_user_deletion_enabled": False,
            "sign_up_enabled": True,
            "oauth_account_merge_strategy": "link_method",
            "create_team_on_sign_up": False,
            "credential_enabled": True,
            "magic_link_enabled": True,
            "passkey_enabled": False,
            # the mock provider stands for the original's shared keys; secrets are never returned
            "oauth_providers": [
                {"id": "github", "provider_config_id": "github", "type": "shared"},
                {"id": "spotify", "provider_config_id": "spotify", "type": "standard", "client_id": "spotify-client"},
            ],
            "enabled_oauth_providers": [{"id": "github"}, {"id": "spotify"}],
            "domains": sorted(DOMAINS, key=lambda d: d["domain"]),
            "email_config": {"type": "shared"},
            "email_theme": "1df07ae6-abf3-4a40-83a5-a1a2cbe336ac",
            "team_creator_default_permissions": [{"id": "team_admin"}],
            "team_member_default_permissions": [{"id": "team_member"}],
            "user_default_permissions": [],
            "allow_user_api_keys": False,
            "allow_team_api_keys": False,
        },
    }
    assert "secret" not in reply.text
    # GET /projects/current keeps our admin view in both modes (this service's dashboard edits it)
    assert ours["config"]["team_creator_default_permissions"] == ["team_admin"]
    assert "rate_limits" in ours["config"]


def test_internal_projects_current_refuses_a_request_without_a_project_as_the_original() -> None:
    fake = IdentityFake(compat=True)
    with fake.client({"x-stack-access-type": "client"}) as http:
        reply = http.get("/api/v1/internal/projects/current")
    assert (reply.status_code, reply.headers["x-stack-known-error"]) == (400, "ACCESS_TYPE_WITHOUT_PROJECT_ID")


def test_a_projects_admin_deletes_it_with_delete_internal_projects_current_in_compatibility_mode() -> None:
    fake = IdentityFake(compat=True)
    project = fake.create_project()
    user_id = project.create_user("ada@example.com")["id"]
    with project.client("server") as http:
        refused = http.delete("/api/v1/internal/projects/current")
    assert (refused.status_code, refused.headers["x-stack-known-error"]) == (401, "INSUFFICIENT_ACCESS_TYPE")
    with project.client("admin") as http:
        deleted = http.delete("/api/v1/internal/projects/current")
        assert (deleted.status_code, deleted.json()) == (200, {"success": True})
        gone = http.get("/api/v1/projects/current")
    assert (gone.status_code, gone.json()["code"]) == (400, "CURRENT_PROJECT_NOT_FOUND")
    assert project.id not in fake.store.projects
    assert user_id not in fake.store.tenant(project.id).users
    # the internal project is the service's own: not deleted this way
    with _internal_client(fake) as http:
        kept = http.delete("/api/v1/internal/projects/current")
    assert kept.status_code == 400
    assert INTERNAL in fake.store.projects


def test_internal_projects_current_exists_only_in_compatibility_mode() -> None:
    project = IdentityFake().create_project()
    with project.client("admin") as http:
        assert http.get("/api/v1/internal/projects/current").status_code == 405
        reply = http.delete("/api/v1/internal/projects/current")
    # our own route, DELETE /internal/projects/{project_id}, takes a project id
    assert (reply.status_code, reply.headers["x-service-known-error"]) == (400, "SCHEMA_ERROR")
    assert project.id in project.fake.store.projects


def test_the_originals_admin_update_of_the_current_project_is_translated_and_answered_in_its_shape() -> None:
    # The original's SDK: `adminApp.getProject()` then `project.update({...})` sends this PATCH with the original's
    # names and shapes; the answer is its admin view again.
    fake = IdentityFake(compat=True)
    project = fake.create_project()
    update = {
        "display_name": "Renamed",
        "description": "",  # what this service always answers: accepted, nothing to store
        "is_production_mode": False,
        "config": {
            "sign_up_enabled": False,
            "magic_link_enabled": False,
            "client_team_creation_enabled": True,
            "allow_localhost": False,
            "oauth_account_merge_strategy": "raise_error",
            "domains": [{"domain": "https://app.example.com", "handler_path": "/auth/handler"}],
            "oauth_providers": [
                {"id": "github", "type": "shared"},
                {"id": "google", "type": "standard", "client_id": "google-client", "client_secret": "g-secret"},
            ],
            "email_config": {"type": "shared"},
            "team_creator_default_permissions": [{"id": "team_member"}, {"id": "team_admin"}],
            "team_member_default_permissions": [{"id": "team_member"}],
            "user_default_permissions": [],
        },
    }
    with project.client("admin") as http:
        reply = http.patch("/api/v1/internal/projects/current", json=update)
        read = http.get("/api/v1/internal/projects/current").json()
        ours = http.get("/api/v1/projects/current").json()
    assert reply.status_code == 200, reply.text
    assert reply.json() == read
    assert read["display_name"] == "Renamed"
    config = read["config"]
    assert (config["sign_up_enabled"], config["magic_link_enabled"], config["client_team_creation_enabled"]) == (
        False,
        False,
        True,
    )
    assert (config["allow_localhost"], config["oauth_account_merge_strategy"]) == (False, "raise_error")
    assert config["domains"] == [{"domain": "https://app.example.com", "handler_path": "/auth/handler"}]
    assert config["oauth_providers"] == [
        {"id": "github", "provider_config_id": "github", "type": "shared"},
        {"id": "google", "provider_config_id": "google", "type": "standard", "client_id": "google-client"},
    ]
    assert config["team_creator_default_permissions"] == [{"id": "team_admin"}, {"id": "team_member"}]
    assert "g-secret" not in reply.text
    # stored as this service's own config: one project, two views
    assert ours["config"]["team_creator_default_permissions"] == ["team_member", "team_admin"]
    assert [p["type"] for p in ours["config"]["oauth_providers"]] == ["mock", "google"]
    assert fake.store.projects[project.id].config.oauth_providers[1].client_secret == "g-secret"


def test_the_originals_admin_update_refuses_what_this_service_would_not_keep_and_changes_nothing() -> None:
    fake = IdentityFake(compat=True)
    project = fake.create_project()
    with project.client("admin") as http:
        before = http.get("/api/v1/internal/projects/current").json()
        refusals = [
            {"display_name": "Kept?", "description": "A description this service has no place for"},
            {"display_name": "Kept?", "is_production_mode": True},
            {"logo_url": "https://example.com/logo.png"},
            {"config": {"email_config": {"type": "standard", "host": "smtp.example.com"}}},
            {"config": {"oauth_providers": [{"id": "facebook", "type": "standard", "client_id": "x"}]}},
            {"config": {"team_creator_default_permissions": ["team_admin"]}},  # ours, not the original's shape
            {"config": {"rate_limits": {}}},  # a key of ours the original's body does not have
        ]
        answers = [http.patch("/api/v1/internal/projects/current", json=body) for body in refusals]
        after = http.get("/api/v1/internal/projects/current").json()
    for body, answer in zip(refusals, answers, strict=True):
        assert (answer.status_code, answer.headers.get("x-stack-known-error")) == (400, "SCHEMA_ERROR"), (
            body,
            answer.text,
        )
    assert after == before


def test_the_originals_admin_update_needs_admin_access_and_compatibility_mode() -> None:
    fake = IdentityFake(compat=True)
    project = fake.create_project()
    with project.client("server") as http:
        refused = http.patch("/api/v1/internal/projects/current", json={"display_name": "No"})
    assert (refused.status_code, refused.headers["x-stack-known-error"]) == (401, "INSUFFICIENT_ACCESS_TYPE")
    ours = IdentityFake().create_project()
    with ours.client("admin") as http:
        assert http.patch("/api/v1/internal/projects/current", json={"display_name": "No"}).status_code == 405
    assert ours.fake.store.projects[ours.id].display_name != "No"
