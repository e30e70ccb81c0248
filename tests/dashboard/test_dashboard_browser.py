"""The dashboard in headless Chromium against a real Hypercorn, on the memory store and on Redis: an admin signs in
with a project's key, finds a user signed in through the API, edits and restricts them, reads the outbox, revokes
sessions with a confirmation, and looks at teams and the project; screenshots of each view land in screenshots/run/."""

from __future__ import annotations

import re
import uuid
from typing import Any

import httpx
import pytest
from selenium.webdriver.support.ui import Select

from tests.dashboard.conftest import Backend, Browser, Project, internal_headers

pytestmark = pytest.mark.e2e

CALLBACK = "http://localhost:3000/handler/magic-link-callback"


# ------------------------------------------------------------------------------------------------------------
# The API side: what a client and a server do, and what the test checks the dashboard against


def send_code(http: httpx.Client, project: Project, email: str) -> str:
    sent = http.post(
        "/api/v1/auth/otp/send-sign-in-code",
        headers=project.headers("client"),
        json={"email": email, "callback_url": CALLBACK},
    )
    assert sent.status_code == 200, sent.text
    nonce: str = sent.json()["nonce"]
    return nonce


def newest_code(http: httpx.Client, project: Project, email: str) -> str:
    outbox = http.get("/api/v1/emails/outbox", headers=project.headers("server"), params={"to": email})
    assert outbox.status_code == 200, outbox.text
    found = re.search(r"Your code is ([0-9A-Z]{6})$", outbox.json()["items"][0]["subject"])
    assert found is not None
    return found.group(1)


def sign_in(http: httpx.Client, project: Project, code: str) -> dict[str, Any]:
    signed_in = http.post("/api/v1/auth/otp/sign-in", headers=project.headers("client"), json={"code": code})
    assert signed_in.status_code == 200, signed_in.text
    body: dict[str, Any] = signed_in.json()
    return body


def get_user(http: httpx.Client, project: Project, user_id: str) -> dict[str, Any]:
    answer = http.get(f"/api/v1/users/{user_id}", headers=project.headers("server"))
    assert answer.status_code == 200, answer.text
    user: dict[str, Any] = answer.json()
    return user


def session_ids(http: httpx.Client, project: Project, user_id: str) -> list[str]:
    answer = http.get("/api/v1/auth/sessions", headers=project.headers("server"), params={"user_id": user_id})
    assert answer.status_code == 200, answer.text
    return [session["id"] for session in answer.json()["items"]]


# ------------------------------------------------------------------------------------------------------------
# The page side


def shot(page: Browser, backend: Backend, view: str, *, full_page: bool = True) -> None:
    """A screenshot of the view, from the memory-store run (the Redis run's pages are the same, and checked the
    same way)."""
    if backend.name == "memory":
        page.screenshot(view, full_page=full_page)


def connect(page: Browser, project_id: str, admin_key: str) -> None:
    page.type_into("#connect-project-id", project_id)
    page.type_into("#connect-admin-key", admin_key)
    page.click("#connect-submit")


def go(page: Browser, route: str) -> None:
    page.click(f'#nav a[data-route="{route}"]')


def stored_admin_slot(page: Browser) -> Any:
    return page.driver.execute_script("return window.sessionStorage.getItem('identity-dashboard:admin');")


def user_rows(page: Browser) -> list[str]:
    """The ids of the users listed, in order (one round trip to the browser)."""
    rows: list[str] = page.driver.execute_script(
        "return [...document.querySelectorAll('#users-table tbody tr')].map((row) => row.dataset.userId);"
    )
    return rows


def slow(page: Browser, *, latency_ms: int) -> None:
    """Chromium's own network emulation: every request waits `latency_ms` (0: back to normal)."""
    page.driver.execute_cdp_cmd("Network.enable", {})
    page.driver.execute_cdp_cmd(
        "Network.emulateNetworkConditions",
        {"offline": False, "latency": latency_ms, "downloadThroughput": -1, "uploadThroughput": -1},
    )


def patch_requests(page: Browser) -> list[dict[str, Any]]:
    page.drain_logs()
    return [request for request in page.requests if request["method"] == "PATCH"]


def test_an_admin_finds_edits_restricts_and_signs_out_a_user(page: Browser, backend: Backend, project: Project) -> None:
    page.secrets += [project.super_secret_admin_key, project.secret_server_key]
    email = f"ada-{uuid.uuid4().hex[:8]}@example.com"
    with backend.http() as http:
        # A user signs in through the API: a code sent as a client, read from the outbox as a server.
        nonce = send_code(http, project, email)
        first = sign_in(http, project, newest_code(http, project, email) + nonce)
        user_id = first["user_id"]
        # Eleven more users, so that the list has two pages of ten; a team with Ada as its creator.
        for index in range(11):
            created = http.post(
                "/api/v1/users",
                headers=project.headers("server"),
                json={"primary_email": f"member-{index:02d}@example.org", "display_name": f"Member {index:02d}"},
            )
            assert created.status_code == 201, created.text
        team = http.post(
            "/api/v1/teams",
            headers=project.headers("server"),
            json={"display_name": "Analytical Engines", "creator_user_id": user_id},
        ).json()
        profile = http.patch(
            f"/api/v1/team-member-profiles/{team['id']}/{user_id}",
            headers=project.headers("server"),
            json={"display_name": "Ada (engines)"},
        )
        assert profile.status_code == 200, profile.text
        # --- team invitations: one open invitation of the team ---
        invited = http.post(
            "/api/v1/team-invitations/send-code",
            headers=project.headers("server"),
            json={"team_id": team["id"], "email": "grace@example.org", "callback_url": "http://localhost:3000/join"},
        )
        assert invited.status_code == 200, invited.text

        # A wrong key: the service's known error is shown and nothing is stored.
        connect(page, project.id, "sak_this_is_not_the_key")
        error = page.text_of("#connect-status .state-error", "INVALID_SUPER_SECRET_ADMIN_KEY")
        assert "is not valid for the project" in error
        assert stored_admin_slot(page) is None
        shot(page, backend, "connect")

        # The right key: the users view, the project named in the header, the key in sessionStorage only.
        page.type_into("#connect-admin-key", project.super_secret_admin_key)
        page.click("#connect-submit")
        page.find("#users-table")
        page.text_of("#who-project", project.display_name)
        assert project.super_secret_admin_key in stored_admin_slot(page)
        assert not page.find_all("#connect-admin-key"), "the connect form is gone"

        # The outbox view: a second code sent to Ada, read from the page, signs her in through the API.
        second_nonce = send_code(http, project, email)
        go(page, "outbox")
        page.type_into("#outbox-to", email)
        page.click("#outbox-refresh")
        page.until(lambda: len(page.find_all(f'#outbox-list li[data-to="{email}"]')) == 2, "two mails to Ada")
        newest = page.find_all("#outbox-list li")[0]
        shown_code = newest.find_element("css selector", ".mail-code").text
        shown_link = newest.find_element("css selector", ".mail-link").text
        assert re.fullmatch(r"[0-9A-Z]{6}", shown_code)
        assert shown_code == newest_code(http, project, email)
        assert shown_link.startswith(f"{CALLBACK}?code={shown_code.lower()}")
        assert sign_in(http, project, shown_code + second_nonce)["is_new_user"] is False
        shot(page, backend, "outbox")

        # The users view: two pages of ten, then a search that finds Ada alone.
        go(page, "users")
        Select(page.find("#user-limit")).select_by_value("10")
        page.type_into("#user-search", "")
        page.click("#user-search-submit")
        page.until(lambda: len(user_rows(page)) == 10, "a first page of ten users")
        assert page.find("#users-previous").get_attribute("disabled") is not None
        page.click("#users-next")
        page.text_of("#users-page", "Page 2")
        page.until(lambda: len(user_rows(page)) == 2, "a second page of two users")
        assert page.find("#users-next").get_attribute("disabled") is not None
        page.click("#users-previous")
        page.text_of("#users-page", "Page 1")
        page.until(lambda: len(user_rows(page)) == 10, "the first page again")

        page.type_into("#user-search", "nobody-like-this")
        page.click("#user-search-submit")
        assert "No user matches" in page.text_of("#users-results .state-empty", "nobody-like-this")
        page.type_into("#user-search", email.split("@")[0])
        page.click("#user-search-submit")
        page.until(lambda: user_rows(page) == [user_id], "Ada alone in the search results")
        shot(page, backend, "users-search")

        # One user: every field, teams, sessions.
        page.click(f'#users-table tr[data-user-id="{user_id}"] a.row-link')
        page.text_of("#user-title", email)
        assert page.find('#user-fields dd[data-field="id"]').text == user_id
        assert page.find('#user-fields dd[data-field="primary_email"]').text == email
        assert len(page.find_all("#user-fields dt")) == len(get_user(http, project, user_id))  # every field
        page.text_of("#user-teams-list", "Analytical Engines")
        page.until(lambda: len(page.find_all("#sessions-table tbody tr")) == 2, "Ada's two sessions")

        # Display name, edited on the page, seen through the API.
        page.type_into("#user-display-name", "Ada Lovelace")
        page.click("#user-display-name-save")
        page.text_of("#user-display-name-status", "Display name saved.")
        assert get_user(http, project, user_id)["display_name"] == "Ada Lovelace"
        page.text_of("#user-title", "Ada Lovelace")

        # Metadata: invalid JSON shows the parse error and sends nothing; valid JSON is saved.
        patches_before = len(patch_requests(page))
        page.type_into("#user-server-metadata", '{"plan": "pro",}')
        page.click("#user-metadata-save")
        problem = page.text_of("#user-metadata-status .state-error", "INVALID_JSON")
        assert "server_metadata:" in problem
        assert "JSON" in problem.split("server_metadata:", 1)[1]  # the parser's own message
        assert page.find("#user-server-metadata").get_attribute("aria-invalid") == "true"
        assert len(patch_requests(page)) == patches_before, "invalid JSON must not be sent"
        assert get_user(http, project, user_id)["server_metadata"] is None
        page.type_into("#user-server-metadata", '{"plan": "pro", "seats": 3}')
        page.type_into("#user-client-metadata", '{"theme": "dark"}')
        page.click("#user-metadata-save")
        page.text_of("#user-metadata-status", "Metadata saved.")
        saved = get_user(http, project, user_id)
        assert saved["server_metadata"] == {"plan": "pro", "seats": 3}
        assert saved["client_metadata"] == {"theme": "dark"}
        assert len(patch_requests(page)) == patches_before + 1

        # Restriction with a reason (and private details): shown on the page, seen through the API.
        page.click("#user-restricted")
        page.type_into("#user-restriction-reason", "Chargeback fraud")
        page.type_into("#user-restriction-details", "Ticket 4411, three disputed payments")
        page.click("#user-restriction-save")
        page.text_of("#user-restriction-status", "User restricted.")
        assert page.text_of("#user-restriction-reason-shown", "Chargeback fraud") == "Chargeback fraud"
        page.text_of("#user-restriction-banner", "Ticket 4411")
        restricted = get_user(http, project, user_id)
        assert restricted["restricted_by_admin"] is True
        assert restricted["restricted_by_admin_reason"] == "Chargeback fraud"
        assert restricted["restricted_by_admin_private_details"] == "Ticket 4411, three disputed payments"

        # E-mail verification.
        assert page.find("#user-email-verified").is_selected()
        page.click("#user-email-verified")
        page.click("#user-email-save")
        page.text_of("#user-email-status", "E-mail marked not verified.")
        assert get_user(http, project, user_id)["primary_email_verified"] is False
        shot(page, backend, "user")

        # Revoking a session asks first; cancelling keeps it, confirming ends it (its refresh token stops working).
        sessions = session_ids(http, project, user_id)
        assert len(sessions) == 2
        first_row = page.find_all("#sessions-table tbody tr")[0]
        revoked = first_row.get_attribute("data-session-id")
        page.click(first_row.find_element("css selector", ".revoke-session"))
        page.text_of("#confirm-dialog", "Revoke this session?")
        shot(page, backend, "confirm", full_page=False)
        page.click("#confirm-cancel")
        page.until(lambda: not page.find_all("#confirm-dialog[open]"), "the dialog closed")
        assert session_ids(http, project, user_id) == sessions
        page.click(page.find_all("#sessions-table tbody tr")[0].find_element("css selector", ".revoke-session"))
        page.click("#confirm-ok")
        page.text_of("#sessions-status", "Session revoked.")
        page.until(lambda: len(page.find_all("#sessions-table tbody tr")) == 1, "one session left")
        assert session_ids(http, project, user_id) == [s for s in sessions if s != revoked]

        page.click("#revoke-all-sessions")
        page.text_of("#confirm-dialog", "Revoke every session?")
        page.click("#confirm-ok")
        page.text_of("#sessions-status", "1 session revoked.")
        page.text_of("#sessions-body .state-empty", "No active sessions.")
        assert session_ids(http, project, user_id) == []
        refused = http.post(
            "/api/v1/auth/sessions/current/refresh",
            headers={**project.headers("client"), "x-service-refresh-token": first["refresh_token"]},
        )
        assert refused.status_code != 200, refused.text

        # Back to the list: the search is kept and shows the edits; the first page of everyone.
        page.click("#back-to-users")
        page.until(lambda: user_rows(page) == [user_id], "Ada alone in the kept search results")
        row = page.text_of(f'#users-table tr[data-user-id="{user_id}"]', "Ada Lovelace")
        assert "restricted by admin" in row
        assert "e-mail not verified" in row
        page.type_into("#user-search", "")
        page.click("#user-search-submit")
        page.until(lambda: len(user_rows(page)) == 10, "the first page of ten users")
        shot(page, backend, "users")

        # Teams: the list, then the team with its member's profile and permissions.
        go(page, "teams")
        page.text_of("#teams-table", "Analytical Engines")
        shot(page, backend, "teams")
        page.click(f'#teams-table tr[data-team-id="{team["id"]}"] a.row-link')
        members = page.text_of("#team-members-table", "team_admin")
        assert "Ada (engines)" in members
        assert email in members
        shot(page, backend, "team")
        # --- team invitations: the open invitation is listed, then revoked after a confirmation ---
        page.text_of("#team-invitations-table", "grace@example.org")
        page.click(f'#team-invitations-table tr[data-invitation-id="{invited.json()["id"]}"] button')
        page.text_of("#confirm-dialog", "Revoke this invitation?")
        page.click("#confirm-ok")
        page.text_of("#team-invitations-status", "The invitation to grace@example.org was revoked.")
        page.text_of("#team-invitations .state-empty", "No open invitations.")
        left = http.get("/api/v1/team-invitations", headers=project.headers("server"), params={"team_id": team["id"]})
        assert left.json()["items"] == []

        # The project: its config, edited (invalid JSON first: nothing sent), seen through the API.
        go(page, "project")
        page.text_of("#project-title", project.display_name)
        assert page.find("#config-sign-up-enabled").is_selected()
        patches_before = len(patch_requests(page))
        page.type_into("#config-domains", '[{"domain": "https://app.example.com"')
        page.click("#project-save")
        page.text_of("#project-status .state-error", "domains:")
        assert len(patch_requests(page)) == patches_before
        page.type_into("#config-domains", '[{"domain": "https://app.example.com", "handler_path": "/handler"}]')
        page.click("#config-sign-up-enabled")
        page.type_into("#project-display-name", f"{project.display_name} (renamed)")
        page.click("#project-save")
        page.text_of("#project-status", "Project saved.")
        page.text_of("#project-title", "(renamed)")
        current = http.get("/api/v1/projects/current", headers=project.headers("admin")).json()
        assert current["display_name"] == f"{project.display_name} (renamed)"
        assert current["config"]["sign_up_enabled"] is False
        assert current["config"]["domains"] == [{"domain": "https://app.example.com", "handler_path": "/handler"}]
        shot(page, backend, "project")

    # The witness saw the API traffic (so the URL checks the fixture makes after the test are not vacuous).
    page.drain_logs()
    api_urls = [request["url"] for request in page.requests if "/api/v1/" in request["url"]]
    assert any(f"/api/v1/users/{user_id}" in url for url in api_urls)
    assert any("/api/v1/auth/sessions/" in url for url in api_urls)


def test_projects_the_dev_project_button_and_errors(page: Browser, backend: Backend) -> None:
    # On localhost the dev project is one click away (its values are public and documented).
    page.click("#connect-dev")
    page.find("#users-view")
    page.text_of("#who-project", "00000000-0000-4000-8000-000000000000")

    # An error in a view shows the service's known error.
    page.driver.get(f"{backend.base_url}/dashboard#/users/00000000-0000-4000-8000-00000000dead")
    page.text_of("#user-view .state-error", "USER_NOT_FOUND")

    # Projects take the internal project's key: a wrong one is refused, the dev one lists and creates projects.
    go(page, "projects")
    page.type_into("#internal-admin-key", "sak_wrong_internal_key")
    page.click("#internal-key-submit")
    page.text_of("#internal-status .state-error", "INVALID_SUPER_SECRET_ADMIN_KEY")
    page.click("#internal-dev")
    page.text_of("#projects-table", "00000000-0000-4000-8000-000000000000")
    name = f"Made in the dashboard {uuid.uuid4().hex[:6]}"
    page.type_into("#new-project-name", name)
    page.click("#new-project-submit")
    keys = page.text_of("#created-project-keys", name)
    admin_key = re.search(r"sak_[0-9a-z]+", keys)
    assert admin_key is not None
    page.secrets.append(admin_key.group(0))
    page.text_of("#projects-table", name)
    shot(page, backend, "projects")
    with backend.http() as http:
        listed = http.get("/api/v1/internal/projects", headers=internal_headers()).json()["items"]
        created = next(item for item in listed if item["display_name"] == name)
        headers = {
            "x-service-access-type": "admin",
            "x-service-project-id": created["id"],
            "x-service-super-secret-admin-key": admin_key.group(0),
        }
        assert http.get("/api/v1/projects/current", headers=headers).status_code == 200

    # Administer the new project: an empty users list, an empty outbox; then forget the key.
    page.click("#administer-created-project")
    page.text_of("#users-results .state-empty", "No users yet.")
    page.text_of("#who-project", name)
    shot(page, backend, "users-empty")
    go(page, "outbox")
    page.text_of("#outbox-results .state-empty", "The outbox is empty.")

    # On a slow network a view says it is loading until the answer arrives.
    slow(page, latency_ms=1500)
    try:
        go(page, "teams")
        page.text_of("#teams-results .state-loading", "Loading teams")
        shot(page, backend, "loading")
    finally:
        slow(page, latency_ms=0)
    page.text_of("#teams-results .state-empty", "No teams yet.")

    # Deleting a user asks first: cancelled, the user stays; confirmed, they are gone.
    with backend.http() as http:
        made = http.post("/api/v1/users", headers=headers, json={"primary_email": "temp@example.com"})
        assert made.status_code == 201, made.text
        temp_id = made.json()["id"]
        go(page, "users")
        page.click(f'#users-table tr[data-user-id="{temp_id}"] a.row-link')
        page.text_of("#user-title", "temp@example.com")
        page.click("#user-delete")
        page.text_of("#confirm-dialog", "Delete this user?")
        page.click("#confirm-cancel")
        assert http.get(f"/api/v1/users/{temp_id}", headers=headers).status_code == 200
        page.click("#user-delete")
        page.click("#confirm-ok")
        page.text_of("#users-results .state-empty", "No users yet.")
        gone = http.get(f"/api/v1/users/{temp_id}", headers=headers)
        assert gone.headers["x-service-known-error"] == "USER_NOT_FOUND"

    page.click("#disconnect")
    page.find("#connect-form")
    assert stored_admin_slot(page) is None
