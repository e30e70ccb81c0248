"""Export and import of a project's data (`flows.portability`, the testing routes) over every store: a project
holding one record of every kind the document carries goes through export, import into an empty project and export
again unchanged; the imported secrets work with their original plaintext (passwords, API keys, invitation codes)
though only their hashes travel; a document that is not valid, or that meets records the target holds, writes
nothing."""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest

from identity_hosting.settings import DEV_PROJECT
from identity_proto import Service, ServiceOptions, run
from identity_proto.drivers import Store
from identity_proto.effects import ListDeliveries, create_project, perform
from identity_proto.effects.oauth import find_user_by_oauth_account
from identity_proto.flows.projects import new_project
from identity_proto.flows.webhook_delivery import fan_out_events
from identity_proto.records import ProjectConfig
from identity_proto.tokens import SeededEntropy
from tests.contract.service import CALLBACK, ServiceOver
from tests.support import Reply, admin_headers, client_headers, internal_headers, server_headers

V1 = "/api/v1"
PASSWORD = "correct horse battery"
TOTP_SECRET = "SGVsbG8gVE9UUCBzZWNyZXQ="


@dataclass
class Portable(ServiceOver):
    """The service in dev mode (the testing routes) over one store, with a second, empty project to import into."""

    service: Service = field(
        default_factory=lambda: Service(ServiceOptions(password_rounds=4, rate_limits_enabled=False, dev_mode=True))
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        project, keys = new_project(SeededEntropy(5), self.now_ms, "Target", ProjectConfig())
        assert run(create_project(project), self.store)
        self.target_id = project.id
        self.target_keys = keys

    def target(self, access: str, **extra: str) -> dict[str, str]:
        """Headers of a request to the target project."""
        key = {
            "client": ("x-service-publishable-client-key", self.target_keys.publishable_client_key),
            "server": ("x-service-secret-server-key", self.target_keys.secret_server_key),
            "admin": ("x-service-super-secret-admin-key", self.target_keys.super_secret_admin_key),
        }[access]
        return {"x-service-access-type": access, "x-service-project-id": self.target_id, key[0]: key[1], **extra}

    def ok(self, method: str, path: str, headers: dict[str, str], body: Any = None) -> Any:
        self.now_ms += 1  # every record its own time: orders never rest on ties
        reply = self.request(method, path, headers, body)
        assert reply.status in (200, 201), (path, reply.status, reply.body)
        return reply.json

    def password_to(self, client: dict[str, str], email: str) -> Reply:
        """A password sign-in with `client` headers."""
        return self.request("POST", f"{V1}/auth/password/sign-in", client, {"email": email, "password": PASSWORD})

    def export(self, project_id: str) -> dict[str, Any]:
        exported: dict[str, Any] = self.ok("GET", f"{V1}/testing/projects/{project_id}/export", internal_headers())
        return exported

    def import_(self, project_id: str, document: Any) -> Reply:
        return self.request("POST", f"{V1}/testing/projects/{project_id}/import", internal_headers(), document)


@dataclass
class Seeded:
    """What `seed` made in the dev project, with the plaintext secrets a client holds."""

    ada: str
    bob: str
    team: str
    user_key: str
    team_key: str
    invitation_code: str


def seed(over: Portable) -> Seeded:
    """One record of every kind the document carries, in the dev project."""
    config = {
        "allow_user_api_keys": True,
        "allow_team_api_keys": True,
        "oauth_providers": [{"id": "github", "type": "github", "client_id": "gh-client", "client_secret": "gh-secret"}],
    }
    over.ok("PATCH", f"{V1}/projects/current", admin_headers(), {"config": config})
    over.ok("POST", f"{V1}/project-permission-definitions", admin_headers(), {"id": "read_reports"})
    ada = over.ok(
        "POST",
        f"{V1}/users",
        server_headers(),
        {
            "primary_email": "ada@example.com",
            "primary_email_auth_enabled": True,
            "primary_email_verified": True,
            "password": PASSWORD,
            "display_name": "Ada",
            "server_metadata": {"plan": "pro", "nested": [1, None, "✓"]},
            "totp_secret_base64": TOTP_SECRET,
        },
    )["id"]
    bob = over.ok(
        "POST",
        f"{V1}/users",
        server_headers(),
        {"primary_email": "bob@example.com", "primary_email_auth_enabled": True, "password": PASSWORD},
    )["id"]
    # Contact channels: a verified auth channel (signs in), an unverified claim a client added (does not), a plain one.
    over.ok(
        "POST",
        f"{V1}/contact-channels",
        server_headers(),
        {"user_id": ada, "type": "email", "value": "ada@work.example", "used_for_auth": True, "is_verified": True},
    )
    bob_token = over.password("sign-in", "bob@example.com", PASSWORD).json["access_token"]
    bob_me = client_headers(**{"x-service-access-token": bob_token})
    over.ok(
        "POST",
        f"{V1}/contact-channels",
        bob_me,
        {"user_id": "me", "type": "email", "value": "bob@claimed.example", "used_for_auth": True},
    )
    over.ok(
        "POST",
        f"{V1}/contact-channels",
        server_headers(),
        {"user_id": bob, "type": "email", "value": "bob@home.example", "used_for_auth": False},
    )
    team = over.ok("POST", f"{V1}/teams", server_headers(), {"display_name": "Crew", "creator_user_id": ada})["id"]
    over.ok("PATCH", f"{V1}/team-member-profiles/{team}/{ada}", server_headers(), {"display_name": "Captain Ada"})
    over.ok("POST", f"{V1}/team-permissions/{team}/{ada}/$manage_api_keys", server_headers(), {})
    over.ok("POST", f"{V1}/project-permissions/{ada}/read_reports", server_headers(), {})
    over.ok(
        "POST",
        f"{V1}/oauth-providers",
        server_headers(),
        {"user_id": ada, "provider_config_id": "github", "account_id": "gh-1", "email": "ada@example.com",
         "allow_sign_in": True, "allow_connected_accounts": True},
    )  # fmt: skip
    user_key = over.ok(
        "POST",
        f"{V1}/user-api-keys",
        server_headers(),
        {"user_id": ada, "description": "CI", "expires_at_millis": None},
    )
    team_key = over.ok(
        "POST",
        f"{V1}/team-api-keys",
        server_headers(),
        {"team_id": team, "description": "Bots", "expires_at_millis": over.now_ms + 86_400_000},
    )
    over.ok(
        "POST",
        f"{V1}/team-invitations/send-code",
        server_headers(),
        {"team_id": team, "email": "bob@example.com", "callback_url": CALLBACK},
    )
    mail = over.ok("GET", f"{V1}/emails/outbox?to=bob@example.com", server_headers())["items"][0]
    code = re.search(r"[?&]code=([A-Za-z0-9_-]+)", orjson.dumps(mail).decode())
    assert code is not None, mail
    over.ok("POST", f"{V1}/webhook-endpoints", admin_headers(), {"url": "https://hooks.example.com/a"})
    over.ok(
        "POST",
        f"{V1}/webhook-endpoints",
        admin_headers(),
        {"url": "https://hooks.example.com/b", "event_types": ["user.created"], "description": "users"},
    )
    return Seeded(ada, bob, team, user_key["value"], team_key["value"], code[1])


def comparable(document: dict[str, Any]) -> dict[str, Any]:
    """A document without what an import legitimately changes: when it was made, and which project it names."""
    rest = {name: value for name, value in document.items() if name != "exported_at_millis"}
    rest["project"] = {"config": document["project"]["config"]}
    return rest


def test_a_round_trip_carries_every_kind_and_changes_nothing(store: Store) -> None:
    over = Portable(store)
    seeded = seed(over)
    exported = over.export(DEV_PROJECT.id)
    assert exported["version"] == 2
    kinds = ("users", "contact_channels", "teams", "memberships", "project_permissions", "api_keys")
    assert {kind: len(exported[kind]) for kind in kinds} == {
        "users": 2,
        "contact_channels": 3,
        "teams": 1,
        "memberships": 1,
        "project_permissions": 1,
        "api_keys": 2,
    }
    assert (len(exported["team_invitations"]), len(exported["webhook_endpoints"])) == (1, 2)
    text = orjson.dumps(exported).decode()
    for secret in (PASSWORD, seeded.user_key, seeded.team_key, seeded.invitation_code):
        assert secret not in text  # hashes only
    assert "gh-client" in text
    assert exported["users"][0]["totp_secret_base64"] == TOTP_SECRET
    channels = {c["value"]: c for c in exported["contact_channels"]}
    assert (channels["ada@work.example"]["signs_in"], channels["bob@claimed.example"]["signs_in"]) == (True, False)
    assert channels["bob@claimed.example"]["used_for_auth"] is True
    assert exported["memberships"][0]["display_name"] == "Captain Ada"
    assert "$manage_api_keys" in exported["memberships"][0]["permissions"]
    assert exported["project_permissions"] == [{"user_id": seeded.ada, "permission_ids": ["read_reports"]}]
    assert [a["account_id"] for a in exported["users"][0]["oauth_accounts"]] == ["gh-1"]

    imported = over.import_(over.target_id, exported)
    assert imported.status == 200, imported.body
    assert imported.json == {
        "imported": {
            "users": 2,
            "teams": 1,
            "memberships": 1,
            "contact_channels": 3,
            "project_permissions": 1,
            "api_keys": 2,
            "team_invitations": 1,
            "webhook_endpoints": 2,
        }
    }
    again = over.export(over.target_id)
    assert comparable(again) == comparable(exported)
    assert again["project"]["id"] == over.target_id


def test_imported_secrets_work_with_their_original_plaintext(store: Store) -> None:
    over = Portable(store)
    seeded = seed(over)
    assert over.import_(over.target_id, over.export(DEV_PROJECT.id)).status == 200
    server, client = over.target("server"), over.target("client")
    # API keys: only their hashes travelled, and the original texts still authenticate.
    user_key = over.ok("POST", f"{V1}/user-api-keys/check", server, {"api_key": seeded.user_key})
    assert (user_key["user_id"], user_key["description"]) == (seeded.ada, "CI")
    team_key = over.ok("POST", f"{V1}/team-api-keys/check", server, {"api_key": seeded.team_key})
    assert team_key["team_id"] == seeded.team
    # Passwords (by the primary and by the auth channel that signs in); not by the unverified claim.
    for address in ("ada@example.com", "ada@work.example"):  # the password holds; her TOTP secret came along
        signed = over.request("POST", f"{V1}/auth/password/sign-in", client, {"email": address, "password": PASSWORD})
        assert signed.known_error == "MULTI_FACTOR_AUTHENTICATION_REQUIRED", signed.body
    claimed = over.request(
        "POST", f"{V1}/auth/password/sign-in", client, {"email": "bob@claimed.example", "password": PASSWORD}
    )
    assert claimed.status == 400
    assert claimed.known_error == "EMAIL_PASSWORD_MISMATCH"
    # The invitation mailed before the export is accepted with its code after the import.
    bob = over.password_to(client, "bob@example.com")
    bob_me = over.target("client", **{"x-service-access-token": bob.json["access_token"]})
    over.ok("POST", f"{V1}/team-invitations/accept", bob_me, {"code": seeded.invitation_code})
    members = over.ok("GET", f"{V1}/team-member-profiles?team_id={seeded.team}", server)["items"]
    assert sorted(m["user_id"] for m in members) == sorted([seeded.ada, seeded.bob])
    # The OAuth sign-in account is in the target's index; the project grant holds.
    found = run(perform(find_user_by_oauth_account(over.target_id, "github", "gh-1")), store)
    assert found is not None
    assert found.id == seeded.ada
    grants = over.ok("GET", f"{V1}/project-permissions?user_id={seeded.ada}", server)["items"]
    assert [g["id"] for g in grants] == ["read_reports"]
    endpoints = over.ok("GET", f"{V1}/webhook-endpoints", over.target("admin"))["items"]
    assert [e["url"] for e in endpoints] == ["https://hooks.example.com/a", "https://hooks.example.com/b"]


def test_imported_endpoints_get_the_imports_own_events(store: Store) -> None:
    """The import's events (`user.created`, ...) are recorded with its writes, after its endpoints exist: each
    imported endpoint gets those its event types select, as for any change made after it was created."""
    over = Portable(store)
    seed(over)
    exported = over.export(DEV_PROJECT.id)
    assert over.import_(over.target_id, exported).status == 200
    assert run(fan_out_events(over.target_id, over.now_ms), store) > 0
    every, users = (e["id"] for e in exported["webhook_endpoints"])
    delivered = {
        endpoint: sorted(d.event_type for d in run(perform(ListDeliveries(over.target_id, endpoint, None)), store))
        for endpoint in (every, users)
    }
    assert delivered[users] == ["user.created", "user.created"]
    assert {"user.created", "team.created", "team_membership.created", "project_permission.created"} <= set(
        delivered[every]
    )


def _bad(document: dict[str, Any], name: str) -> dict[str, Any]:
    """`document` with one defect, by name."""
    bad = copy.deepcopy(document)
    if name == "version":
        bad["version"] = 99
    elif name == "dangling membership":
        bad["memberships"][0]["user_id"] = "nobody"
    elif name == "duplicate user":
        bad["users"].append(bad["users"][0])
    elif name == "wrong type":
        bad["users"][1]["password_hash"] = 5
    elif name == "invalid address":
        bad["contact_channels"][0]["value"] = "not an address"
    elif name == "shared sign-in address":
        bad["contact_channels"][0]["value"] = bad["users"][1]["primary_email"]
        bad["contact_channels"][0]["user_id"] = bad["users"][0]["id"]
    elif name == "key of a missing team":
        key = next(k for k in bad["api_keys"] if k["type"] == "team")
        key["owner_id"] = "no-team"
    elif name == "invitation without a hash":
        del bad["team_invitations"][0]["code_hash"]
    elif name == "permissions as text":
        bad["memberships"][0]["permissions"] = "team_admin"
    elif name == "invitation without an id":
        bad["team_invitations"][0]["id"] = None
    elif name == "config":
        bad["project"]["config"]["domains"] = "everywhere"
    return bad


@pytest.mark.parametrize(
    "defect",
    [
        "version",
        "dangling membership",
        "duplicate user",
        "wrong type",
        "invalid address",
        "shared sign-in address",
        "key of a missing team",
        "invitation without a hash",
        "permissions as text",
        "invitation without an id",
        "config",
    ],
)
def test_an_invalid_document_is_400_and_writes_nothing(store: Store, defect: str) -> None:
    over = Portable(store)
    seed(over)
    exported = over.export(DEV_PROJECT.id)
    before = over.export(over.target_id)
    refused = over.import_(over.target_id, _bad(exported, defect))
    assert (refused.status, refused.known_error) == (400, "SCHEMA_ERROR"), refused.body
    assert comparable(over.export(over.target_id)) == comparable(before)


def test_a_record_the_target_holds_is_409_and_nothing_is_written(store: Store) -> None:
    over = Portable(store)
    seeded = seed(over)
    exported = over.export(DEV_PROJECT.id)
    # The team exists in the target already; everything else of the document is new.
    only_team = {**exported, "users": [], "contact_channels": [], "memberships": [], "project_permissions": []}
    only_team = {**only_team, "api_keys": [k for k in exported["api_keys"] if k["type"] == "team"]}
    only_team = {**only_team, "team_invitations": [], "webhook_endpoints": []}
    assert over.import_(over.target_id, only_team).status == 200
    before = over.export(over.target_id)
    again = over.import_(over.target_id, {**exported, "api_keys": [], "team_invitations": []})
    assert (again.status, again.known_error) == (409, "IMPORT_CONFLICT"), again.body
    assert seeded.team in again.json["error"]
    assert comparable(over.export(over.target_id)) == comparable(before)  # the users were not written either
    # The same API key (its id and hash) on another, new team is refused too, before anything is written.
    team_key = next(k for k in exported["api_keys"] if k["type"] == "team")
    copied = {**only_team, "teams": [{**exported["teams"][0], "id": "team-copy"}]}
    taken = over.import_(over.target_id, {**copied, "api_keys": [{**team_key, "owner_id": "team-copy"}]})
    assert (taken.status, taken.known_error) == (409, "IMPORT_CONFLICT"), taken.body
    assert comparable(over.export(over.target_id)) == comparable(before)
    # A user's auth address taken: 409 USER_EMAIL_ALREADY_EXISTS, as version 1 answered.
    users_only = {**exported, "contact_channels": [], "teams": [], "memberships": [], "project_permissions": []}
    users_only = {**users_only, "api_keys": [], "team_invitations": [], "webhook_endpoints": []}
    users_only["users"] = [{**u, "oauth_accounts": [], "selected_team_id": None} for u in exported["users"]]
    assert over.import_(over.target_id, users_only).status == 200
    renamed = copy.deepcopy(users_only)
    renamed["users"] = [{**u, "id": u["id"] + "-2"} for u in users_only["users"]]
    taken_address = over.import_(over.target_id, renamed)
    assert (taken_address.status, taken_address.known_error) == (409, "USER_EMAIL_ALREADY_EXISTS")


def test_a_document_without_a_config_leaves_the_targets(store: Store) -> None:
    over = Portable(store)
    seed(over)
    exported = over.export(DEV_PROJECT.id)
    without = {name: value for name, value in exported.items() if name != "project"}
    without = {**without, "api_keys": [], "users": [{**u, "oauth_accounts": []} for u in exported["users"]]}
    before = over.export(over.target_id)["project"]["config"]
    assert over.import_(over.target_id, without).status == 200
    after = over.export(over.target_id)
    assert after["project"]["config"] == before
    assert before != exported["project"]["config"]
    assert len(after["users"]) == 2


def test_an_import_into_a_project_that_does_not_exist_is_404(store: Store) -> None:
    over = Portable(store)
    seed(over)
    missing = over.import_("0c6a1d5e-0000-4000-8000-000000000000", over.export(DEV_PROJECT.id))
    assert (missing.status, missing.known_error) == (404, "PROJECT_NOT_FOUND")


def test_a_version_1_document_still_imports(store: Store) -> None:
    over = Portable(store)
    seeded = seed(over)
    exported = over.export(DEV_PROJECT.id)
    users = [{k: v for k, v in u.items() if k not in ("oauth_accounts", "selected_team_id")} for u in exported["users"]]
    version_1 = {
        "format": exported["format"],
        "version": 1,
        "exported_at_millis": exported["exported_at_millis"],
        "project": exported["project"],
        "users": users,
        "teams": exported["teams"],
        "memberships": exported["memberships"],
    }
    imported = over.import_(over.target_id, version_1)
    assert imported.json == {"imported": {"users": 2, "teams": 1, "memberships": 1}}
    after = over.export(over.target_id)
    assert [u["id"] for u in after["users"]] == [seeded.ada, seeded.bob]
    assert after["project"]["config"]["allow_user_api_keys"] is False  # version 1 leaves the config as it is
