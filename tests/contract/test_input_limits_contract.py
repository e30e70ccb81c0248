"""Input limits over every store (memory, fakeredis, a real redis-server), through the service in process: a
metadata object past its cap is refused with SCHEMA_ERROR naming the field and the limit, and changes nothing;
one at the cap is stored whole. A team member's image follows the user's image rule."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from identity_proto.drivers import Store
from identity_proto.schemas import MAX_METADATA_BYTES
from tests.support import Harness, Reply, admin_headers, client_headers, server_headers

PNG = (
    "data:image/png;base64,"
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def _metadata_of_json_size(size: int) -> dict[str, str]:
    """A metadata object whose compact JSON is exactly `size` bytes."""
    return {"k": "x" * (size - len('{"k":""}'))}


class World:
    """One user signed in as a client, in one team it created (so it holds the team's permissions)."""

    def __init__(self, store: Store) -> None:
        self.h = Harness(store=store)  # any store: only `request` is used here
        config = {"config": {"client_team_creation_enabled": True}}
        assert self.h.request("PATCH", "/api/v1/projects/current", admin_headers(), json=config).status == 200
        created = self.server("POST", "/api/v1/users", {"primary_email": "ada@example.com"})
        assert created.status == 201, created.body
        self.user_id = str(created.json["id"])
        session = self.server("POST", "/api/v1/auth/sessions", {"user_id": self.user_id})
        self.token = str(session.json["access_token"])
        team = self.server("POST", "/api/v1/teams", {"display_name": "Team", "creator_user_id": self.user_id})
        self.team_id = str(team.json["id"])

    def server(self, method: str, path: str, json: Any = None) -> Reply:
        return self.h.request(method, path, server_headers(), json=json)

    def client(self, method: str, path: str, json: Any = None) -> Reply:
        return self.h.request(method, path, client_headers(**{"x-service-access-token": self.token}), json=json)

    def snapshot(self) -> tuple[Any, Any, Any]:
        """What a server reads of the user, the team and the teams list (to show that nothing changed)."""
        return (
            self.server("GET", f"/api/v1/users/{self.user_id}").json,
            self.server("GET", f"/api/v1/teams/{self.team_id}").json,
            self.server("GET", "/api/v1/teams").json,
        )


def _write(access: str, method: str, path: str, **extra: Any) -> Callable[[World, str, Any], Reply]:
    """Send `{field: value, **extra}` with `access` to `path` (formatted with the world's ids)."""

    def write(w: World, field: str, value: Any) -> Reply:
        send = w.client if access == "client" else w.server
        return send(method, path.format(user=w.user_id, team=w.team_id), {**extra, field: value})

    return write


_ALL = ("client_metadata", "client_read_only_metadata", "server_metadata")

#: (route, field, write): every route that writes a metadata object, with each field it may write.
METADATA_WRITES: list[tuple[str, str, Callable[[World, str, Any], Reply]]] = [
    ("client PATCH /users/me", "client_metadata", _write("client", "PATCH", "/api/v1/users/me")),
    *[(f"server PATCH /users/id {f}", f, _write("server", "PATCH", "/api/v1/users/{user}")) for f in _ALL],
    *[(f"server POST /users {f}", f, _write("server", "POST", "/api/v1/users")) for f in _ALL],
    ("client POST /teams", "client_metadata", _write("client", "POST", "/api/v1/teams", display_name="T")),
    *[(f"server POST /teams {f}", f, _write("server", "POST", "/api/v1/teams", display_name="T")) for f in _ALL],
    ("client PATCH /teams/id", "client_metadata", _write("client", "PATCH", "/api/v1/teams/{team}")),
    *[(f"server PATCH /teams/id {f}", f, _write("server", "PATCH", "/api/v1/teams/{team}")) for f in _ALL],
]


@pytest.mark.parametrize(("route", "field", "write"), METADATA_WRITES, ids=[r for r, _, _ in METADATA_WRITES])
def test_oversized_metadata_is_refused_and_changes_nothing(
    store: Store, route: str, field: str, write: Callable[[World, str, Any], Reply]
) -> None:
    w = World(store)
    before = w.snapshot()
    reply = write(w, field, _metadata_of_json_size(MAX_METADATA_BYTES + 1))
    assert (reply.status, reply.known_error) == (400, "SCHEMA_ERROR"), (route, reply.body)
    line = f"  - body.{field} must be at most {MAX_METADATA_BYTES} bytes as JSON (64 KiB)"
    assert line in reply.json["details"]["message"].splitlines()
    assert w.snapshot() == before


@pytest.mark.parametrize(("route", "field", "write"), METADATA_WRITES, ids=[r for r, _, _ in METADATA_WRITES])
def test_metadata_at_the_cap_is_stored_whole(
    store: Store, route: str, field: str, write: Callable[[World, str, Any], Reply]
) -> None:
    w = World(store)
    metadata = _metadata_of_json_size(MAX_METADATA_BYTES)
    reply = write(w, field, metadata)
    assert reply.status in {200, 201}, (route, reply.body)
    stored_in = "users" if "/users" in route else "teams"
    read = w.server("GET", f"/api/v1/{stored_in}/{reply.json['id']}")
    assert read.json[field] == metadata


def test_member_profile_image_follows_the_user_image_rule(store: Store) -> None:
    w = World(store)
    remote = "https://tracker.example/pixel.png"
    for path in ("/api/v1/users/me", f"/api/v1/team-member-profiles/{w.team_id}/me"):
        refused = w.client("PATCH", path, {"profile_image_url": remote})
        assert (refused.status, refused.known_error) == (400, "INVALID_PROFILE_IMAGE_URL"), path
        assert w.client("PATCH", path, {"profile_image_url": PNG}).status == 200, path
    profile = w.client("GET", f"/api/v1/team-member-profiles/{w.team_id}/me").json
    assert profile["profile_image_url"] == PNG
    # A server may set a remote image on either, as before.
    for path in (f"/api/v1/users/{w.user_id}", f"/api/v1/team-member-profiles/{w.team_id}/{w.user_id}"):
        assert w.server("PATCH", path, {"profile_image_url": remote}).status == 200, path
    assert w.server("GET", f"/api/v1/team-member-profiles/{w.team_id}/{w.user_id}").json["profile_image_url"] == remote
