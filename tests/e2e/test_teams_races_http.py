"""Races of team writes over HTTP against a real Hypercorn (memory store and real Redis): each write is the core's
read-decide-commit (`identity_proto/flows/teams.py`), so concurrent grants of different team permissions all
survive (a grant that finds the permissions changed re-runs) and concurrent adds and removes of one membership leave
every index agreeing."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.support import server_headers

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
