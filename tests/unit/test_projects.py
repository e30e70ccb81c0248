"""Projects: the current project by access type, its configuration, and the internal project's management API."""

from __future__ import annotations

import pytest

from tests.support import PROJECT_ID, Harness, admin_headers, client_headers, internal_headers, server_headers

DEFAULT_CONFIG = {
    "sign_up_enabled": True,
    "magic_link_enabled": True,
    "credential_enabled": True,
    "allow_localhost": True,
    "domains": [],
    "client_team_creation_enabled": False,
    "client_user_deletion_enabled": False,
    "create_team_on_sign_up": False,
    "require_email_verification": False,
    "require_publishable_client_key": False,
    "team_creator_default_permissions": ["team_admin"],
    "team_member_default_permissions": ["team_member"],
}
ADMIN_ONLY_KEYS = {
    "create_team_on_sign_up",
    "require_email_verification",
    "require_publishable_client_key",
    "team_creator_default_permissions",
    "team_member_default_permissions",
}


def test_admin_sees_the_whole_config_with_its_defaults() -> None:
    project = Harness().request("GET", "/api/v1/projects/current", admin_headers()).json
    assert project["id"] == PROJECT_ID
    assert {key: project["config"][key] for key in DEFAULT_CONFIG} == DEFAULT_CONFIG
    assert isinstance(project["created_at_millis"], int)


@pytest.mark.parametrize("headers", [client_headers(), server_headers()], ids=["client", "server"])
def test_client_and_server_see_only_the_public_config(headers: dict[str, str]) -> None:
    project = Harness().request("GET", "/api/v1/projects/current", headers).json
    assert set(project) == {"id", "display_name", "config"}
    assert not ADMIN_ONLY_KEYS & set(project["config"])
    assert project["config"]["sign_up_enabled"] is True
    assert project["config"]["passkey_enabled"] is False
    assert project["config"]["enabled_oauth_providers"] == []


def test_no_response_carries_a_secret() -> None:
    harness = Harness()
    secret = harness.project().signing_key
    for headers in (client_headers(), server_headers(), admin_headers()):
        body = harness.request("GET", "/api/v1/projects/current", headers).body
        assert secret.encode() not in body
        assert b"hash" not in body


def test_admin_updates_name_and_any_subset_of_the_config() -> None:
    harness = Harness()
    reply = harness.request(
        "PATCH",
        "/api/v1/projects/current",
        admin_headers(),
        json={
            "display_name": "Shop",
            "config": {"sign_up_enabled": False, "domains": [{"domain": "https://shop.example.com/"}]},
        },
    )
    assert reply.status == 200
    config = reply.json["config"]
    assert reply.json["display_name"] == "Shop"
    assert config["sign_up_enabled"] is False
    assert config["domains"] == [{"domain": "https://shop.example.com", "handler_path": "/handler"}]
    assert config["magic_link_enabled"] is True  # untouched keys keep their value
    again = harness.request("GET", "/api/v1/projects/current", client_headers()).json
    assert again["display_name"] == "Shop"
    assert again["config"]["sign_up_enabled"] is False


@pytest.mark.parametrize(
    ("body", "line"),
    [
        ({"config": {"sign_up_enabled": None}}, "body.config.sign_up_enabled cannot be null"),
        ({"config": {"sign_up_enabled": "yes"}}, "body.config.sign_up_enabled must be a boolean"),
        ({"config": {"domains": [{"domain": "ftp://x"}]}}, "body.config.domains[0].domain is not a valid URL"),
        (
            {"config": {"domains": [{"domain": "https://x", "handler_path": "h"}]}},
            "body.config.domains[0].handler_path must start with /",
        ),
        ({"config": {"teams": 1}}, "body.config contains unknown properties: teams"),
        ({"display_name": ""}, "body.display_name must be at least 1 characters"),
        ({"display_name": None}, "body.display_name cannot be null"),
        ([], "body must be an object"),
    ],
)
def test_invalid_config_updates_are_schema_errors_that_change_nothing(body: object, line: str) -> None:
    harness = Harness()
    before = harness.project()
    reply = harness.request("PATCH", "/api/v1/projects/current", admin_headers(), json=body)
    assert (reply.status, reply.known_error) == (400, "SCHEMA_ERROR")
    assert f"  - {line}" in reply.json["details"]["message"].splitlines()
    assert harness.project() == before


def test_internal_project_creates_lists_and_deletes_projects() -> None:
    harness = Harness()
    created = harness.request(
        "POST",
        "/api/v1/internal/projects",
        internal_headers(),
        json={"display_name": "Acme", "config": {"sign_up_enabled": False}},
    )
    assert created.status == 201
    project = created.json
    assert project["publishable_client_key"].startswith("pck_")
    assert project["secret_server_key"].startswith("ssk_")
    assert project["super_secret_admin_key"].startswith("sak_")
    assert project["config"]["sign_up_enabled"] is False

    headers = {
        **server_headers(),
        "x-service-project-id": project["id"],
        "x-service-secret-server-key": project["secret_server_key"],
    }
    assert harness.request("GET", "/api/v1/projects/current", headers).json["display_name"] == "Acme"

    listed = harness.request("GET", "/api/v1/internal/projects", internal_headers())
    assert [p["id"] for p in listed.json["items"]] == [PROJECT_ID, project["id"]]
    # keys are shown once, at creation, and never again
    for name in ("publishable_client_key", "secret_server_key", "super_secret_admin_key"):
        assert project[name].encode() not in listed.body
        assert f'"{name}"'.encode() not in listed.body

    deleted = harness.request("DELETE", f"/api/v1/internal/projects/{project['id']}", internal_headers())
    assert (deleted.status, deleted.json) == (200, {"success": True})
    gone = harness.request("GET", "/api/v1/projects/current", headers)
    assert (gone.status, gone.known_error) == (400, "CURRENT_PROJECT_NOT_FOUND")
    again = harness.request("DELETE", f"/api/v1/internal/projects/{project['id']}", internal_headers())
    assert (again.status, again.known_error) == (404, "PROJECT_NOT_FOUND")


def test_a_created_project_needs_a_display_name() -> None:
    reply = Harness().request("POST", "/api/v1/internal/projects", internal_headers(), json={})
    assert reply.json["details"]["message"].endswith("  - body.display_name must be defined")


def test_bootstrap_keeps_config_edits_and_follows_configured_keys() -> None:
    import dataclasses

    from identity_hosting.settings import DEV_INTERNAL_ADMIN_KEY, DEV_PROJECT
    from identity_proto import IssuedKeys, run

    harness = Harness()
    harness.request("PATCH", "/api/v1/projects/current", admin_headers(), json={"config": {"sign_up_enabled": False}})
    signing_key = harness.project().signing_key
    rotated = IssuedKeys("pck_rotated_key_000000000", "ssk_rotated_key_000000000", "sak_rotated_key_000000000")
    seed = dataclasses.replace(DEV_PROJECT, keys=rotated)
    run(
        harness.service.bootstrap(seed, DEV_INTERNAL_ADMIN_KEY, now_ms=harness.now_ms, entropy=harness.entropy),
        harness.store,
    )
    assert harness.project().config.sign_up_enabled is False
    assert harness.project().signing_key == signing_key
    old = harness.request("GET", "/api/v1/projects/current", server_headers())
    assert old.known_error == "INVALID_SECRET_SERVER_KEY"
    new = harness.request(
        "GET", "/api/v1/projects/current", server_headers(**{"x-service-secret-server-key": rotated.secret_server_key})
    )
    assert new.status == 200


def test_preflight_answers_cors() -> None:
    reply = Harness().request("OPTIONS", "/api/v1/projects/current")
    assert reply.status == 200
    assert reply.headers["access-control-allow-origin"] == "*"
    assert reply.headers["access-control-allow-methods"] == "GET, PATCH"


def test_every_response_carries_the_security_headers() -> None:
    harness = Harness()
    for reply in (
        harness.request("GET", "/api/v1"),
        harness.request("GET", "/api/v1/projects/current"),
        harness.request("GET", "/x"),
    ):
        assert reply.headers["cache-control"] == "no-store, max-age=0"
        assert reply.headers["x-content-type-options"] == "nosniff"
        assert len(reply.headers["x-service-request-id"]) == 16


def test_cors_headers_answer_requests_with_an_origin() -> None:
    harness = Harness()
    origin = {"origin": "https://app.example.com"}
    for reply in (
        harness.request("GET", "/api/v1", origin),
        harness.request("GET", "/api/v1/projects/current", {**server_headers(), **origin}),
        harness.request("GET", "/api/v1/users/me", {**client_headers(), **origin}),  # an error: CORS all the same
    ):
        assert reply.headers["access-control-allow-origin"] == "*"
        assert "x-service-known-error" in reply.headers["access-control-expose-headers"]
    plain = harness.request("GET", "/api/v1/projects/current", server_headers())
    assert plain.status == 200
    assert "access-control-allow-origin" not in plain.headers


def test_json_nested_too_deeply_is_refused() -> None:
    from identity_proto.service import MAX_JSON_DEPTH

    h = Harness()
    ok = {"config": {}}
    deep: object = 1
    for _ in range(MAX_JSON_DEPTH + 1):
        deep = [deep]
    assert h.request("PATCH", "/api/v1/projects/current", admin_headers(), json=ok).status == 200
    reply = h.request("PATCH", "/api/v1/projects/current", admin_headers(), json={"display_name": "x", "config": deep})
    assert (reply.status, reply.known_error) == (400, "BODY_PARSING_ERROR")
    assert "nested deeper than 32 levels" in reply.json["error"]
