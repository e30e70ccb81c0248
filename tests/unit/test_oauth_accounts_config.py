"""OAuth provider configuration (admin `PATCH /projects/current` `config.oauth_providers` and
`config.oauth_account_merge_strategy`): what is accepted, what is refused (SCHEMA_ERROR, nothing changed), the
write-only client secret, and that no response of any access type ever carries a configured secret."""

from __future__ import annotations

from typing import Any

import pytest

from identity_proto import Service, ServiceOptions
from tests.support import Harness, admin_headers, client_headers, internal_headers, server_headers

SECRET = "gh-secret-do-not-show-3f9a1c7e"
GITHUB = {"id": "github", "type": "github", "client_id": "Iv1.abc", "client_secret": SECRET}


def patch(harness: Harness, config: dict[str, Any]) -> Any:
    return harness.request("PATCH", "/api/v1/projects/current", admin_headers(), json={"config": config})


def stored_providers(harness: Harness) -> tuple[Any, ...]:
    return harness.project().config.oauth_providers


def dev_harness() -> Harness:
    return Harness(service=Service(ServiceOptions(password_rounds=4, dev_mode=True)))


def test_an_admin_configures_a_provider_and_reads_it_back_without_its_secret() -> None:
    harness = Harness()
    reply = patch(harness, {"oauth_providers": [GITHUB], "oauth_account_merge_strategy": "raise_error"})
    assert reply.status == 200, reply.body
    (provider,) = reply.json["config"]["oauth_providers"]
    assert provider == {
        "id": "github",
        "type": "github",
        "client_id": "Iv1.abc",
        "client_secret_set": True,
        "client_secret_last_four": SECRET[-4:],
        "issuer_url": None,
        "microsoft_tenant_id": None,
        "allow_sign_in": True,
        "allow_connected_accounts": True,
    }
    assert reply.json["config"]["oauth_account_merge_strategy"] == "raise_error"
    assert stored_providers(harness)[0].client_secret == SECRET
    public = harness.request("GET", "/api/v1/projects/current", client_headers()).json["config"]
    assert public["enabled_oauth_providers"] == [{"id": "github"}]


def test_compat_mode_names_each_providers_id_as_the_originals_provider_config_id() -> None:
    """The original's project config lists providers as `{id, provider_config_id, ...}`, and apps (its e2e tests)
    take `provider_config_id` from there for `POST /oauth-providers`."""
    harness = Harness(service=Service(ServiceOptions(password_rounds=4, header_prefixes=("x-service-", "x-stack-"))))
    created = harness.request(
        "POST",
        "/api/v1/internal/projects",
        internal_headers(),
        json={"display_name": "Acme", "config": {"oauth_providers": [GITHUB]}},
    ).json
    patched = patch(harness, {"oauth_providers": [GITHUB]}).json
    read = harness.request("GET", "/api/v1/projects/current", admin_headers()).json
    listed = harness.request("GET", "/api/v1/internal/projects", internal_headers()).json["items"]
    for project in (created, patched, read, *listed):
        for provider in project["config"]["oauth_providers"]:
            assert provider["provider_config_id"] == provider["id"] == "github"
    assert all(
        "provider_config_id" not in p
        for p in patch(Harness(), {"oauth_providers": [GITHUB]}).json["config"]["oauth_providers"]
    )


def test_a_provider_without_sign_in_is_not_among_the_enabled_ones() -> None:
    harness = Harness()
    assert patch(harness, {"oauth_providers": [{**GITHUB, "allow_sign_in": False}]}).status == 200
    public = harness.request("GET", "/api/v1/projects/current", client_headers()).json["config"]
    assert public["enabled_oauth_providers"] == []


def test_an_update_that_leaves_the_secret_out_keeps_the_stored_one() -> None:
    harness = Harness()
    assert patch(harness, {"oauth_providers": [GITHUB]}).status == 200
    without_secret = {k: v for k, v in GITHUB.items() if k != "client_secret"}
    reply = patch(harness, {"oauth_providers": [{**without_secret, "allow_connected_accounts": False}]})
    assert reply.status == 200, reply.body
    (provider,) = stored_providers(harness)
    assert provider.client_secret == SECRET
    assert provider.allow_connected_accounts is False


def test_a_null_secret_is_a_secret_left_out() -> None:
    harness = Harness()
    assert patch(harness, {"oauth_providers": [GITHUB]}).status == 200
    assert patch(harness, {"oauth_providers": [{**GITHUB, "client_secret": None}]}).status == 200
    assert stored_providers(harness)[0].client_secret == SECRET


def test_a_new_secret_replaces_the_stored_one() -> None:
    harness = Harness()
    assert patch(harness, {"oauth_providers": [GITHUB]}).status == 200
    assert patch(harness, {"oauth_providers": [{**GITHUB, "client_secret": "another-secret-1234"}]}).status == 200
    assert stored_providers(harness)[0].client_secret == "another-secret-1234"


def test_a_new_client_id_needs_its_own_secret() -> None:
    harness = Harness()
    assert patch(harness, {"oauth_providers": [GITHUB]}).status == 200
    reply = patch(harness, {"oauth_providers": [{"id": "github", "type": "github", "client_id": "Iv1.new"}]})
    assert reply.status == 400
    assert reply.known_error == "SCHEMA_ERROR"
    assert "body.config.oauth_providers[0].client_secret must be defined for type github" in reply.json["error"]
    assert stored_providers(harness)[0].client_id == "Iv1.abc"


def test_removing_every_provider_forgets_their_secrets() -> None:
    harness = Harness()
    assert patch(harness, {"oauth_providers": [GITHUB]}).status == 200
    assert patch(harness, {"oauth_providers": []}).status == 200
    assert stored_providers(harness) == ()
    reply = patch(harness, {"oauth_providers": [{"id": "github", "type": "github", "client_id": "Iv1.abc"}]})
    assert reply.status == 400


@pytest.mark.parametrize(
    ("providers", "problem"),
    [
        ([{"id": "Git Hub", "type": "github", "client_id": "a", "client_secret": "b"}], "[0].id must be 1 to 64"),
        ([{"id": "x" * 65, "type": "github", "client_id": "a", "client_secret": "b"}], "[0].id must be 1 to 64"),
        ([{"id": "fb", "type": "facebook", "client_id": "a", "client_secret": "b"}], "[0].type must be one of"),
        ([GITHUB, {**GITHUB, "client_id": "other"}], "has the provider id 'github' more than once"),
        ([{"id": "github", "type": "github", "client_secret": "b"}], "[0].client_id must be defined for type github"),
        ([{"id": "github", "type": "github", "client_id": "a"}], "[0].client_secret must be defined for type github"),
        ([{"id": "corp", "type": "oidc", "client_id": "a", "client_secret": "b"}], "[0].issuer_url must be defined"),
        (
            [{"id": "corp", "type": "oidc", "client_id": "a", "client_secret": "b", "issuer_url": "not a url"}],
            "[0].issuer_url is not a valid URL",
        ),
        (
            [{"id": "corp", "type": "oidc", "client_id": "a", "client_secret": "b", "issuer_url": "http://idp.test"}],
            "[0].issuer_url must use https",
        ),
        (
            [
                {
                    "id": "corp",
                    "type": "oidc",
                    "client_id": "a",
                    "client_secret": "b",
                    "issuer_url": "http://localhost:9",
                }
            ],
            "[0].issuer_url must use https",
        ),
        ([{**GITHUB, "issuer_url": "https://idp.example.com"}], "[0].issuer_url is only for type oidc"),
        ([{"id": "dev", "type": "mock"}], "[0] is served by the mock provider"),
        ([{"id": "github", "type": "github", "client_id": "MOCK", "client_secret": "MOCK"}], "served by the mock"),
        ([{**GITHUB, "colour": "blue"}], "contains unknown properties: colour"),
    ],
)
def test_a_bad_provider_is_a_schema_error_and_changes_nothing(providers: list[Any], problem: str) -> None:
    harness = Harness()
    assert patch(harness, {"oauth_providers": [GITHUB]}).status == 200
    reply = patch(harness, {"oauth_providers": providers, "sign_up_enabled": False})
    assert reply.status == 400, reply.body
    assert reply.known_error == "SCHEMA_ERROR"
    assert problem in reply.json["error"]
    assert [p.client_id for p in stored_providers(harness)] == ["Iv1.abc"]
    assert harness.project().config.sign_up_enabled is True


def test_an_unknown_merge_strategy_is_a_schema_error() -> None:
    harness = Harness()
    reply = patch(harness, {"oauth_account_merge_strategy": "merge_everything"})
    assert reply.status == 400
    assert "must be one of the following values: link_method, raise_error, allow_duplicates" in reply.json["error"]
    assert harness.project().config.oauth_account_merge_strategy == "link_method"


def test_dev_mode_accepts_the_mock_provider_and_local_http_issuers() -> None:
    harness = dev_harness()
    providers = [
        {"id": "mock", "type": "mock"},
        {"id": "github", "type": "github", "client_id": "MOCK"},
        {"id": "local", "type": "oidc", "client_id": "a", "client_secret": "b", "issuer_url": "http://localhost:9"},
    ]
    reply = patch(harness, {"oauth_providers": providers})
    assert reply.status == 200, reply.body
    assert [p.id for p in stored_providers(harness)] == ["mock", "github", "local"]
    remote = {"id": "r", "type": "oidc", "client_id": "a", "client_secret": "b", "issuer_url": "http://idp.test"}
    assert patch(harness, {"oauth_providers": [remote]}).status == 400


def test_a_new_project_is_checked_as_an_update_is() -> None:
    harness = Harness()
    bad = {"display_name": "p", "config": {"oauth_providers": [{"id": "dev", "type": "mock"}]}}
    assert harness.request("POST", "/api/v1/internal/projects", internal_headers(), json=bad).status == 400
    good = {"display_name": "p", "config": {"oauth_providers": [GITHUB]}}
    created = harness.request("POST", "/api/v1/internal/projects", internal_headers(), json=good)
    assert created.status == 201, created.body
    assert SECRET.encode() not in created.body
    assert created.json["config"]["oauth_providers"][0]["client_secret_set"] is True


def test_no_response_of_any_access_type_carries_a_configured_secret() -> None:
    harness = Harness()
    replies = [patch(harness, {"oauth_providers": [GITHUB]})]
    for headers in (client_headers(), server_headers(), admin_headers()):
        replies.append(harness.request("GET", "/api/v1/projects/current", headers))
    replies.append(harness.request("GET", "/api/v1/internal/projects", internal_headers()))
    replies.append(patch(harness, {"oauth_providers": [{**GITHUB, "client_secret": None}]}))
    replies.append(patch(harness, {"oauth_providers": [{**GITHUB, "client_id": "new"}, GITHUB]}))  # an error
    for reply in replies:
        assert SECRET.encode() not in reply.body
        assert SECRET[:-4].encode() not in reply.body
    assert replies[0].status == 200
