"""Names shown to people (the display names of users, teams, member profiles and projects) refuse control
characters and bidirectional overrides: 400 `SCHEMA_ERROR`, nothing changed. A NUL, an ANSI escape that rewrites a
terminal or a log viewer, a line break that forges a log line, or a right-to-left override that makes a name read
as another, has no place in a name; every other character (any script, emoji) is kept as given."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from identity_testing import IdentityFake, TestProject

REFUSED = {
    "nul": "Ada\x00",
    "ansi-escape": "\x1b[31mAdmin\x1b[0m",
    "line-break": "Ada\nINFO forged log line",
    "c1-control": "Ada\x85",
    "right-to-left-override": "Ada\u202egpj.exe",
    "isolate": "\u2067Ada\u2069",
}
KEPT = ["Ada Lovelace", "エイダ", "Ada 🚀", "Ada\u200dLovelace", "Ádá-Ō'Brien"]


def _routes(project: TestProject) -> dict[str, Callable[[str], httpx.Response]]:
    user = project.create_user("ada@example.com")
    tokens = project.sign_in(user["id"])
    with project.client("server") as http:
        team = http.post("/api/v1/teams", json={"display_name": "Crew", "creator_user_id": user["id"]}).json()

    def send(access: str, method: str, path: str, name: str, token: bool = False) -> httpx.Response:
        with project.client(access, access_token=tokens["access_token"] if token else None) as http:
            return http.request(method, path, json={"display_name": name})

    profile = f"/api/v1/team-member-profiles/{team['id']}/{user['id']}"
    return {
        "PATCH /users/me": lambda name: send("client", "PATCH", "/api/v1/users/me", name, True),
        "PATCH /users/{id}": lambda name: send("server", "PATCH", f"/api/v1/users/{user['id']}", name),
        "POST /users": lambda name: send("server", "POST", "/api/v1/users", name),
        "POST /teams": lambda name: send("server", "POST", "/api/v1/teams", name),
        "PATCH /teams/{id}": lambda name: send("server", "PATCH", f"/api/v1/teams/{team['id']}", name),
        "PATCH /team-member-profiles": lambda name: send("server", "PATCH", profile, name),
        "PATCH /projects/current": lambda name: send("admin", "PATCH", "/api/v1/projects/current", name),
    }


ROUTES = [
    "PATCH /users/me",
    "PATCH /users/{id}",
    "POST /users",
    "POST /teams",
    "PATCH /teams/{id}",
    "PATCH /team-member-profiles",
    "PATCH /projects/current",
]


@pytest.mark.parametrize("route", ROUTES)
def test_a_name_with_control_characters_or_bidi_overrides_is_refused_and_changes_nothing(route: str) -> None:
    fake = IdentityFake()
    project = fake.create_project()
    send = _routes(project)[route]
    with project.client("server") as http:
        users_before = http.get("/api/v1/users").json()["items"]
        teams_before = http.get("/api/v1/teams").json()["items"]
    with project.client("admin") as http:
        project_before = http.get("/api/v1/projects/current").json()["display_name"]
    for case, name in REFUSED.items():
        refused = send(name)
        assert (refused.status_code, refused.json()["code"]) == (400, "SCHEMA_ERROR"), (case, refused.text)
        assert "control characters or bidirectional overrides" in refused.json()["error"], case
    with project.client("server") as http:
        assert http.get("/api/v1/users").json()["items"] == users_before
        assert http.get("/api/v1/teams").json()["items"] == teams_before
    with project.client("admin") as http:
        assert http.get("/api/v1/projects/current").json()["display_name"] == project_before


@pytest.mark.parametrize("route", ROUTES)
def test_every_other_character_is_kept_as_given(route: str) -> None:
    project = IdentityFake().create_project()
    send = _routes(project)[route]
    for name in KEPT:
        answered = send(name)
        assert answered.status_code in {200, 201}, (name, answered.text)
        assert answered.json()["display_name"] == name
