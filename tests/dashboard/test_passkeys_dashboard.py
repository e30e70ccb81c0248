"""Passkeys in the dashboard, in headless Chromium against a real Hypercorn on the memory store and on Redis: the
project's switch turns passkeys on; a user's passkey (registered by the software authenticator over HTTP) is
listed on their page, with its badge, and removed after a confirmation, which the API then shows."""

from __future__ import annotations

import uuid

import httpx
import pytest

from identity_testing import PasskeyAuthenticator
from tests.dashboard.conftest import Backend, Browser, Project
from tests.dashboard.test_api_keys_dashboard import _open_user
from tests.dashboard.test_dashboard_browser import connect, go

pytestmark = pytest.mark.e2e


def test_an_admin_turns_passkeys_on_and_removes_a_users_passkey(
    page: Browser, backend: Backend, project: Project
) -> None:
    page.secrets += [project.super_secret_admin_key, project.secret_server_key]
    name = f"Passkey {uuid.uuid4().hex[:8]}"
    with backend.http() as http:
        connect(page, project.id, project.super_secret_admin_key)
        go(page, "project")
        page.text_of("#project-title", project.display_name)
        assert not page.find("#config-passkey-enabled").is_selected()
        page.click("#config-passkey-enabled")
        page.click("#project-save")
        page.text_of("#project-status", "Project saved.")
        config = http.get("/api/v1/projects/current", headers=project.headers("admin")).json()["config"]
        assert config["passkey_enabled"] is True

        user_id = http.post("/api/v1/users", headers=project.headers("server"), json={"display_name": name}).json()[
            "id"
        ]
        token = http.post("/api/v1/auth/sessions", headers=project.headers("server"), json={"user_id": user_id}).json()
        authenticator = PasskeyAuthenticator("http://localhost:3000")
        headers = {**project.headers("client"), "x-service-access-token": token["access_token"]}
        with httpx.Client(base_url=backend.base_url, headers=headers, timeout=10.0) as client:
            authenticator.register(client)
        credential_id = authenticator.credentials[0].id

        _open_user(page, user_id, name)
        row = f'#passkeys-table tr[data-passkey-id="{credential_id}"]'
        page.text_of(row, "localhost")
        page.text_of("#user-summary", "passkey")
        page.click(page.find(f"{row} .remove-passkey"))
        page.text_of("#confirm-dialog", "Remove this user's passkey?")
        page.click("#confirm-ok")
        page.text_of("#passkeys-status", "Passkey removed.")
        page.text_of("#passkeys-body", "No passkey.")
        user = http.get(f"/api/v1/users/{user_id}", headers=project.headers("server")).json()
        assert user["passkey_auth_enabled"] is False
        listed = http.get(f"/api/v1/users/{user_id}/passkeys", headers=project.headers("server")).json()
        assert listed["items"] == []
