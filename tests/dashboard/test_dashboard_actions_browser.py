"""The dashboard's actions, in headless Chromium against a real Hypercorn on the memory store and on Redis: an admin
creates a user, sets their password, mails them a reset link and a sign-in code and impersonates them; creates,
renames and deletes a team, adds and removes members, grants and revokes their team permissions and invites by
e-mail; deletes a project with the internal key; and the deliveries panel shows a test event without a refresh.
Each action is done on the page and then checked through the REST API; a refused one shows the service's known
error. The scenarios are functions, so that the installed wheel runs them too (test_dashboard_actions_from_wheel)."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from selenium.webdriver.support.ui import Select

from tests.dashboard.conftest import Backend, Browser, Project, create_project, internal_headers
from tests.dashboard.test_dashboard_browser import connect, go, shot

pytestmark = pytest.mark.e2e


def _get(http: httpx.Client, project: Project, path: str, **params: str) -> Any:
    answer = http.get(f"/api/v1{path}", headers=project.headers("admin"), params=params)
    assert answer.status_code == 200, answer.text
    return answer.json()


def _outbox(http: httpx.Client, project: Project, email: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = _get(http, project, "/emails/outbox", to=email)["items"]
    return items


def _password_signs_in(http: httpx.Client, project: Project, email: str, password: str) -> bool:
    answer = http.post(
        "/api/v1/auth/password/sign-in",
        headers=project.headers("client"),
        json={"email": email, "password": password},
    )
    return answer.status_code == 200


# ------------------------------------------------------------------------------------------------------------
# Scenarios (each starts on the connect form, with a fresh project)


def users_scenario(page: Browser, backend: Backend, project: Project) -> None:
    handler = f"{backend.base_url}/handler"  # no trusted domain: the page's own origin (a loopback one)
    page.secrets += [project.super_secret_admin_key, project.secret_server_key]
    email = f"ada-{uuid.uuid4().hex[:8]}@example.com"
    connect(page, project.id, project.super_secret_admin_key)
    page.find("#users-view")
    page.text_of("#users-results .state-empty", "No users yet.")

    # Created on the page: the list shows them, the API has every field that was typed.
    page.type_into("#new-user-email", email)
    page.type_into("#new-user-display-name", "Ada Lovelace")
    page.type_into("#new-user-password", "first password 1")
    page.find("#new-user-email-verified").click()
    page.click("#new-user-submit")
    page.text_of("#new-user-status", "Created Ada Lovelace.")
    user_id = page.find("#new-user-link").get_attribute("data-user-id")
    page.text_of(f'#users-table tr[data-user-id="{user_id}"]', "Ada Lovelace")
    with backend.http() as http:
        user = _get(http, project, f"/users/{user_id}")
        assert (user["primary_email"], user["display_name"], user["primary_email_verified"], user["has_password"]) == (
            email,
            "Ada Lovelace",
            True,
            True,
        )
        assert _password_signs_in(http, project, email, "first password 1")

    # The same e-mail again: the service's known error, no second user.
    page.type_into("#new-user-email", email)
    page.click("#new-user-submit")
    page.text_of("#new-user-status .state-error", "USER_EMAIL_ALREADY_EXISTS")
    with backend.http() as http:
        assert len(_get(http, project, "/users")["items"]) == 1

    # The password, set on the user's page.
    page.click(f'#users-table tr[data-user-id="{user_id}"] a.row-link')
    page.text_of("#user-title", "Ada Lovelace")
    page.type_into("#user-password", "second password 2")
    page.click("#user-password-save")
    page.text_of("#sign-in-status", "Password set.")
    assert page.find("#user-password").get_attribute("value") == ""
    with backend.http() as http:
        assert _password_signs_in(http, project, email, "second password 2")
        assert not _password_signs_in(http, project, email, "first password 1")

    # A reset link and a sign-in code, mailed to the primary e-mail, their links leading where the page said.
    page.until(
        lambda: page.find("#reset-password-callback").get_attribute("value") == f"{handler}/password-reset",
        "the reset link's target filled in",
    )
    page.click("#reset-password-submit")
    page.text_of("#sign-in-status", f"A password reset link was mailed to {email}.")
    with backend.http() as http:
        (mail,) = _outbox(http, project, email)
        assert mail["magic_link"].startswith(f"{handler}/password-reset?code=")
    page.until(
        lambda: page.find("#sign-in-code-callback").get_attribute("value") == f"{handler}/magic-link-callback",
        "the sign-in link's target filled in",
    )
    page.click("#sign-in-code-submit")
    page.text_of("#sign-in-status", f"A sign-in code was mailed to {email}.")
    with backend.http() as http:
        newest = _outbox(http, project, email)[0]
        assert "Your code is" in newest["subject"]
        assert newest["magic_link"].startswith(f"{handler}/magic-link-callback?code=")
    # A link to a domain the project does not trust: refused, with the service's reason; nothing mailed.
    page.type_into("#sign-in-code-callback", "https://elsewhere.example/handler/magic-link-callback")
    page.click("#sign-in-code-submit")
    page.text_of("#sign-in-status .state-error", "REDIRECT_URL_NOT_WHITELISTED")
    with backend.http() as http:
        assert len(_outbox(http, project, email)) == 2

    # Impersonation: the tokens, marked as such; they act as the user; the session is listed as an impersonation.
    page.click("#impersonate-submit")
    page.text_of("#impersonation-banner", "Impersonation session for Ada Lovelace")
    access_token = page.find("#impersonation-access-token").get_attribute("value")
    refresh_token = page.find("#impersonation-refresh-token").get_attribute("value")
    assert access_token
    assert refresh_token
    page.secrets += [access_token, refresh_token]
    snippet = page.find("#impersonation-snippet").get_attribute("value")
    assert snippet is not None
    assert f"x-service-access-token: {access_token}" in snippet
    assert f"{backend.base_url}/api/v1/users/me" in snippet
    page.text_of("#sessions-table", "impersonation")
    shot(page, backend, "user-sign-in")
    with backend.http() as http:
        me = http.get(
            "/api/v1/users/me",
            headers={**project.headers("client"), "x-service-access-token": access_token},
        )
        assert me.status_code == 200, me.text
        assert me.json()["id"] == user_id
        sessions = _get(http, project, "/auth/sessions", user_id=str(user_id))["items"]
        # newest first: the impersonation, then the password sign-ins' sessions
        assert [session["is_impersonation"] for session in sessions][:1] == [True]
        assert [session["is_impersonation"] for session in sessions].count(True) == 1
    page.click("#impersonation-done")
    page.until(lambda: not page.find_all("#impersonation-banner"), "the tokens gone from the page")
    assert access_token not in page.driver.page_source


def teams_scenario(page: Browser, backend: Backend, project: Project) -> None:
    # A trusted domain: the invitation's link leads to its handler.
    handler = "https://app.example.com/auth"
    page.secrets += [project.super_secret_admin_key, project.secret_server_key]
    ada = f"ada-{uuid.uuid4().hex[:8]}@example.com"
    grace = f"grace-{uuid.uuid4().hex[:8]}@example.com"
    with backend.http() as http:
        trusted = http.patch(
            "/api/v1/projects/current",
            headers=project.headers("admin"),
            json={"config": {"domains": [{"domain": "https://app.example.com", "handler_path": "/auth"}]}},
        )
        assert trusted.status_code == 200, trusted.text
        ids = {}
        for email, name in ((ada, "Ada"), (grace, "Grace")):
            made = http.post(
                "/api/v1/users", headers=project.headers("server"), json={"primary_email": email, "display_name": name}
            )
            assert made.status_code == 201, made.text
            ids[email] = made.json()["id"]
    connect(page, project.id, project.super_secret_admin_key)
    page.find("#users-view")
    go(page, "teams")
    page.text_of("#teams-results .state-empty", "No teams yet.")

    # Created, with Ada (named by her e-mail) as its creator.
    page.click("#new-team-submit")
    page.text_of("#new-team-status .state-error", "MISSING_FIELDS")
    page.type_into("#new-team-name", "Analytical Engines")
    page.type_into("#new-team-creator", ada)
    page.click("#new-team-submit")
    page.text_of("#new-team-status", "Created Analytical Engines.")
    team_id = page.find("#new-team-link").get_attribute("data-team-id")
    page.text_of(f'#teams-table tr[data-team-id="{team_id}"]', "Analytical Engines")
    with backend.http() as http:
        assert _get(http, project, f"/teams/{team_id}")["display_name"] == "Analytical Engines"
        assert [team["id"] for team in _get(http, project, "/teams", user_id=ids[ada])["items"]] == [team_id]

    # Renamed.
    page.click("#new-team-link")
    page.text_of("#team-title", "Analytical Engines")
    page.type_into("#team-display-name", "Difference Engines")
    page.click("#team-rename-save")
    page.text_of("#team-rename-status", "Renamed to Difference Engines.")
    page.text_of("#team-title", "Difference Engines")
    with backend.http() as http:
        assert _get(http, project, f"/teams/{team_id}")["display_name"] == "Difference Engines"

    # Members: Grace added by e-mail; an unknown address and a second add are refused with a reason.
    page.text_of(f'#team-members-table tr[data-user-id="{ids[ada]}"]', "Ada")
    page.type_into("#add-member-user", "nobody@example.com")
    page.click("#add-member-submit")
    page.text_of("#team-members-status .state-error", "USER_NOT_FOUND")
    page.type_into("#add-member-user", grace)
    page.click("#add-member-submit")
    page.text_of("#team-members-status", f"Added {grace}.")
    grace_row = f'#team-members-table tr[data-user-id="{ids[grace]}"]'
    page.text_of(grace_row, "Grace")
    page.type_into("#add-member-user", ids[grace])
    page.click("#add-member-submit")
    page.text_of("#team-members-status .state-error", "TEAM_MEMBERSHIP_ALREADY_EXISTS")
    with backend.http() as http:
        members = _get(http, project, "/team-member-profiles", team_id=str(team_id))["items"]
        assert sorted(member["user_id"] for member in members) == sorted(ids.values())

    # Team permissions: team_admin granted to Grace, then revoked.
    def held(user_id: str) -> list[str]:
        with backend.http() as http:
            items = _get(http, project, "/team-permissions", team_id=str(team_id), user_id=user_id)["items"]
        return sorted(permission["id"] for permission in items)

    before = held(ids[grace])
    assert "team_admin" not in before
    Select(page.find(f"{grace_row} .grant-team-permission-select")).select_by_value("team_admin")
    page.click(page.find(f"{grace_row} .grant-team-permission"))
    page.text_of("#team-members-status", "Granted team_admin to Grace.")
    page.find(f'{grace_row} .badge[data-permission-id="team_admin"]')
    assert held(ids[grace]) == sorted([*before, "team_admin"])
    page.click(page.find(f'{grace_row} .badge[data-permission-id="team_admin"] .revoke-team-permission'))
    page.text_of("#team-members-status", "Revoked team_admin from Grace.")
    page.until(lambda: not page.find_all(f'{grace_row} .badge[data-permission-id="team_admin"]'), "team_admin gone")
    assert held(ids[grace]) == before

    # An invitation, mailed and listed.
    lin = f"lin-{uuid.uuid4().hex[:8]}@example.com"
    page.until(
        lambda: page.find("#invite-callback").get_attribute("value") == f"{handler}/team-invitation",
        "the invitation link's target filled in",
    )
    page.type_into("#invite-email", lin)
    page.click("#invite-submit")
    page.text_of("#team-invitations-status", f"An invitation was mailed to {lin}.")
    page.text_of("#team-invitations-table", lin)
    shot(page, backend, "team-actions")
    with backend.http() as http:
        invitations = _get(http, project, "/team-invitations", team_id=str(team_id))["items"]
        assert [invitation["recipient_email"] for invitation in invitations] == [lin]
        assert _outbox(http, project, lin)[0]["magic_link"].startswith(f"{handler}/team-invitation?code=")

    # Grace removed, after a confirmation (cancelled first: she stays).
    page.click(page.find(f"{grace_row} .remove-member"))
    page.text_of("#confirm-dialog", "Remove this member?")
    page.click("#confirm-cancel")
    with backend.http() as http:
        assert len(_get(http, project, "/team-member-profiles", team_id=str(team_id))["items"]) == 2
    page.click(page.find(f"{grace_row} .remove-member"))
    page.click("#confirm-ok")
    page.text_of("#team-members-status", "Removed Grace.")
    page.until(lambda: not page.find_all(grace_row), "Grace's row gone")
    with backend.http() as http:
        members = _get(http, project, "/team-member-profiles", team_id=str(team_id))["items"]
        assert [member["user_id"] for member in members] == [ids[ada]]

    # The team deleted, after a confirmation (cancelled first: it stays).
    page.click("#team-delete")
    page.text_of("#confirm-dialog", "Delete this team?")
    page.click("#confirm-cancel")
    with backend.http() as http:
        assert _get(http, project, f"/teams/{team_id}")["id"] == team_id
    page.click("#team-delete")
    page.click("#confirm-ok")
    page.text_of("#teams-results .state-empty", "No teams yet.")
    with backend.http() as http:
        gone = http.get(f"/api/v1/teams/{team_id}", headers=project.headers("admin"))
        assert gone.headers.get("x-service-known-error") == "TEAM_NOT_FOUND"


def delete_project_scenario(page: Browser, backend: Backend, project: Project) -> None:
    """The project the page is connected to is deleted from the projects view: gone from the list and the API,
    and the page forgets its key."""
    page.secrets += [project.super_secret_admin_key]
    spare = create_project(backend, f"Spare {uuid.uuid4().hex[:6]}")
    page.secrets += [spare.super_secret_admin_key]
    connect(page, project.id, project.super_secret_admin_key)
    page.find("#users-view")
    go(page, "projects")
    page.click("#internal-dev")
    row = f'#projects-table tr[data-project-id="{project.id}"]'
    page.text_of(row, "connected")

    page.click(page.find(f"{row} .delete-project"))
    page.text_of("#confirm-dialog", "Delete this project?")
    page.text_of("#confirm-message", project.display_name)
    page.click("#confirm-cancel")
    with backend.http() as http:
        assert http.get("/api/v1/projects/current", headers=project.headers("admin")).status_code == 200
    page.click(page.find(f"{row} .delete-project"))
    page.click("#confirm-ok")
    page.text_of("#projects-status", f"Project “{project.display_name}” deleted.")
    page.until(lambda: not page.find_all(row), "the project's row gone")
    page.find(f'#projects-table tr[data-project-id="{spare.id}"]')
    assert page.driver.execute_script("return window.sessionStorage.getItem('identity-dashboard:admin');") is None
    page.until(lambda: page.driver.execute_script("return document.getElementById('who').hidden;"), "no project shown")
    with backend.http() as http:
        listed = http.get("/api/v1/internal/projects", headers=internal_headers()).json()["items"]
        assert project.id not in [item["id"] for item in listed]
        assert spare.id in [item["id"] for item in listed]
        gone = http.get("/api/v1/projects/current", headers=project.headers("admin"))
        assert gone.status_code >= 400
        # The spare one deleted elsewhere meanwhile: the page's delete shows the service's refusal, and the list
        # refreshes.
        assert http.delete(f"/api/v1/internal/projects/{spare.id}", headers=internal_headers()).status_code == 200
    spare_row = f'#projects-table tr[data-project-id="{spare.id}"]'
    page.click(page.find(f"{spare_row} .delete-project"))
    page.click("#confirm-ok")
    page.text_of("#projects-status .state-error", "PROJECT_NOT_FOUND")
    page.until(lambda: not page.find_all(spare_row), "the spare project's row gone")


# ------------------------------------------------------------------------------------------------------------
# The tests, on the memory store and on Redis


def test_an_admin_creates_a_user_and_manages_their_sign_in(page: Browser, backend: Backend, project: Project) -> None:
    users_scenario(page, backend, project)


def test_an_admin_manages_a_team_its_members_permissions_and_invitations(
    page: Browser, backend: Backend, project: Project
) -> None:
    teams_scenario(page, backend, project)


def test_an_admin_deletes_a_project_with_the_internal_key(page: Browser, backend: Backend, project: Project) -> None:
    delete_project_scenario(page, backend, project)


def test_send_test_shows_the_new_delivery_in_the_open_panel(page: Browser, backend: Backend, project: Project) -> None:
    page.secrets += [project.super_secret_admin_key]
    with backend.http() as http:
        made = http.post(
            "/api/v1/webhook-endpoints",
            headers=project.headers("admin"),
            json={"url": "http://127.0.0.1:9/identity-hooks"},
        )
        assert made.status_code in (200, 201), made.text
        endpoint = made.json()
        page.secrets.append(endpoint["secret"])
    connect(page, project.id, project.super_secret_admin_key)
    page.find("#users-view")
    go(page, "webhooks")
    row = f'#webhook-endpoints-table tr[data-endpoint-id="{endpoint["id"]}"]'
    page.click(page.find(f"{row} .show-deliveries"))
    page.text_of("#webhook-deliveries-body", "No deliveries yet.")
    page.click(page.find(f"{row} .send-test"))
    message = page.text_of("#webhooks-status", "Test event msg_").split()[2]
    # No click on Refresh: the open panel shows the delivery the test queued.
    page.text_of(f'#webhook-deliveries-table tr[data-message-id="{message}"]', "stack.test")
    with backend.http() as http:
        deliveries = _get(http, project, f"/webhook-endpoints/{endpoint['id']}/deliveries")["items"]
        assert [delivery["message_id"] for delivery in deliveries] == [message]
