"""The user view's e-mail addresses and project permissions cards, in headless Chromium against a real Hypercorn on
the memory store and on Redis: a second address listed, verified and made primary (the user's primary e-mail
follows), then the old one removed after a confirmation; a project permission granted from the card, its contained
permission shown, then revoked."""

from __future__ import annotations

import uuid

import pytest

from tests.dashboard.conftest import Backend, Browser, Project
from tests.dashboard.test_api_keys_dashboard import _open_user
from tests.dashboard.test_dashboard_browser import connect

pytestmark = pytest.mark.e2e


def test_an_admin_manages_a_users_addresses(page: Browser, backend: Backend, project: Project) -> None:
    page.secrets += [project.super_secret_admin_key, project.secret_server_key]
    name = f"Addressee {uuid.uuid4().hex[:8]}"
    first, second = f"first-{uuid.uuid4().hex[:8]}@example.com", f"second-{uuid.uuid4().hex[:8]}@example.com"
    with backend.http() as http:
        user_id = http.post(
            "/api/v1/users",
            headers=project.headers("server"),
            json={"display_name": name, "primary_email": first, "primary_email_verified": True},
        ).json()["id"]
        added = http.post(
            "/api/v1/contact-channels",
            headers=project.headers("server"),
            json={"user_id": user_id, "type": "email", "value": second, "used_for_auth": False},
        )
        assert added.status_code == 201, added.text
        channel_id = added.json()["id"]
        connect(page, project.id, project.super_secret_admin_key)
        page.find("#users-table")
        _open_user(page, user_id, name)
        page.until(lambda: len(page.find_all("#channels-table tbody tr")) == 2, "two addresses")
        row = f'#channels-table tr[data-channel-id="{channel_id}"]'
        page.text_of(row, "unverified")

        page.click(page.find(f"{row} .verify-channel"))
        page.text_of("#channels-status", "Address marked verified.")
        page.click(page.find(f"{row} .make-primary"))
        page.text_of("#channels-status", "Primary e-mail changed.")
        page.text_of(row, "primary")
        user = http.get(f"/api/v1/users/{user_id}", headers=project.headers("server")).json()
        assert (user["primary_email"], user["primary_email_verified"]) == (second, True)

        old_row = next(
            r for r in page.find_all("#channels-table tbody tr") if r.get_attribute("data-channel-id") != channel_id
        )
        page.click(old_row.find_element("css selector", ".remove-channel"))
        page.text_of("#confirm-dialog", "Remove this address?")
        page.click("#confirm-ok")
        page.text_of("#channels-status", "Address removed.")
        page.until(lambda: len(page.find_all("#channels-table tbody tr")) == 1, "one address left")
        listed = http.get("/api/v1/contact-channels", headers=project.headers("server"), params={"user_id": user_id})
        assert [c["value"] for c in listed.json()["items"]] == [second]


def test_an_admin_grants_and_revokes_a_project_permission(page: Browser, backend: Backend, project: Project) -> None:
    page.secrets += [project.super_secret_admin_key, project.secret_server_key]
    name = f"Permitted {uuid.uuid4().hex[:8]}"
    with backend.http() as http:
        for body in ({"id": "read_reports"}, {"id": "manage_reports", "contained_permission_ids": ["read_reports"]}):
            defined = http.post("/api/v1/project-permission-definitions", headers=project.headers("admin"), json=body)
            assert defined.status_code == 201, defined.text
        user_id = http.post("/api/v1/users", headers=project.headers("server"), json={"display_name": name}).json()[
            "id"
        ]
        connect(page, project.id, project.super_secret_admin_key)
        page.find("#users-table")
        _open_user(page, user_id, name)
        page.text_of("#project-permissions-body .state-empty", "No project permissions.")

        page.type_into("#grant-permission-id", "manage_reports")
        page.click("#grant-permission-submit")
        page.text_of("#project-permissions-status", "Granted manage_reports.")
        page.text_of('#project-permissions-table tr[data-permission-id="read_reports"]', "contained")
        page.text_of('#project-permissions-table tr[data-permission-id="manage_reports"]', "granted")
        held = http.get("/api/v1/project-permissions", headers=project.headers("server"), params={"user_id": user_id})
        assert [p["id"] for p in held.json()["items"]] == ["manage_reports"]

        page.click(page.find('#project-permissions-table tr[data-permission-id="manage_reports"] .revoke-permission'))
        page.text_of("#project-permissions-status", "Revoked manage_reports.")
        page.text_of("#project-permissions-body .state-empty", "No project permissions.")
        held = http.get("/api/v1/project-permissions", headers=project.headers("server"), params={"user_id": user_id})
        assert held.json()["items"] == []
