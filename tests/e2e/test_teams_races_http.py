"""Races of team writes over HTTP against a real Hypercorn (memory store and real Redis): each write is the core's
read-decide-commit (`identity_proto/flows/teams.py`), so concurrent grants of different team permissions all
survive (a grant that finds the permissions changed re-runs), concurrent adds and removes of one membership leave
every index agreeing, concurrent accepts of team invitations add exactly one membership
(`identity_proto/flows/team_invitations.py::accept_code`), and concurrent grants and revokes of one user's project
permissions all land (`identity_proto/flows/permissions.py`)."""

from __future__ import annotations

import re
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.e2e.test_sign_in_http import _code, _new_email, _sign_in
from tests.support import admin_headers, client_headers, server_headers

pytestmark = pytest.mark.e2e

SYSTEM_PERMISSIONS = ("$read_members", "$update_team", "$delete_team", "$remove_members", "$invite_members")


def _user(http: httpx.Client) -> str:
    created = http.post(
        "/api/v1/users", headers=server_headers(), json={"primary_email": f"race-{uuid.uuid4().hex[:10]}@example.com"}
    )
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


def _team(http: httpx.Client) -> str:
    created = http.post("/api/v1/teams", headers=server_headers(), json={"display_name": "Race team"})
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


def test_concurrent_grants_of_different_team_permissions_all_survive(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=30.0) as http:
        user_id, team_id = _user(http), _team(http)
        added = http.post(f"/api/v1/team-memberships/{team_id}/{user_id}", headers=server_headers(), json={})
        assert added.status_code == 201, added.text

        def grant(permission_id: str) -> int:
            url = f"/api/v1/team-permissions/{team_id}/{user_id}/{permission_id}"
            return http.post(url, headers=server_headers(), json={}).status_code

        with ThreadPoolExecutor(len(SYSTEM_PERMISSIONS)) as pool:
            assert set(pool.map(grant, SYSTEM_PERMISSIONS)) == {201}
        listed = http.get(
            "/api/v1/team-permissions", headers=server_headers(), params={"team_id": team_id, "user_id": user_id}
        )
        assert listed.status_code == 200, listed.text
        assert set(SYSTEM_PERMISSIONS) <= {item["id"] for item in listed.json()["items"]}


def test_concurrent_adds_and_removes_of_one_membership_converge(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=30.0) as http:
        user_id, team_id = _user(http), _team(http)
        url = f"/api/v1/team-memberships/{team_id}/{user_id}"

        def churn(adding: bool) -> set[int]:
            method = "POST" if adding else "DELETE"
            return {http.request(method, url, headers=server_headers(), json={}).status_code for _ in range(8)}

        with ThreadPoolExecutor(4) as pool:
            codes = set().union(*pool.map(churn, (True, False, True, False)))
        assert codes <= {200, 201, 404, 409}  # never a 5xx: conflicts re-ran

        teams = http.get("/api/v1/teams", headers=server_headers(), params={"user_id": user_id}).json()["items"]
        members = http.get(
            "/api/v1/team-member-profiles", headers=server_headers(), params={"team_id": team_id}
        ).json()["items"]
        member = [team_id] == [team["id"] for team in teams]
        assert [m["user_id"] for m in members] == ([user_id] if member else [])  # both indexes agree
        removed = http.delete(url, headers=server_headers())
        assert removed.status_code == (200 if member else 404), removed.text
        assert http.get("/api/v1/teams", headers=server_headers(), params={"user_id": user_id}).json()["items"] == []


def _signed_in(http: httpx.Client, email: str) -> dict[str, Any]:
    reply = _sign_in(http, _code(http, email))
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


def _invitation_codes(http: httpx.Client, team_id: str, email: str, count: int) -> list[str]:
    """Send `count` invitations to `email` (server access); the codes their mails carry."""
    for _ in range(count):
        sent = http.post(
            "/api/v1/team-invitations/send-code",
            headers=server_headers(),
            json={"team_id": team_id, "email": email, "callback_url": "http://localhost:3000/handler/team-invitation"},
        )
        assert sent.status_code == 200, sent.text
    mails = http.get("/api/v1/emails/outbox", headers=server_headers(), params={"to": email}).json()["items"]
    mails = [mail for mail in mails if mail["subject"].startswith("You have been invited")]
    codes = [
        found.group(1) for mail in mails if (found := re.search(r"[?&]code=([0-9a-z]{45})$", mail["magic_link"] or ""))
    ]
    assert len(codes) == count
    return codes


def _accept(http: httpx.Client, who: dict[str, Any], code: str) -> tuple[int, str | None]:
    accepted = http.post(
        "/api/v1/team-invitations/accept",
        headers=client_headers(**{"x-service-access-token": who["access_token"]}),
        json={"code": code},
    )
    return accepted.status_code, accepted.headers.get("x-service-known-error")


def _members(http: httpx.Client, team_id: str) -> list[str]:
    listed = http.get("/api/v1/users", headers=server_headers(), params={"team_id": team_id})
    assert listed.status_code == 200, listed.text
    return [user["id"] for user in listed.json()["items"]]


def test_concurrent_accepts_of_one_invitation_make_exactly_one_member(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=30.0) as http:
        team_id = _team(http)
        people = [_signed_in(http, _new_email()) for _ in range(6)]
        [code] = _invitation_codes(http, team_id, _new_email(), 1)
        with ThreadPoolExecutor(len(people)) as pool:
            answers = list(pool.map(lambda who: _accept(http, who, code), people))
        assert sorted(answers) == [(200, None)] + [(409, "VERIFICATION_CODE_ALREADY_USED")] * (len(people) - 1)
        [winner] = [who["user_id"] for who, answer in zip(people, answers, strict=True) if answer == (200, None)]
        assert _members(http, team_id) == [winner]


def test_concurrent_accepts_of_invitations_to_one_team_add_one_membership(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=30.0) as http:
        team_id = _team(http)
        email = _new_email()
        invitee = _signed_in(http, email)
        codes = _invitation_codes(http, team_id, email, 6)
        with ThreadPoolExecutor(len(codes)) as pool:
            answers = set(pool.map(lambda code: _accept(http, invitee, code), codes))
        assert answers == {(200, None)}  # one added the membership; the others found it and only used theirs
        assert _members(http, team_id) == [invitee["user_id"]]
        teams = http.get("/api/v1/teams", headers=server_headers(), params={"user_id": invitee["user_id"]}).json()
        assert [team["id"] for team in teams["items"] if team["id"] == team_id] == [team_id]
        listed = http.get("/api/v1/team-invitations", headers=server_headers(), params={"team_id": team_id}).json()
        assert listed["items"] == []  # every invitation was used
        profiles = http.get("/api/v1/team-member-profiles", headers=server_headers(), params={"team_id": team_id})
        assert [m["user_id"] for m in profiles.json()["items"]] == [invitee["user_id"]]


def test_concurrent_revokes_and_grants_of_one_users_project_permissions_converge(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=30.0) as http:
        user_id = _user(http)
        ids = [f"race_{uuid.uuid4().hex[:8]}" for _ in range(5)]
        for permission_id in ids:
            made = http.post(
                "/api/v1/project-permission-definitions", headers=admin_headers(), json={"id": permission_id}
            )
            assert made.status_code == 201, made.text
        url = f"/api/v1/project-permissions/{user_id}"
        for permission_id in ids[:3]:
            assert http.post(f"{url}/{permission_id}", headers=server_headers(), json={}).status_code == 201

        def change(step: tuple[str, str]) -> int:
            method, permission_id = step
            return http.request(method, f"{url}/{permission_id}", headers=server_headers(), json={}).status_code

        # A revoke is guarded on how many ids the user holds, so it conflicts only when another change landed since
        # its read: with five changes, four conflicts at most, within the service's attempts.
        steps = [("DELETE", p) for p in ids[:3]] + [("POST", p) for p in ids[3:]]
        with ThreadPoolExecutor(len(steps)) as pool:
            assert list(pool.map(change, steps)) == [200] * 3 + [201] * 2  # a revoke re-ran while others landed
        listed = http.get("/api/v1/project-permissions", headers=server_headers(), params={"user_id": user_id})
        assert listed.status_code == 200, listed.text
        assert sorted(item["id"] for item in listed.json()["items"] if item["id"] in ids) == sorted(ids[3:])
