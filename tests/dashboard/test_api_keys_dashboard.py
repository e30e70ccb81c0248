"""The dashboard's API keys card, in headless Chromium against a real Hypercorn on the memory store and on Redis: a
user's keys listed newest first by their last four characters, one revoked after a confirmation (and then refused
by `check`), and the card's note while the project has user API keys switched off (without asking for them)."""

from __future__ import annotations

import uuid

import httpx
import pytest

from tests.dashboard.conftest import Backend, Browser, Project
from tests.dashboard.test_dashboard_browser import connect, go, user_rows

pytestmark = pytest.mark.e2e


def _open_user(page: Browser, user_id: str, name: str) -> None:
    go(page, "users")
    page.type_into("#user-search", name)
    page.click("#user-search-submit")
    page.until(lambda: user_rows(page) == [user_id], "the user alone in the search results")
    page.click(f'#users-table tr[data-user-id="{user_id}"] a.row-link')


def _key(http: httpx.Client, project: Project, user_id: str, description: str) -> dict[str, str]:
    created = http.post(
        "/api/v1/user-api-keys",
        headers=project.headers("server"),
        json={"user_id": user_id, "description": description, "expires_at_millis": None},
    )
    assert created.status_code == 200, created.text
    return dict(created.json())


def test_an_admin_sees_a_users_api_keys_and_revokes_one(page: Browser, backend: Backend, project: Project) -> None:
    page.secrets += [project.super_secret_admin_key, project.secret_server_key]
    name = f"Keyholder {uuid.uuid4().hex[:8]}"
    with backend.http() as http:
        user_id = http.post("/api/v1/users", headers=project.headers("server"), json={"display_name": name}).json()[
            "id"
        ]
        connect(page, project.id, project.super_secret_admin_key)
        page.find("#users-table")

        _open_user(page, user_id, name)
        page.text_of("#api-keys-body .state-empty", "User API keys are off for this project")
        # Off: the page never asks for the keys (the service would refuse it, a 400 in the console).
        page.text_of("#user-sessions", "Sessions")
        page.drain_logs()
        assert [r["url"] for r in page.requests if "/user-api-keys" in r["url"]] == []
        assert not [line for line in page.console if "status of 400" in str(line.get("message", ""))]

        switched = http.patch(
            "/api/v1/projects/current",
            headers=project.headers("admin"),
            json={"config": {"allow_user_api_keys": True}},
        )
        assert switched.status_code == 200
        old, new = _key(http, project, user_id, "Old script"), _key(http, project, user_id, "New script")
        page.secrets += [old["value"], new["value"]]
        _open_user(page, user_id, name)
        page.until(lambda: len(page.find_all("#api-keys-table tbody tr")) == 2, "two keys")
        rows = page.find_all("#api-keys-table tbody tr")
        assert [row.get_attribute("data-api-key-id") for row in rows] == [new["id"], old["id"]]
        assert f"sk_…{old['value'][-4:]}" in rows[1].text
        assert old["value"] not in page.page_text()

        page.click(rows[1].find_element("css selector", ".revoke-api-key"))
        page.text_of("#confirm-dialog", "Revoke this API key?")
        page.click("#confirm-ok")
        page.text_of("#api-keys-status", "API key revoked.")
        page.text_of(f'#api-keys-table tr[data-api-key-id="{old["id"]}"]', "revoked")
        assert not page.find_all(f'#api-keys-table tr[data-api-key-id="{old["id"]}"] .revoke-api-key')
        checks = [
            http.post("/api/v1/user-api-keys/check", headers=project.headers("server"), json={"api_key": key["value"]})
            for key in (old, new)
        ]
        assert [(c.status_code, c.headers.get("x-service-known-error")) for c in checks] == [
            (401, "API_KEY_REVOKED"),
            (200, None),
        ]
