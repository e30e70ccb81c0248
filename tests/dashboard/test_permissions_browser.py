"""The project's permission definitions in the dashboard, in headless Chromium against a real Hypercorn on the
memory store and on Redis: an admin defines, renames and deletes permissions, and the API agrees."""

from __future__ import annotations

import pytest

from tests.dashboard.conftest import Backend, Browser, Project
from tests.dashboard.test_dashboard_browser import connect, go, shot

pytestmark = pytest.mark.e2e


def test_an_admin_defines_renames_and_deletes_permissions(page: Browser, backend: Backend, project: Project) -> None:
    connect(page, project.id, project.super_secret_admin_key)
    page.find("#users-view")
    go(page, "project")
    page.text_of("#permission-definitions-results", "System permissions")
    page.text_of("#team-definitions-table", "team_admin")  # built in
    page.text_of("#permission-definitions-results", "No project permissions defined.")

    page.find('#permission-scope option[value="project"]').click()
    page.type_into("#permission-id", "read_reports")
    page.type_into("#permission-description", "Read the reports")
    page.click("#permission-save")
    page.text_of("#permission-status", "Created read_reports.")
    page.find('#permission-scope option[value="project"]').click()
    page.type_into("#permission-id", "manage_reports")
    page.type_into("#permission-contained", "read_reports")
    page.click("#permission-save")
    page.text_of("#project-definitions-table", "manage_reports")

    # A contained id that is not defined: the service's known error, nothing stored.
    page.find('#permission-scope option[value="project"]').click()
    page.type_into("#permission-id", "broken")
    page.type_into("#permission-contained", "ghost")
    page.click("#permission-save")
    page.text_of("#permission-status .state-error", "CONTAINED_PERMISSION_NOT_FOUND")

    # Renamed: the definition containing it follows.
    page.find('#permission-scope option[value="project"]').click()
    page.type_into("#permission-id", "read_reports")
    page.type_into("#permission-new-id", "reader")
    page.type_into("#permission-description", "")
    page.type_into("#permission-contained", "")
    page.click("#permission-save")
    page.text_of("#permission-status", "Saved read_reports as reader.")
    shot(page, backend, "permissions")
    with backend.http() as http:
        listed = http.get("/api/v1/project-permission-definitions", headers=project.headers("admin")).json()["items"]
    assert listed == [
        {"id": "manage_reports", "contained_permission_ids": ["reader"]},
        {"id": "reader", "contained_permission_ids": []},
    ]

    # Deleted after a confirmation.
    page.click('#project-definitions-table tr[data-permission-id="reader"] button')
    page.text_of("#confirm-dialog", "Delete reader?")
    page.click("#confirm-ok")
    page.text_of("#permission-status", "Deleted reader.")
    with backend.http() as http:
        listed = http.get("/api/v1/project-permission-definitions", headers=project.headers("admin")).json()["items"]
    assert listed == [{"id": "manage_reports", "contained_permission_ids": []}]
