"""A client never sees a team it is not a member of, by any route, over every store (memory, fakeredis, a real
redis-server): the service runs in process on each store and is read the way a client reads it."""

from __future__ import annotations

from typing import Any

from identity_proto.drivers import Store
from tests.support import Harness, Reply, client_headers, server_headers

SECRET_NAME = "Secret plans team"
SECRET_METADATA = {"launch": "do-not-leak"}


class World:
    """Ada and Bob share one team; Bob alone is in a second, secret team, which he has selected."""

    def __init__(self, store: Store) -> None:
        self.h = Harness(store=store)  # any store: only `request` is used here
        self.ada = self._user("ada@example.com")
        self.bob = self._user("bob@example.com")
        self.shared = self._team("Shared team", creator=self.ada)
        assert self.server("POST", f"/api/v1/team-memberships/{self.shared}/{self.bob}", json={}).status == 201
        self.secret = self._team(SECRET_NAME, creator=self.bob)
        self.select(self.bob, self.secret)
        self.ada_token = self.server("POST", "/api/v1/auth/sessions", json={"user_id": self.ada}).json["access_token"]

    def server(self, method: str, path: str, *, json: Any = None, query: str = "") -> Reply:
        return self.h.request(method, path, server_headers(), json=json, query=query)

    def as_ada(self, method: str, path: str, *, query: str = "") -> Reply:
        headers = client_headers(**{"x-service-access-token": self.ada_token})
        return self.h.request(method, path, headers, query=query)

    def select(self, user_id: str, team_id: str | None) -> None:
        assert self.server("PATCH", f"/api/v1/users/{user_id}", json={"selected_team_id": team_id}).status == 200

    def _user(self, email: str) -> str:
        reply = self.server("POST", "/api/v1/users", json={"primary_email": email, "primary_email_verified": True})
        assert reply.status == 201, reply.body
        return str(reply.json["id"])

    def _team(self, name: str, *, creator: str) -> str:
        body = {"display_name": name, "creator_user_id": creator, "client_metadata": SECRET_METADATA}
        reply = self.server("POST", "/api/v1/teams", json=body)
        assert reply.status == 201, reply.body
        return str(reply.json["id"])

    def client_reads_of_bob(self) -> list[tuple[str, Reply, dict[str, Any]]]:
        """Every route by which Ada, a client, can read Bob: (route, reply, Bob's embedded user)."""
        one = self.as_ada("GET", f"/api/v1/team-member-profiles/{self.shared}/{self.bob}")
        listed = self.as_ada("GET", "/api/v1/team-member-profiles", query=f"team_id={self.shared}")
        assert (one.status, listed.status) == (200, 200), (one.body, listed.body)
        (bob_listed,) = [item for item in listed.json["items"] if item["user_id"] == self.bob]
        return [("profile", one, one.json["user"]), ("profile list", listed, bob_listed["user"])]


def test_member_profile_hides_teams_the_caller_is_not_in(store: Store) -> None:
    w = World(store)
    for route, reply, bob in w.client_reads_of_bob():
        assert (bob["selected_team"], bob["selected_team_id"]) == (None, None), route
        assert w.secret.encode() not in reply.body, route
        assert SECRET_NAME.encode() not in reply.body, route
    # Ada's other routes to teams: none leads to the secret team either.
    assert w.as_ada("GET", f"/api/v1/teams/{w.secret}").known_error == "TEAM_MEMBERSHIP_NOT_FOUND"
    assert w.as_ada("GET", "/api/v1/team-member-profiles", query=f"team_id={w.secret}").status == 404
    teams = w.as_ada("GET", "/api/v1/teams", query="user_id=me")
    assert [t["id"] for t in teams.json["items"]] == [w.shared]
    # A server still sees everything.
    assert w.server("GET", f"/api/v1/users/{w.bob}").json["selected_team"]["display_name"] == SECRET_NAME
    profile = w.server("GET", f"/api/v1/team-member-profiles/{w.shared}/{w.bob}").json
    assert profile["user"]["selected_team_id"] == w.secret


def test_a_client_sees_a_members_selected_team_when_it_is_in_that_team(store: Store) -> None:
    w = World(store)
    w.select(w.bob, w.shared)
    for route, _reply, bob in w.client_reads_of_bob():
        assert bob["selected_team_id"] == w.shared, route
        assert bob["selected_team"]["display_name"] == "Shared team", route
        assert "server_metadata" not in bob["selected_team"], route
    w.select(w.ada, w.shared)
    me = w.as_ada("GET", "/api/v1/users/me").json
    assert (me["selected_team_id"], me["selected_team"]["id"]) == (w.shared, w.shared)
