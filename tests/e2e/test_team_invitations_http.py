"""Team invitations over real HTTP (reference part 2 §3): every known error and plain error of the section, for
client and server, against a real Hypercorn process; the rate limits on a process of their own."""

from __future__ import annotations

import re
import uuid
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import start_hypercorn, stop_server
from tests.e2e.test_sign_in_http import _code, _new_email, _sign_in
from tests.support import admin_headers, client_headers, internal_headers, server_headers

pytestmark = pytest.mark.e2e

CALLBACK = "http://localhost:3000/handler/team-invitation"
NOWHERE = "33333333-3333-4333-8333-333333333333"
UNKNOWN_CODE = "a" * 45


def _error(response: httpx.Response) -> tuple[int, str | None]:
    return response.status_code, response.headers.get("x-service-known-error")


def _plain(response: httpx.Response) -> tuple[int, str, str | None]:
    return response.status_code, response.text, response.headers.get("x-service-known-error")


class Team:
    """Ada created a team (team_admin); Bob was added by the server (team_member); Eve is a stranger; Ivy is the
    invitee, signed in with the address invitations go to (so it is verified)."""

    def __init__(self, http: httpx.Client) -> None:
        self.http = http
        patched = http.patch(
            "/api/v1/projects/current",
            headers=admin_headers(),
            json={"config": {"client_team_creation_enabled": True}},
        )
        assert patched.status_code == 200
        self.ada, self.bob, self.eve = (self.person() for _ in range(3))
        self.ivy_email = _new_email()
        self.ivy = self.person(self.ivy_email)
        self.name = f"Crew {uuid.uuid4().hex[:6]}"
        created = self.call(self.ada, "POST", "/api/v1/teams", json={"display_name": self.name})
        assert created.status_code == 201, created.text
        self.id = created.json()["id"]
        added = http.post(f"/api/v1/team-memberships/{self.id}/{self.bob['user_id']}", headers=server_headers())
        assert added.status_code == 201, added.text

    def person(self, email: str | None = None) -> dict[str, Any]:
        reply = _sign_in(self.http, _code(self.http, email or _new_email()))
        assert reply.status_code == 200, reply.text
        return dict(reply.json())

    def call(self, who: dict[str, Any] | None, method: str, path: str, **kw: Any) -> httpx.Response:
        extra = {} if who is None else {"x-service-access-token": who["access_token"]}
        return self.http.request(method, path, headers=client_headers(**extra), **kw)

    def invite(self, who: dict[str, Any] | None, email: str | None = None, **body: Any) -> httpx.Response:
        payload = {"team_id": self.id, "email": email or self.ivy_email, "callback_url": CALLBACK, **body}
        if who is None:
            return self.http.post("/api/v1/team-invitations/send-code", headers=server_headers(), json=payload)
        return self.call(who, "POST", "/api/v1/team-invitations/send-code", json=payload)

    def mailed_code(self, email: str | None = None) -> str:
        mail = self.http.get(
            "/api/v1/emails/outbox", headers=server_headers(), params={"to": email or self.ivy_email}
        ).json()["items"][0]
        assert mail["subject"] == f"You have been invited to join {self.name}"
        assert mail["code"] is None  # the full code is only in the link
        found = re.search(r"[?&]code=([0-9a-z]{45})$", mail["magic_link"])
        assert found is not None
        assert mail["magic_link"].startswith(CALLBACK + "?code=")
        assert found.group(1) in mail["text"]
        return found.group(1)

    def invitation_code(self) -> str:
        sent = self.invite(self.ada)
        assert sent.status_code == 200, sent.text
        return self.mailed_code()

    def members(self) -> set[str]:
        listed = self.http.get("/api/v1/users", headers=server_headers(), params={"team_id": self.id})
        return {user["id"] for user in listed.json()["items"]}

    def set_permissions(self, who: dict[str, Any], *, drop: str) -> None:
        path = f"/api/v1/team-permissions/{self.id}/{who['user_id']}/{drop}"
        assert self.http.delete(path, headers=server_headers()).status_code == 200


@pytest.fixture
def team(http: httpx.Client) -> Team:
    return Team(http)


# --------------------------------------------------------------------------------------------------------------
# send-code


def test_a_member_with_invite_members_sends_an_invitation_mailed_with_a_link(team: Team) -> None:
    sent = team.invite(team.bob)  # team_member holds $invite_members
    assert sent.status_code == 200, sent.text
    body = sent.json()
    assert body["success"] is True
    assert re.fullmatch(r"[0-9a-f-]{36}", body["id"])
    team.mailed_code()
    # The server needs no user.
    assert team.invite(None).status_code == 200


def test_send_code_errors(team: Team) -> None:
    assert _error(team.invite(None, team_id=NOWHERE)) == (404, "TEAM_NOT_FOUND")
    no_user = team.http.post(
        "/api/v1/team-invitations/send-code",
        headers=client_headers(),
        json={"team_id": team.id, "email": team.ivy_email, "callback_url": CALLBACK},
    )
    assert _error(no_user) == (401, "USER_AUTHENTICATION_REQUIRED")
    assert _error(team.invite(team.eve)) == (404, "TEAM_MEMBERSHIP_NOT_FOUND")
    team.set_permissions(team.bob, drop="team_member")
    refused = team.invite(team.bob)
    assert _error(refused) == (401, "TEAM_PERMISSION_REQUIRED")
    assert refused.json()["details"] == {
        "team_id": team.id,
        "user_id": team.bob["user_id"],
        "permission_id": "$invite_members",
    }
    assert _error(team.invite(team.ada, callback_url="https://evil.example.com/cb")) == (
        400,
        "REDIRECT_URL_NOT_WHITELISTED",
    )
    assert _error(team.invite(team.ada, email="not-an-address")) == (400, "SCHEMA_ERROR")
    assert _error(team.invite(team.ada, team_id="not-a-uuid")) == (400, "SCHEMA_ERROR")
    assert _error(team.invite(team.ada, extra=1)) == (400, "SCHEMA_ERROR")
    # Nothing refused above was stored or mailed.
    listed = team.http.get("/api/v1/team-invitations", headers=server_headers(), params={"team_id": team.id})
    assert listed.json() == {"items": [], "is_paginated": False}
    assert (
        team.http.get("/api/v1/emails/outbox", headers=server_headers(), params={"to": team.ivy_email})
        .json()["items"][0]["subject"]
        .startswith("Sign in to")
    )


# --------------------------------------------------------------------------------------------------------------
# list


def test_a_team_lists_its_open_invitations(team: Team) -> None:
    first = team.invite(team.ada).json()["id"]
    other = _new_email()
    second = team.invite(team.ada, email=other).json()["id"]
    listed = team.call(team.bob, "GET", "/api/v1/team-invitations", params={"team_id": team.id})
    assert listed.status_code == 200, listed.text
    items = listed.json()["items"]
    assert [item["id"] for item in items] == [first, second]
    assert items[0] == {
        "id": first,
        "team_id": team.id,
        "team_display_name": team.name,
        "expires_at_millis": items[0]["expires_at_millis"],
        "recipient_email": team.ivy_email,
    }
    assert items[1]["recipient_email"] == other
    # An accepted invitation is no longer listed.
    accepted = team.call(team.ivy, "POST", "/api/v1/team-invitations/accept", json={"code": team.mailed_code()})
    assert accepted.status_code == 200
    server = team.http.get("/api/v1/team-invitations", headers=server_headers(), params={"team_id": team.id})
    assert [item["id"] for item in server.json()["items"]] == [second]


def test_list_errors(team: Team) -> None:
    both = team.call(team.ada, "GET", "/api/v1/team-invitations", params={"team_id": team.id, "user_id": "me"})
    assert _plain(both) == (400, "Cannot specify both team_id and user_id", None)
    neither = team.call(team.ada, "GET", "/api/v1/team-invitations")
    assert _plain(neither) == (400, "Must specify either team_id or user_id", None)
    no_user = team.call(None, "GET", "/api/v1/team-invitations", params={"user_id": "me"})
    assert _error(no_user) == (400, "CANNOT_GET_OWN_USER_WITHOUT_USER")
    someone_else = team.call(team.ada, "GET", "/api/v1/team-invitations", params={"user_id": team.bob["user_id"]})
    assert _error(someone_else) == (400, "CANNOT_GET_OWN_USER_WITHOUT_USER")
    no_user_team = team.call(None, "GET", "/api/v1/team-invitations", params={"team_id": team.id})
    assert _error(no_user_team) == (400, "CANNOT_GET_OWN_USER_WITHOUT_USER")
    stranger = team.call(team.eve, "GET", "/api/v1/team-invitations", params={"team_id": team.id})
    assert _error(stranger) == (404, "TEAM_MEMBERSHIP_NOT_FOUND")
    server_unknown = team.http.get("/api/v1/team-invitations", headers=server_headers(), params={"team_id": NOWHERE})
    assert _error(server_unknown) == (404, "TEAM_NOT_FOUND")
    # $read_members is checked first, then $invite_members.
    team.set_permissions(team.bob, drop="team_member")
    grant = f"/api/v1/team-permissions/{team.id}/{team.bob['user_id']}"
    assert team.http.post(f"{grant}/$invite_members", headers=server_headers()).status_code == 201
    refused = team.call(team.bob, "GET", "/api/v1/team-invitations", params={"team_id": team.id})
    assert (_error(refused), refused.json()["details"]["permission_id"]) == (
        (401, "TEAM_PERMISSION_REQUIRED"),
        "$read_members",
    )
    assert team.http.post(f"{grant}/$read_members", headers=server_headers()).status_code == 201
    assert team.http.delete(f"{grant}/$invite_members", headers=server_headers()).status_code == 200
    refused = team.call(team.bob, "GET", "/api/v1/team-invitations", params={"team_id": team.id})
    assert (_error(refused), refused.json()["details"]["permission_id"]) == (
        (401, "TEAM_PERMISSION_REQUIRED"),
        "$invite_members",
    )


def test_a_user_lists_the_invitations_sent_to_their_verified_address_only(team: Team) -> None:
    invited = team.invite(team.ada).json()["id"]
    mine = team.call(team.ivy, "GET", "/api/v1/team-invitations", params={"user_id": "me"})
    assert mine.status_code == 200, mine.text
    assert mine.json() == {
        "items": [
            {
                "id": invited,
                "team_id": team.id,
                "team_display_name": team.name,
                "expires_at_millis": mine.json()["items"][0]["expires_at_millis"],
                "recipient_email": team.ivy_email,
            }
        ],
        "is_paginated": False,
    }
    by_server = team.http.get(
        "/api/v1/team-invitations", headers=server_headers(), params={"user_id": team.ivy["user_id"]}
    )
    assert by_server.json() == mine.json()
    # An unverified address with an invitation: nothing listed.
    address = _new_email()
    created = team.http.post(
        "/api/v1/users", headers=server_headers(), json={"primary_email": address, "primary_email_verified": False}
    )
    assert created.status_code == 201, created.text
    assert team.invite(team.ada, email=address).status_code == 200
    unverified = team.http.get(
        "/api/v1/team-invitations", headers=server_headers(), params={"user_id": created.json()["id"]}
    )
    assert unverified.json() == {"items": [], "is_paginated": False}
    # A deleted team's invitations are skipped.
    assert team.call(team.ada, "DELETE", f"/api/v1/teams/{team.id}").status_code == 200
    assert team.call(team.ivy, "GET", "/api/v1/team-invitations", params={"user_id": "me"}).json()["items"] == []


# --------------------------------------------------------------------------------------------------------------
# revoke


def test_revoking_an_invitation(team: Team) -> None:
    invitation = team.invite(team.ada).json()["id"]
    code = team.mailed_code()
    path = f"/api/v1/team-invitations/{invitation}"
    no_team = team.call(team.ada, "DELETE", path)
    assert _plain(no_team) == (400, "team_id is required for deleting a team invitation", None)
    assert _error(team.call(team.eve, "DELETE", path, params={"team_id": team.id})) == (
        404,
        "TEAM_MEMBERSHIP_NOT_FOUND",
    )
    refused = team.call(team.bob, "DELETE", path, params={"team_id": team.id})  # team_member: no $remove_members
    assert (_error(refused), refused.json()["details"]["permission_id"]) == (
        (401, "TEAM_PERMISSION_REQUIRED"),
        "$remove_members",
    )
    assert _error(team.http.delete(path, headers=server_headers(), params={"team_id": NOWHERE})) == (
        404,
        "TEAM_NOT_FOUND",
    )
    # Another team's id does not revoke it.
    other = team.call(team.eve, "POST", "/api/v1/teams", json={"display_name": "Other"}).json()["id"]
    assert _error(team.call(team.eve, "DELETE", path, params={"team_id": other})) == (
        404,
        "VERIFICATION_CODE_NOT_FOUND",
    )
    revoked = team.call(team.ada, "DELETE", path, params={"team_id": team.id})
    assert (revoked.status_code, revoked.json()) == (200, {"success": True})
    assert _error(team.call(team.ada, "DELETE", path, params={"team_id": team.id})) == (
        404,
        "VERIFICATION_CODE_NOT_FOUND",
    )
    accepted = team.call(team.ivy, "POST", "/api/v1/team-invitations/accept", json={"code": code})
    assert _error(accepted) == (404, "VERIFICATION_CODE_NOT_FOUND")


# --------------------------------------------------------------------------------------------------------------
# accept by code, check-code, details


def test_accepting_by_code_makes_a_member_with_the_default_permissions(team: Team) -> None:
    code = team.invitation_code()
    checked = team.call(None, "POST", "/api/v1/team-invitations/accept/check-code", json={"code": code})
    assert (checked.status_code, checked.json()) == (200, {"is_code_valid": True})
    details = team.call(team.eve, "POST", "/api/v1/team-invitations/accept/details", json={"code": code})
    assert (details.status_code, details.json()) == (200, {"team_id": team.id, "team_display_name": team.name})
    # Whoever holds the link may join (the address is not compared): Eve accepts Ivy's invitation.
    accepted = team.call(team.eve, "POST", "/api/v1/team-invitations/accept", json={"code": code.upper()})
    assert (accepted.status_code, accepted.json()) == (200, {})
    assert team.eve["user_id"] in team.members()
    permissions = team.http.get(
        "/api/v1/team-permissions",
        headers=server_headers(),
        params={"team_id": team.id, "user_id": team.eve["user_id"]},
    ).json()["items"]
    assert [p["id"] for p in permissions] == ["team_member"]
    again = team.call(team.eve, "POST", "/api/v1/team-invitations/accept", json={"code": code})
    assert _error(again) == (409, "VERIFICATION_CODE_ALREADY_USED")
    # A member accepting another invitation: 200, nothing changes.
    second = team.invitation_code()
    assert team.call(team.bob, "POST", "/api/v1/team-invitations/accept", json={"code": second}).json() == {}
    assert team.call(team.bob, "POST", "/api/v1/team-invitations/accept", json={"code": second}).status_code == 409


def test_accept_by_code_errors(team: Team) -> None:
    code = team.invitation_code()
    accept = "/api/v1/team-invitations/accept"
    assert _error(team.call(team.ivy, "POST", accept, json={"code": UNKNOWN_CODE})) == (
        404,
        "VERIFICATION_CODE_NOT_FOUND",
    )
    assert _error(team.call(team.ivy, "POST", accept, json={"code": code[:6]})) == (400, "SCHEMA_ERROR")
    assert _error(team.call(team.ivy, "POST", accept, json={"code": code, "more": 1})) == (400, "SCHEMA_ERROR")
    assert _error(team.http.post(accept, json={"code": code})) == (400, "ACCESS_TYPE_REQUIRED")
    assert _error(team.call(None, "POST", accept, json={"code": code})) == (401, "USER_AUTHENTICATION_REQUIRED")
    for route in ("/accept/details",):
        assert _error(team.call(None, "POST", f"/api/v1/team-invitations{route}", json={"code": code})) == (
            401,
            "USER_AUTHENTICATION_REQUIRED",
        )
    # A sign-in code is no invitation.
    sign_in = _code(team.http, _new_email())
    assert _error(team.call(team.ivy, "POST", accept, json={"code": sign_in.lower()})) == (
        404,
        "VERIFICATION_CODE_NOT_FOUND",
    )
    # None of that used the invitation.
    assert team.call(team.ivy, "POST", accept, json={"code": code}).status_code == 200


def test_restricted_users_cannot_accept_and_the_invitation_survives(team: Team) -> None:
    code = team.invitation_code()
    restricted = team.http.patch(
        f"/api/v1/users/{team.ivy['user_id']}",
        headers=server_headers(),
        json={"restricted_by_admin": True, "restricted_by_admin_reason": "checks pending"},
    )
    assert restricted.status_code == 200, restricted.text
    allow = {"x-service-allow-restricted-user": "true", "x-service-access-token": team.ivy["access_token"]}
    for route in ("/accept", "/accept/details"):
        refused = team.http.post(
            f"/api/v1/team-invitations{route}", headers=client_headers(**allow), json={"code": code}
        )
        assert _error(refused) == (403, "TEAM_INVITATION_RESTRICTED_USER_NOT_ALLOWED")
        assert refused.json() == {
            "code": "TEAM_INVITATION_RESTRICTED_USER_NOT_ALLOWED",
            "details": {"restricted_reason": {"type": "restricted_by_administrator"}},
            "error": "Restricted users cannot accept team invitations. Reason: restricted_by_administrator. "
            "Please complete the onboarding process before accepting team invitations.",
        }
    by_id = team.invite(team.ada).json()["id"]
    refused = team.http.post(
        f"/api/v1/team-invitations/{by_id}/accept", headers=client_headers(**allow), params={"user_id": "me"}
    )
    assert _error(refused) == (403, "TEAM_INVITATION_RESTRICTED_USER_NOT_ALLOWED")
    lifted = team.http.patch(
        f"/api/v1/users/{team.ivy['user_id']}", headers=server_headers(), json={"restricted_by_admin": False}
    )
    assert lifted.status_code == 200, lifted.text
    accepted = team.call(team.ivy, "POST", "/api/v1/team-invitations/accept", json={"code": code})
    assert (accepted.status_code, accepted.json()) == (200, {})
    assert team.ivy["user_id"] in team.members()


def test_twenty_attempts_then_the_code_is_refused(team: Team) -> None:
    code = team.invitation_code()
    for _ in range(20):
        checked = team.call(None, "POST", "/api/v1/team-invitations/accept/check-code", json={"code": code})
        assert checked.status_code == 200
    refused = team.call(team.ivy, "POST", "/api/v1/team-invitations/accept", json={"code": code})
    assert _error(refused) == (400, "VERIFICATION_CODE_MAX_ATTEMPTS_REACHED")


def test_details_of_an_invitation_to_a_deleted_team(team: Team) -> None:
    code = team.invitation_code()
    assert team.call(team.ada, "DELETE", f"/api/v1/teams/{team.id}").status_code == 200
    details = team.call(team.ivy, "POST", "/api/v1/team-invitations/accept/details", json={"code": code})
    assert _error(details) == (404, "TEAM_NOT_FOUND")
    accepted = team.call(team.ivy, "POST", "/api/v1/team-invitations/accept", json={"code": code})
    assert _error(accepted) == (404, "TEAM_NOT_FOUND")


# --------------------------------------------------------------------------------------------------------------
# accept by id


def test_accepting_by_id_needs_the_invited_address_verified(team: Team) -> None:
    invitation = team.invite(team.ada).json()["id"]
    path = f"/api/v1/team-invitations/{invitation}/accept"
    assert _error(team.call(None, "POST", path, params={"user_id": "me"})) == (400, "CANNOT_GET_OWN_USER_WITHOUT_USER")
    assert _error(team.call(team.ivy, "POST", path, params={"user_id": team.eve["user_id"]})) == (
        400,
        "CANNOT_GET_OWN_USER_WITHOUT_USER",
    )
    assert _error(team.call(team.ivy, "POST", path)) == (400, "SCHEMA_ERROR")
    assert _error(team.call(team.eve, "POST", path, params={"user_id": "me"})) == (404, "VERIFICATION_CODE_NOT_FOUND")
    unknown = f"/api/v1/team-invitations/{NOWHERE}/accept"
    assert _error(team.call(team.ivy, "POST", unknown, params={"user_id": "me"})) == (
        404,
        "VERIFICATION_CODE_NOT_FOUND",
    )
    accepted = team.call(team.ivy, "POST", path, params={"user_id": "me"})
    assert (accepted.status_code, accepted.json()) == (200, {})
    assert team.ivy["user_id"] in team.members()
    assert team.call(team.ivy, "GET", "/api/v1/team-invitations", params={"user_id": "me"}).json()["items"] == []
    assert _error(team.call(team.ivy, "POST", path, params={"user_id": "me"})) == (404, "VERIFICATION_CODE_NOT_FOUND")


def test_a_server_accepts_by_id_for_any_user_with_the_verified_address(team: Team) -> None:
    invitation = team.invite(None).json()["id"]
    path = f"/api/v1/team-invitations/{invitation}/accept"
    assert _error(team.http.post(path, headers=server_headers(), params={"user_id": team.eve["user_id"]})) == (
        404,
        "VERIFICATION_CODE_NOT_FOUND",
    )
    assert _error(team.http.post(path, headers=server_headers(), params={"user_id": "me"})) == (
        400,
        "CANNOT_GET_OWN_USER_WITHOUT_USER",
    )
    accepted = team.http.post(path, headers=server_headers(), params={"user_id": team.ivy["user_id"]})
    assert (accepted.status_code, accepted.json()) == (200, {})
    assert team.ivy["user_id"] in team.members()


def test_an_invitation_to_a_verified_secondary_address_is_listed_and_accepted(team: Team) -> None:
    # Eve's verified addresses are all her contact channels, not only her primary e-mail.
    second = _new_email()
    added = team.http.post(
        "/api/v1/contact-channels",
        headers=server_headers(),
        json={"user_id": team.eve["user_id"], "type": "email", "value": second, "used_for_auth": False},
    )
    assert added.status_code == 201, added.text
    invitation = team.invite(None, second).json()["id"]
    path = f"/api/v1/team-invitations/{invitation}/accept"
    eve = {"user_id": team.eve["user_id"]}
    listed = team.http.get("/api/v1/team-invitations", headers=server_headers(), params=eve)
    assert listed.json()["items"] == []  # not verified yet: neither listed nor acceptable
    assert _error(team.http.post(path, headers=server_headers(), params=eve)) == (404, "VERIFICATION_CODE_NOT_FOUND")
    verified = team.http.patch(
        f"/api/v1/contact-channels/{team.eve['user_id']}/{added.json()['id']}",
        headers=server_headers(),
        json={"is_verified": True},
    )
    assert verified.status_code == 200, verified.text
    listed = team.http.get("/api/v1/team-invitations", headers=server_headers(), params=eve)
    assert [item["id"] for item in listed.json()["items"]] == [invitation]
    accepted = team.http.post(path, headers=server_headers(), params=eve)
    assert (accepted.status_code, accepted.json()) == (200, {})
    assert team.eve["user_id"] in team.members()


# --------------------------------------------------------------------------------------------------------------
# On a process of their own: the clock moved, rate limits on


def test_an_expired_invitation_is_refused() -> None:
    server = start_hypercorn()
    try:
        with httpx.Client(base_url=server.base_url, timeout=10) as http:
            team = Team(http)
            code = team.invitation_code()
            invitation = team.invite(None).json()["id"]
            week = 7 * 24 * 3600 * 1000
            moved = http.post("/api/v1/testing/clock", headers=internal_headers(), json={"advance_millis": week})
            assert moved.status_code == 200, moved.text
            refused = http.post("/api/v1/team-invitations/accept", headers=client_headers(), json={"code": code})
            assert _error(refused) == (400, "VERIFICATION_CODE_EXPIRED")
            by_id = http.post(
                f"/api/v1/team-invitations/{invitation}/accept",
                headers=server_headers(),
                params={"user_id": team.ivy["user_id"]},
            )
            assert _error(by_id) == (404, "VERIFICATION_CODE_NOT_FOUND")
            listed = http.get("/api/v1/team-invitations", headers=server_headers(), params={"team_id": team.id})
            assert listed.json()["items"] == []
    finally:
        stop_server(server)


def test_invitations_are_rate_limited_per_address_and_code_checks_per_client() -> None:
    server = start_hypercorn({"IDENTITY_RATE_LIMITS": "on"})
    try:
        with httpx.Client(base_url=server.base_url, timeout=10) as http:
            team_id = http.post("/api/v1/teams", headers=server_headers(), json={"display_name": "Limited"}).json()[
                "id"
            ]
            body = {"team_id": team_id, "email": "flooded@example.com", "callback_url": CALLBACK}
            sent = [
                http.post("/api/v1/team-invitations/send-code", headers=server_headers(), json=body) for _ in range(6)
            ]
            assert [s.status_code for s in sent] == [200] * 5 + [429]
            assert sent[-1].json()["details"]["rule"] == "send_invitation_email"
            outbox = http.get("/api/v1/emails/outbox", headers=server_headers(), params={"to": "flooded@example.com"})
            assert len(outbox.json()["items"]) == 5  # the refused one was not mailed
            listed = http.get("/api/v1/team-invitations", headers=server_headers(), params={"team_id": team_id})
            assert len(listed.json()["items"]) == 5  # nor stored
            other = http.post(
                "/api/v1/team-invitations/send-code", headers=server_headers(), json={**body, "email": "x@example.com"}
            )
            assert other.status_code == 200
            checks = [
                http.post(
                    "/api/v1/team-invitations/accept/check-code", headers=client_headers(), json={"code": UNKNOWN_CODE}
                )
                for _ in range(31)
            ]
            assert [c.status_code for c in checks] == [404] * 30 + [429]
            assert checks[-1].json()["details"]["rule"] == "sign_in_ip"
    finally:
        stop_server(server)
