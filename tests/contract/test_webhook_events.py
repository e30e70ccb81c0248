"""Webhook events over every store (memory, fakeredis, a real redis-server): each write the reference's §8 table
names records exactly its events, in order, in the same atomic step as the change (`identity_proto.events`);
`event_data` renders them as the original's payloads; a refused write records none.

The events are read back with `ListEvents`, in pages, as the delivery loop reads them. A store records them only while
the project has a webhook endpoint (no one else is owed them), so each project here has one (`subscribed`), and
`test_a_project_without_endpoints_records_no_events` checks the other case."""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson
import pytest
from redis.crc import key_slot

import backends.memory.store as memory_store_module
from backends.memory import MemoryStore
from backends.redis import RedisStore
from identity_proto.auth import AccessType
from identity_proto.changes import TeamChanges, UserChanges
from identity_proto.drivers import Store, arun, run
from identity_proto.effects import (
    EmailSignInOutcome,
    InvitationAcceptance,
    ListEvents,
    LoadTeam,
    LoadUser,
    PasswordWrite,
    TeamWrite,
    UpgradeRefusal,
    password_fingerprint,
    perform,
    reset_primary,
)
from identity_proto.effects.commit import CommitConflict, Committed, SessionIsLive
from identity_proto.effects.webhooks import EVENTS_IDLE_TTL_MS
from identity_proto.errors import ErrorCode
from identity_proto.events import EVENT_TYPES, MESSAGE_TAG_LENGTH, StoredEvent, event_data, event_payload
from identity_proto.flows.oauth import store_oauth_user
from identity_proto.flows.signin import NewUser
from identity_proto.flows.teams import add_member, store_team
from identity_proto.flows.users import drop_user, patch_user
from identity_proto.flows.webhooks import add_webhook_endpoint, drop_webhook_endpoint
from identity_proto.records import CodePurpose, OAuthAccount, ProjectConfig, Team, User, replaced
from identity_proto.render import render_team, render_user
from tests.contract.conftest import AsyncBackend
from tests.contract.factories import (
    EMAIL_TAKEN,
    ID_TAKEN,
    OTHER_PROJECT,
    PROJECT,
    T0,
    accept_invitation,
    add_membership,
    add_user,
    change_permission,
    create_team,
    delete_team,
    delete_user,
    grant_project_permissions,
    make_code,
    make_membership,
    make_session,
    make_team,
    make_user,
    patched_user,
    put_code,
    put_session,
    remove_membership,
    reset_password,
    revoke_project_permission,
    rich_user,
    set_user_fields,
    sign_in_by_email,
    sign_up_anonymously,
    subscribe,
    update_team,
    upgrade_anonymous,
    webhook_endpoint,
)

CONFIG = ProjectConfig()


@pytest.fixture(autouse=True)
def subscribed(request: pytest.FixtureRequest) -> None:
    """Both projects of a sync store have a webhook endpoint: events are recorded for them."""
    for name in ("store", "redis_store"):
        if name in request.fixturenames:
            store = request.getfixturevalue(name)
            for project_id in (PROJECT, OTHER_PROJECT):
                subscribe(store, project_id)


# --------------------------------------------------------------------------------------------------------------
# Reading what a store recorded


def recorded(store: Store, project_id: str = PROJECT) -> list[StoredEvent]:
    """Every event the store recorded for the project, oldest first (`ListEvents`, page by page)."""
    out: list[StoredEvent] = []
    while True:
        page = store.apply(ListEvents(project_id, after=out[-1].id if out else None, limit=7))
        out.extend(page)
        if len(page) < 7:
            return out


def events(store: Store, project_id: str = PROJECT) -> list[tuple[str, Any]]:
    """(type, data) of every recorded event: what receivers get."""
    return [(event.type, event_data(event, CONFIG)) for event in recorded(store, project_id)]


def since(store: Store, before: int, project_id: str = PROJECT) -> list[tuple[str, Any]]:
    return events(store, project_id)[before:]


def server_user(user: User, team: Team | None = None) -> dict[str, Any]:
    return render_user(user, AccessType.SERVER, CONFIG, team)


def server_team(team: Team) -> dict[str, Any]:
    return render_team(team, AccessType.SERVER)


def _user(store: Store, user_id: str) -> User:
    user = store.apply(LoadUser(PROJECT, user_id))
    assert user is not None
    return user


def _team(store: Store, team_id: str) -> Team:
    team = store.apply(LoadTeam(PROJECT, team_id))
    assert team is not None
    return team


# --------------------------------------------------------------------------------------------------------------
# Users


def test_creating_a_user_records_user_created_with_the_server_user(store: Store) -> None:
    user = make_user("ada", "ada@example.com", display_name="Ada ✓", server_metadata={"plan": ["pro", None]})
    assert store.apply(add_user(PROJECT, user)) == Committed((user,))
    assert events(store) == [("user.created", server_user(user))]
    assert events(store, OTHER_PROJECT) == []


def test_an_event_renders_the_stored_record_field_for_field(store: Store) -> None:
    # every field differs from its default: the Redis record's JSON text renders as the memory store's object
    user = replaced(rich_user(), {"selected_team_id": None})
    store.apply(add_user(PROJECT, user))
    (event,) = recorded(store)
    assert event_data(event, CONFIG) == server_user(user)
    assert event_payload(event, CONFIG).startswith(b'{"type":"user.created","data":{')
    assert event.id.startswith("msg_")


def test_a_refused_user_creation_records_nothing(store: Store) -> None:
    store.apply(add_user(PROJECT, make_user("ada", "ada@example.com")))
    before = len(recorded(store))
    assert store.apply(add_user(PROJECT, make_user("bob", "ada@example.com"))) == EMAIL_TAKEN
    assert store.apply(add_user(PROJECT, make_user("ada"))) == ID_TAKEN
    assert since(store, before) == []


def test_a_user_update_records_user_updated_with_the_selected_team_only_when_asked(store: Store) -> None:
    store.apply(add_user(PROJECT, make_user("ada")))
    team = make_team("team-1")
    create_team(store, PROJECT, team, make_membership(team.id, "ada"))
    before = len(recorded(store))
    # an internal write (the selected personal team, last activity) announces nothing
    store.apply(set_user_fields(PROJECT, "ada", (("selected_team_id", "team-1"), ("last_active_at_millis", T0 + 5))))
    assert since(store, before) == []
    # a PATCH does, with the user as stored after it and their selected team
    updated, _team = patched_user(store, PROJECT, "ada", UserChanges.of(display_name="Ada"))
    assert isinstance(updated, User)
    assert since(store, before) == [("user.updated", server_user(updated, team))]


def test_a_patch_that_changes_nothing_still_records_user_updated(store: Store) -> None:
    store.apply(add_user(PROJECT, make_user("ada")))
    before = len(recorded(store))
    result = patched_user(store, PROJECT, "ada", UserChanges.of())
    assert result == (make_user("ada"), None)
    assert since(store, before) == [("user.updated", server_user(make_user("ada")))]


def test_a_refused_user_update_records_nothing(store: Store) -> None:
    store.apply(add_user(PROJECT, make_user("ada", "ada@example.com")))
    store.apply(add_user(PROJECT, make_user("bob", "bob@example.com")))
    before = len(recorded(store))
    taken = patched_user(store, PROJECT, "bob", UserChanges.of(primary_email="ada@example.com"))
    assert taken is ErrorCode.USER_EMAIL_ALREADY_EXISTS
    missing = patched_user(store, PROJECT, "nobody", UserChanges.of(display_name="x"))
    assert missing is None
    gone = patched_user(
        store, PROJECT, "bob", UserChanges.of(display_name="x"), live=SessionIsLive("no-session", "bob", T0)
    )
    assert gone == "conflict"
    assert since(store, before) == []


def test_a_guarded_patch_records_user_updated_once_its_session_is_checked(store: Store) -> None:
    store.apply(add_user(PROJECT, make_user("ada")))
    put_session(store, PROJECT, make_session("s-1", "ada"))
    before = len(recorded(store))
    updated, _team = patched_user(
        store, PROJECT, "ada", UserChanges.of(display_name="Ada"), live=SessionIsLive("s-1", "ada", T0)
    )
    assert isinstance(updated, User)
    assert since(store, before) == [("user.updated", server_user(updated))]


def test_deleting_a_user_records_one_membership_deletion_per_team_then_user_deleted(store: Store) -> None:
    store.apply(add_user(PROJECT, make_user("ada")))
    store.apply(add_user(PROJECT, make_user("bob")))
    create_team(store, PROJECT, make_team("team-b"), make_membership("team-b", "ada"))
    create_team(store, PROJECT, make_team("team-a"))
    add_membership(store, PROJECT, make_membership("team-a", "ada"))
    add_membership(store, PROJECT, make_membership("team-a", "bob"))
    before = len(recorded(store))
    assert delete_user(store, PROJECT, "ada")
    assert since(store, before) == [
        # in membership order: the team created with ada first, then the one she joined
        ("team_membership.deleted", {"team_id": "team-b", "user_id": "ada"}),
        ("team_membership.deleted", {"team_id": "team-a", "user_id": "ada"}),
        ("user.deleted", {"id": "ada", "teams": [{"id": "team-b"}, {"id": "team-a"}]}),
    ]
    before = len(recorded(store))
    assert not delete_user(store, PROJECT, "ada")
    assert since(store, before) == []


def test_deleting_a_user_without_teams_records_user_deleted_alone(store: Store) -> None:
    store.apply(add_user(PROJECT, make_user("ada")))
    before = len(recorded(store))
    assert delete_user(store, PROJECT, "ada")
    assert since(store, before) == [("user.deleted", {"id": "ada", "teams": []})]


def test_a_password_reset_records_user_updated(store: Store) -> None:
    store.apply(add_user(PROJECT, make_user("ada", "ada@example.com", password_hash="old")))
    create_team(store, PROJECT, make_team("team-1"), make_membership("team-1", "ada"))
    store.apply(set_user_fields(PROJECT, "ada", UserChanges.of(selected_team_id="team-1")))
    fingerprint = password_fingerprint("old")
    code = make_code(
        "reset",
        purpose=CodePurpose.PASSWORD_RESET,
        user_id="ada",
        email="ada@example.com",
        password_fingerprint=fingerprint,
        primary_channel_id=reset_primary(_user(store, "ada")),
    )
    store.apply(put_code(PROJECT, code))
    before = len(recorded(store))
    assert reset_password(store, PROJECT, code, "new-hash") is PasswordWrite.DONE
    assert since(store, before) == [("user.updated", server_user(_user(store, "ada"), _team(store, "team-1")))]
    # refused: the code is used now, and a missing code
    assert reset_password(store, PROJECT, code, "other") is PasswordWrite.CODE_USED
    missing = dataclasses.replace(code, code_hash="code-none")
    assert reset_password(store, PROJECT, missing, "other") is PasswordWrite.CODE_NOT_FOUND
    assert len(recorded(store)) == before + 1


# --------------------------------------------------------------------------------------------------------------
# Sign-ups: user.created (without a selected team), then the personal team's team.created


def _personal(user_id: str) -> tuple[Team, Any]:
    team = Team(id=f"team-of-{user_id}", display_name="Personal Team", created_at_millis=T0)
    return team, make_membership(team.id, user_id, permissions=("team_admin",))


@pytest.mark.parametrize("with_team", [True, False], ids=["personal-team", "no-team"])
def test_an_email_sign_up_records_user_created_then_its_team(store: Store, with_team: bool) -> None:
    personal = _personal("ada") if with_team else None
    new_user = make_user("ada", "ada@example.com", selected_team_id=personal[0].id if personal else None)
    sign_up = sign_in_by_email(PROJECT, "ada@example.com", T0, True, new_user, make_session("s-1", "ada"), personal)
    assert run(sign_up, store).outcome is EmailSignInOutcome.SIGNED_UP
    expected = [("user.created", server_user(replaced(new_user, {"selected_team_id": None})))]
    if personal is not None:
        expected.append(("team.created", server_team(personal[0])))
    assert events(store) == expected
    # signing in again writes (verification, last activity) but announces nothing
    again = sign_in_by_email(PROJECT, "ada@example.com", T0 + 10, True, new_user, make_session("s-2", "ada"), personal)
    assert run(again, store).outcome in (EmailSignInOutcome.SIGNED_IN, EmailSignInOutcome.UNVERIFIED)
    assert events(store) == expected


def test_a_refused_email_sign_up_records_nothing(store: Store) -> None:
    new_user = make_user("ada", "ada@example.com")
    disabled = sign_in_by_email(PROJECT, "ada@example.com", T0, False, new_user, make_session("s-1", "ada"))
    assert run(disabled, store).outcome is EmailSignInOutcome.SIGN_UP_DISABLED
    store.apply(add_user(PROJECT, make_user("ada")))
    before = len(recorded(store))
    taken = sign_in_by_email(PROJECT, "ada@example.com", T0, True, new_user, make_session("s-2", "ada"))
    assert run(taken, store).outcome is EmailSignInOutcome.ID_TAKEN
    assert since(store, before) == []


def test_an_anonymous_sign_up_records_user_created_then_its_team(store: Store) -> None:
    personal = _personal("anon")
    user = make_user("anon", is_anonymous=True, selected_team_id=personal[0].id)
    assert run(sign_up_anonymously(PROJECT, user, make_session("s-1", "anon"), personal), store) == user
    assert events(store) == [
        ("user.created", server_user(replaced(user, {"selected_team_id": None}))),
        ("team.created", server_team(personal[0])),
    ]
    assert run(sign_up_anonymously(PROJECT, user, make_session("s-2", "anon")), store) is None  # id taken
    assert len(recorded(store)) == 2


def test_an_anonymous_upgrade_records_user_updated(store: Store) -> None:
    personal = _personal("anon")
    user = make_user("anon", is_anonymous=True, selected_team_id=personal[0].id)
    run(sign_up_anonymously(PROJECT, user, make_session("s-1", "anon"), personal), store)
    store.apply(add_user(PROJECT, make_user("bob", "bob@example.com")))
    before = len(recorded(store))
    changes = UserChanges.of(is_anonymous=False, primary_email="anon@example.com", primary_email_auth_enabled=True)
    upgraded = upgrade_anonymous(store, PROJECT, "anon", changes, "anon@example.com's Team")
    assert isinstance(upgraded, User)
    renamed = replaced(personal[0], {"display_name": "anon@example.com's Team"})
    assert since(store, before) == [("user.updated", server_user(upgraded, renamed))]
    # refused: not anonymous any more, an address taken, nobody
    assert upgrade_anonymous(store, PROJECT, "anon", changes, "x") is UpgradeRefusal.NOT_ANONYMOUS
    run(sign_up_anonymously(PROJECT, make_user("anon-2", is_anonymous=True), make_session("s-2", "anon-2")), store)
    before = len(recorded(store))
    taken = UserChanges.of(is_anonymous=False, primary_email="bob@example.com", primary_email_auth_enabled=True)
    assert upgrade_anonymous(store, PROJECT, "anon-2", taken, "x") is UpgradeRefusal.EMAIL_TAKEN
    assert upgrade_anonymous(store, PROJECT, "nobody", changes, "x") is UpgradeRefusal.NOT_FOUND
    assert since(store, before) == []


def test_an_oauth_sign_up_records_user_created_then_its_team(store: Store) -> None:
    personal = _personal("ada")
    account = OAuthAccount("acc-1", "github", "gh-1", email="ada@example.com", created_at_millis=T0)
    new_user = make_user("ada", "ada@example.com", oauth_accounts=(account,), selected_team_id=personal[0].id)
    assert run(store_oauth_user(PROJECT, NewUser(new_user, personal)), store) == new_user
    assert events(store) == [
        ("user.created", server_user(replaced(new_user, {"selected_team_id": None}))),
        ("team.created", server_team(personal[0])),
    ]
    other = make_user("bob", "bob@example.com", oauth_accounts=(replaced(account, {"id": "acc-2"}),))
    with pytest.raises(CommitConflict):  # the account is taken
        run(store_oauth_user(PROJECT, NewUser(other)), store)
    second = OAuthAccount("acc-3", "github", "gh-2", email="ada@example.com", created_at_millis=T0)
    same_address = make_user("bob", "ada@example.com", oauth_accounts=(second,))
    with pytest.raises(CommitConflict):  # the address is taken
        run(store_oauth_user(PROJECT, NewUser(same_address)), store)
    assert len(recorded(store)) == 2


# --------------------------------------------------------------------------------------------------------------
# Teams and memberships


def test_creating_a_team_records_team_created_and_not_the_creators_membership(store: Store) -> None:
    store.apply(add_user(PROJECT, make_user("ada")))
    team = make_team("team-1", client_metadata={"a": [1, None]}, profile_image_url="https://img.example.com/t.png")
    before = len(recorded(store))
    assert create_team(store, PROJECT, team, make_membership(team.id, "ada", permissions=("team_admin",)))
    assert since(store, before) == [("team.created", server_team(team))]
    before = len(recorded(store))
    refused = create_team(store, PROJECT, make_team("team-2"), make_membership("team-2", "nobody"))
    assert refused is TeamWrite.USER_NOT_FOUND
    assert since(store, before) == []


def test_updating_and_deleting_a_team_record_their_events(store: Store) -> None:
    store.apply(add_user(PROJECT, make_user("ada")))
    create_team(store, PROJECT, make_team("team-1"), make_membership("team-1", "ada"))
    before = len(recorded(store))
    updated = update_team(store, PROJECT, "team-1", TeamChanges.of(display_name="Renamed"))
    assert isinstance(updated, Team)
    assert update_team(store, PROJECT, "team-none", TeamChanges.of(display_name="x")) is None
    assert delete_team(store, PROJECT, "team-1")
    assert not delete_team(store, PROJECT, "team-1")
    assert since(store, before) == [
        ("team.updated", server_team(updated)),
        # as the original: no membership events for the members of a deleted team
        ("team.deleted", {"id": "team-1"}),
    ]


def test_adding_a_membership_records_it_then_one_permission_per_default_permission(store: Store) -> None:
    store.apply(add_user(PROJECT, make_user("ada")))
    create_team(store, PROJECT, make_team("team-1"))
    before = len(recorded(store))
    membership = make_membership("team-1", "ada", permissions=("$read_members", "team_member"))
    assert add_membership(store, PROJECT, membership) == membership
    assert since(store, before) == [
        ("team_membership.created", {"team_id": "team-1", "user_id": "ada"}),
        ("team_permission.created", {"id": "$read_members", "team_id": "team-1", "user_id": "ada"}),
        ("team_permission.created", {"id": "team_member", "team_id": "team-1", "user_id": "ada"}),
    ]
    before = len(recorded(store))
    assert add_membership(store, PROJECT, membership) is TeamWrite.MEMBERSHIP_EXISTS
    assert add_membership(store, PROJECT, make_membership("team-1", "nobody")) is TeamWrite.USER_NOT_FOUND
    assert add_membership(store, PROJECT, make_membership("team-none", "ada")) is TeamWrite.TEAM_NOT_FOUND
    assert since(store, before) == []


def test_removing_a_membership_records_team_membership_deleted(store: Store) -> None:
    store.apply(add_user(PROJECT, make_user("ada")))
    create_team(store, PROJECT, make_team("team-1"), make_membership("team-1", "ada"))
    before = len(recorded(store))
    assert remove_membership(store, PROJECT, "team-1", "ada")
    assert not remove_membership(store, PROJECT, "team-1", "ada")
    assert since(store, before) == [("team_membership.deleted", {"team_id": "team-1", "user_id": "ada"})]


def test_accepting_an_invitation_records_the_membership_and_its_permissions(store: Store) -> None:
    store.apply(add_user(PROJECT, make_user("ada")))
    create_team(store, PROJECT, make_team("team-1"))
    code = make_code("inv", purpose=CodePurpose.TEAM_INVITATION, id="inv-1", team_id="team-1", email="a@example.com")
    store.apply(put_code(PROJECT, code))
    before = len(recorded(store))
    membership = make_membership("team-1", "ada", permissions=("team_member",))
    accepted = accept_invitation(store, PROJECT, code, T0 + 1, membership)
    assert accepted is InvitationAcceptance.ACCEPTED
    assert since(store, before) == [
        ("team_membership.created", {"team_id": "team-1", "user_id": "ada"}),
        ("team_permission.created", {"id": "team_member", "team_id": "team-1", "user_id": "ada"}),
    ]
    before = len(recorded(store))
    again = accept_invitation(store, PROJECT, code, T0 + 1, membership)
    assert again is InvitationAcceptance.ALREADY_USED
    unknown = dataclasses.replace(code, code_hash="code-none")
    assert accept_invitation(store, PROJECT, unknown, T0 + 1, membership) is InvitationAcceptance.NOT_FOUND
    assert since(store, before) == []


# --------------------------------------------------------------------------------------------------------------
# Permissions


def test_team_permission_grants_and_revokes_record_their_events(store: Store) -> None:
    store.apply(add_user(PROJECT, make_user("ada")))
    create_team(store, PROJECT, make_team("team-1"), make_membership("team-1", "ada"))
    before = len(recorded(store))
    ids = {"id": "editor", "team_id": "team-1", "user_id": "ada"}
    assert change_permission(store, PROJECT, "team-1", "ada", "editor", True) is not None
    # granting one held already records it again (the original's upsert announces every grant)
    assert change_permission(store, PROJECT, "team-1", "ada", "editor", True) is not None
    assert change_permission(store, PROJECT, "team-1", "ada", "editor", False) is not None
    # revoking one not held changes nothing and records nothing; no membership: nothing
    assert change_permission(store, PROJECT, "team-1", "ada", "editor", False) is not None
    assert change_permission(store, PROJECT, "team-1", "nobody", "editor", True) is None
    assert since(store, before) == [
        ("team_permission.created", ids),
        ("team_permission.created", ids),
        ("team_permission.deleted", ids),
    ]


def test_explicit_project_permission_grants_record_events_and_sign_up_defaults_do_not(store: Store) -> None:
    store.apply(add_user(PROJECT, make_user("ada")))
    before = len(recorded(store))
    assert grant_project_permissions(store, PROJECT, "ada", ("read", "write"))  # sign-up defaults
    assert since(store, before) == []
    assert grant_project_permissions(store, PROJECT, "ada", ("admin",), records_events=True)
    assert not grant_project_permissions(store, PROJECT, "nobody", ("admin",), records_events=True)
    assert revoke_project_permission(store, PROJECT, "ada", "read")
    assert not revoke_project_permission(store, PROJECT, "ada", "read")
    assert since(store, before) == [
        ("project_permission.created", {"id": "admin", "user_id": "ada"}),
        ("project_permission.deleted", {"id": "read", "user_id": "ada"}),
    ]


# --------------------------------------------------------------------------------------------------------------
# Across writes


def test_message_ids_are_unique_and_in_recording_order(store: Store) -> None:
    for n in range(5):
        store.apply(add_user(PROJECT, make_user(f"user-{n}")))
        delete_user(store, PROJECT, f"user-{n}")
    ids = [event.id for event in recorded(store)]
    assert len(ids) == len(set(ids)) == 10
    if isinstance(store, MemoryStore):
        assert ids == sorted(ids)
    else:  # stream ids: msg_<tag><ms>-<seq>, increasing
        start = len("msg_") + MESSAGE_TAG_LENGTH
        assert [tuple(map(int, i[start:].split("-"))) for i in ids] == sorted(
            tuple(map(int, i[start:].split("-"))) for i in ids
        )
    assert {event.type for event in recorded(store)} <= set(EVENT_TYPES)


def test_two_projects_never_share_a_message_id(store: Store) -> None:
    """Receivers deduplicate on the id: the same writes in two projects (in the same millisecond or not) make
    ids of their own, each project's with its tag."""
    for project in (PROJECT, OTHER_PROJECT):
        store.apply(add_user(project, make_user("ada")))
        delete_user(store, project, "ada")
    first = [event.id for event in store.apply(ListEvents(PROJECT))]
    second = [event.id for event in store.apply(ListEvents(OTHER_PROJECT))]
    assert len(first) == len(second) == 2
    assert set(first).isdisjoint(second)
    assert len({i[: len("msg_") + MESSAGE_TAG_LENGTH] for i in first}) == 1
    # One project's id means nothing in another: listing after it lists nothing.
    assert store.apply(ListEvents(OTHER_PROJECT, after=first[0])) == ()


def test_each_project_records_its_own_events(store: Store) -> None:
    store.apply(add_user(PROJECT, make_user("ada")))
    store.apply(add_user(OTHER_PROJECT, make_user("bob")))
    assert [data["id"] for _, data in events(store)] == ["ada"]
    assert [data["id"] for _, data in events(store, OTHER_PROJECT)] == ["bob"]


def test_the_user_in_user_created_is_the_user_as_stored_at_that_moment(store: Store) -> None:
    # the payload is the state right after the change, not at delivery: a later update changes no earlier event
    store.apply(add_user(PROJECT, make_user("ada", display_name="First")))
    patched_user(store, PROJECT, "ada", UserChanges.of(display_name="Second"))
    assert [data["display_name"] for _, data in events(store)] == ["First", "Second"]


# --------------------------------------------------------------------------------------------------------------
# Redis: the stream the scripts append to


def test_redis_scripts_append_events_to_the_projects_stream_in_its_slot(redis_store: RedisStore) -> None:
    user = make_user("ada", "ada@example.com")
    redis_store.apply(add_user(PROJECT, user))
    create_team(redis_store, PROJECT, make_team("team-1"), make_membership("team-1", "ada"))
    redis_store.apply(set_user_fields(PROJECT, "ada", UserChanges.of(selected_team_id="team-1")))
    patched_user(redis_store, PROJECT, "ada", UserChanges.of(display_name="Ada"))
    remove_membership(redis_store, PROJECT, "team-1", "ada")
    client, keys = redis_store.client, redis_store.keys
    stream = keys.events(PROJECT)
    assert stream == f"{keys.namespace}{{p:{PROJECT}}}:events"
    assert key_slot(stream.encode()) == key_slot(keys.user(PROJECT, "ada").encode())
    assert client.type(stream) == b"stream"
    entries = [{k.decode(): v.decode() for k, v in fields.items()} for _, fields in client.xrange(stream)]
    assert [entry["t"] for entry in entries] == [
        "user.created",
        "team.created",
        "user.updated",
        "team_membership.deleted",
    ]
    # a record is the JSON text of the stored hash (one field per record field), never re-encoded
    created = orjson.loads(entries[0]["r"])
    assert set(created) == {f.name for f in dataclasses.fields(User)}
    assert created["primary_email"] == "ada@example.com"
    assert (entries[0]["m"], entries[0]["i"]) == ("", "")
    assert orjson.loads(entries[2]["m"])["id"] == "team-1"  # the selected team, as stored
    assert (entries[3]["r"], entries[3]["m"], entries[3]["i"]) == ("", "", "team-1\nada")
    # Bounded without any delivery loop: an idle project's stream expires (its TTL renewed by every event).
    assert 0 < client.pttl(stream) <= EVENTS_IDLE_TTL_MS


def test_the_async_stores_record_the_same_events(async_store: AsyncBackend) -> None:
    async def scenario(store: Any) -> list[tuple[str, Any]]:
        async def do(effect: Any) -> Any:
            return await arun(perform(effect), store)

        await arun(add_webhook_endpoint(PROJECT, webhook_endpoint()), store)
        await do(add_user(PROJECT, make_user("ada")))
        await arun(store_team(PROJECT, make_team("team-1")), store)
        await arun(add_member(PROJECT, make_membership("team-1", "ada", permissions=("team_member",))), store)
        await arun(patch_user(PROJECT, "ada", UserChanges.of()), store)
        await arun(drop_user(PROJECT, "ada"), store)
        listed = await do(ListEvents(PROJECT))
        return [(event.type, event_data(event, CONFIG)) for event in listed]

    ids = {"team_id": "team-1", "user_id": "ada"}
    assert async_store.run(scenario) == [
        ("user.created", server_user(make_user("ada"))),
        ("team.created", server_team(make_team("team-1"))),
        ("team_membership.created", ids),
        ("team_permission.created", {"id": "team_member", **ids}),
        ("user.updated", server_user(make_user("ada"))),
        ("team_membership.deleted", ids),
        ("user.deleted", {"id": "ada", "teams": [{"id": "team-1"}]}),
    ]


def test_the_memory_store_keeps_at_most_the_hard_cap_of_a_projects_events(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory_store_module, "EVENTS_HARD_CAP", 3)
    store = MemoryStore(keep_every_event=True)  # the fake's: without endpoints, only the cap bounds them
    for n in range(5):
        store.apply(add_user(PROJECT, make_user(f"user-{n}")))
    kept = store.apply(ListEvents(PROJECT))
    assert [event.record.id for event in kept] == ["user-2", "user-3", "user-4"]
    tag = store.tenant(PROJECT).event_tag
    assert [event.id for event in kept] == [f"msg_{tag}{n:012d}" for n in (3, 4, 5)]


# --------------------------------------------------------------------------------------------------------------
# Only while someone is owed them


def test_a_project_without_endpoints_records_no_events(store: Store) -> None:
    # An endpoint gets only the events recorded after its creation: one recorded while the project has none is owed
    # to no one, and keeping it would make the project's memory grow with its writes.
    run(drop_webhook_endpoint(OTHER_PROJECT, "ep-1"), store)
    store.apply(add_user(OTHER_PROJECT, make_user("ada")))
    patched_user(store, OTHER_PROJECT, "ada", UserChanges.of(display_name="Ada"))
    assert recorded(store, OTHER_PROJECT) == []
    run(add_webhook_endpoint(OTHER_PROJECT, webhook_endpoint("ep-2")), store)
    patched_user(store, OTHER_PROJECT, "ada", UserChanges.of(display_name="Ada again"))
    assert [(kind, data["display_name"]) for kind, data in events(store, OTHER_PROJECT)] == [
        ("user.updated", "Ada again")
    ]
    run(drop_webhook_endpoint(OTHER_PROJECT, "ep-2"), store)
    patched_user(store, OTHER_PROJECT, "ada", UserChanges.of(display_name="Ada once more"))
    assert len(recorded(store, OTHER_PROJECT)) == 1  # nothing more once its last endpoint is gone
    assert [kind for kind, _ in events(store)] == []  # the other project's endpoint changed nothing here


def test_the_fakes_memory_store_records_events_without_endpoints() -> None:
    store = MemoryStore(keep_every_event=True)
    store.apply(add_user(PROJECT, make_user("ada")))
    assert [kind for kind, _ in events(store)] == ["user.created"]
