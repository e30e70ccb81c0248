"""OAuth in the dashboard, in headless Chromium against a real Hypercorn on the memory store and on Redis: an admin
adds a provider with a client secret (shown only as "set, ending in xxxx", never on the page), edits it without
retyping the secret (kept), sets the merge strategy and removes the provider; and a user's linked accounts are
listed, their sign-in and connected accounts turned off, and removed."""

from __future__ import annotations

import uuid

import pytest

from tests.dashboard.conftest import Backend, Browser, Project
from tests.dashboard.test_api_keys_dashboard import _open_user
from tests.dashboard.test_dashboard_browser import connect, go, shot

pytestmark = pytest.mark.e2e

SECRET = "dashboard-client-secret-never-shown-7c2d"


def _providers(backend: Backend, project: Project) -> list[dict[str, object]]:
    with backend.http() as http:
        reply = http.get("/api/v1/projects/current", headers=project.headers("admin"))
    assert SECRET not in reply.text
    providers: list[dict[str, object]] = reply.json()["config"]["oauth_providers"]
    return providers


def test_an_admin_configures_a_provider_whose_secret_is_never_shown(
    page: Browser, backend: Backend, project: Project
) -> None:
    page.secrets += [project.super_secret_admin_key, SECRET]
    connect(page, project.id, project.super_secret_admin_key)
    page.find("#users-view")
    go(page, "project")
    page.text_of("#oauth-providers-list", "No OAuth providers.")

    page.click("#oauth-add-provider")
    page.type_into("#oauth-id", "github")
    page.find('#oauth-type option[value="github"]').click()
    page.type_into("#oauth-client-id", "Iv1.dashboard")
    page.type_into("#oauth-client-secret", SECRET)
    page.click("#oauth-provider-save")
    page.text_of("#oauth-status", "Added github.")
    row = '#oauth-providers-table tr[data-provider-id="github"]'
    page.text_of(f"{row} .oauth-secret", f"set, ending in {SECRET[-4:]}")
    assert SECRET not in page.driver.page_source
    shot(page, backend, "oauth-providers")

    # Edited without retyping the secret: the stored secret stays.
    page.click(page.find(f"{row} .edit-provider"))
    page.find("#oauth-allow-connected").click()
    page.click("#oauth-provider-save")
    page.text_of("#oauth-status", "Saved github.")
    (provider,) = _providers(backend, project)
    assert provider["allow_connected_accounts"] is False
    assert (provider["client_secret_set"], provider["client_secret_last_four"]) == (True, SECRET[-4:])

    # A refusal from the service is shown, and nothing changes.
    page.click("#oauth-add-provider")
    page.type_into("#oauth-id", "corp")
    page.find('#oauth-type option[value="oidc"]').click()
    page.type_into("#oauth-client-id", "corp-client")
    page.type_into("#oauth-client-secret", "corp-secret-0000")
    page.click("#oauth-provider-save")
    page.text_of("#oauth-status .state-error", "issuer_url must be defined for type oidc")
    page.click("#oauth-provider-cancel")
    assert [p["id"] for p in _providers(backend, project)] == ["github"]

    page.find('#oauth-merge-strategy option[value="raise_error"]').click()
    page.click("#oauth-merge-save")
    page.text_of("#oauth-status", "Merge strategy saved.")
    with backend.http() as http:
        config = http.get("/api/v1/projects/current", headers=project.headers("admin")).json()["config"]
    assert config["oauth_account_merge_strategy"] == "raise_error"

    page.click(page.find(f"{row} .remove-provider"))
    page.text_of("#confirm-dialog", "Remove github?")
    page.click("#confirm-ok")
    page.text_of("#oauth-status", "Removed github.")
    page.text_of("#oauth-providers-list", "No OAuth providers.")
    assert _providers(backend, project) == []
    assert SECRET not in page.driver.page_source


def test_an_admin_manages_a_users_linked_accounts(page: Browser, backend: Backend, project: Project) -> None:
    page.secrets += [project.super_secret_admin_key, project.secret_server_key]
    name = f"Linked {uuid.uuid4().hex[:8]}"
    providers = [{"id": "github", "type": "github", "client_id": "Iv1.x", "client_secret": "linked-secret-0001"}]
    with backend.http() as http:
        configured = http.patch(
            "/api/v1/projects/current",
            headers=project.headers("admin"),
            json={"config": {"oauth_providers": providers}},
        )
        assert configured.status_code == 200, configured.text
        user_id = http.post("/api/v1/users", headers=project.headers("server"), json={"display_name": name}).json()[
            "id"
        ]
        linked = http.post(
            "/api/v1/oauth-providers",
            headers=project.headers("server"),
            json={
                "user_id": user_id,
                "provider_config_id": "github",
                "account_id": "gh-77",
                "email": "octo@example.com",
                "allow_sign_in": True,
                "allow_connected_accounts": True,
            },
        )
        assert linked.status_code == 201, linked.text
        row_id = linked.json()["id"]

        connect(page, project.id, project.super_secret_admin_key)
        page.find("#users-table")
        _open_user(page, user_id, name)
        row = f'#linked-accounts-table tr[data-account-id="{row_id}"]'
        page.text_of(row, "gh-77")
        page.text_of(row, "octo@example.com")

        page.click(page.find(f"{row} .toggle-sign-in"))
        page.text_of("#linked-accounts-status", "Sign-in turned off.")
        page.text_of(row, "no sign-in")
        page.click(page.find(f"{row} .toggle-connected"))
        page.text_of("#linked-accounts-status", "Connected accounts turned off.")
        read = http.get(f"/api/v1/oauth-providers/{user_id}/{row_id}", headers=project.headers("server")).json()
        assert (read["allow_sign_in"], read["allow_connected_accounts"]) == (False, False)
        shot(page, backend, "linked-accounts", full_page=False)

        page.click(page.find(f"{row} .remove-linked-account"))
        page.text_of("#confirm-dialog", "Remove this linked account?")
        page.click("#confirm-ok")
        page.text_of("#linked-accounts-status", "Linked account removed.")
        page.text_of("#linked-accounts-body", "No linked accounts.")
        listed = http.get("/api/v1/oauth-providers", headers=project.headers("server"), params={"user_id": user_id})
        assert listed.json()["items"] == []
