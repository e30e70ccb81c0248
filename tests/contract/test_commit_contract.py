"""The generic write, `Commit` (`identity_proto.effects.commit`), over every store: memory, fakeredis and a real
Redis (sync and asyncio). What a commit writes is what the typed reads read back, as the specific writes store it;
a guard that does not hold refuses the whole commit (nothing written, no event); concurrent commits of one change
resolve exactly once; field-level patches of different fields both survive."""

from __future__ import annotations

from typing import Any

import pytest

from identity_proto.changes import TeamChanges, UserChanges
from identity_proto.drivers import Store
from identity_proto.effects import (
    ListMemberships,
    ListProjectPermissions,
    ListTeams,
    ListUsers,
    LoadTeam,
    LoadUser,
    PutProject,
    find_user_by_email,
    find_user_by_oauth_account,
)
from identity_proto.effects.commit import (
    Announce,
    Commit,
    Committed,
    Conflict,
    DropIndex,
    FieldsAre,
    GrantPermissions,
    IndexIs,
    IndexName,
    IsAbsent,
    PatchTeam,
    PatchUser,
    PutMembership,
    PutTeam,
    PutUser,
    RecordKind,
    SessionIsLive,
    SetIndex,
)
from identity_proto.records import Membership, Project, Team, User, replaced
from tests.contract.conftest import AsyncBackend
from tests.contract.factories import (
    OTHER_PROJECT,
    PROJECT,
    T0,
    add_user,
    in_threads,
    make_session,
    make_team,
    make_user,
    put_session,
    subscribe,
)
from tests.contract.test_webhook_events import events, server_team, server_user

EMAIL = "ada@example.com"


def sign_up(user: User, team: Team) -> Commit:
    """A sign-up as the core builds it: the user, its index entry, its personal team with the user as member,
    default permissions, and the events, all guarded on the id and the address being free."""
    assert user.primary_email is not None
    membership = Membership(team.id, user.id, T0, permissions=("team_admin",))
    return Commit(
        PROJECT,
        guards=(IsAbsent(RecordKind.USER, user.id), IndexIs(IndexName.EMAIL, user.primary_email, None)),
        writes=(
            PutUser(user),
            SetIndex(IndexName.EMAIL, user.primary_email, user.id),
            PutTeam(team),
            PutMembership(membership),
            GrantPermissions(user.id, ("member",)),
        ),
        events=(
            Announce("user.created", (RecordKind.USER, user.id), unselected=True),
            Announce("team.created", (RecordKind.TEAM, team.id)),
            Announce("team_membership.created", ids=(team.id, user.id)),
        ),
    )


def test_a_commit_writes_what_the_reads_read_back(store: Store) -> None:
    subscribe(store, PROJECT)  # events are recorded for a project with a webhook endpoint
    team = make_team("t1")
    user = make_user("u1", EMAIL, selected_team_id="t1")
    assert store.apply(sign_up(user, team)) == Committed()

    assert store.apply(LoadUser(PROJECT, "u1")) == user
    assert store.apply(find_user_by_email(PROJECT, EMAIL)) == user
    assert [u.id for u in store.apply(ListUsers(PROJECT))] == ["u1"]
    assert store.apply(LoadTeam(PROJECT, "t1")) == team
    assert store.apply(ListTeams(PROJECT, user_id="u1")) == (team,)
    assert store.apply(ListMemberships(PROJECT, team_id="t1")) == (
        Membership("t1", "u1", T0, permissions=("team_admin",)),
    )
    assert store.apply(ListProjectPermissions(PROJECT, "u1")) == (("u1", ("member",)),)
    # The events, with their records as stored once the writes were applied (the user before selecting its team).
    assert events(store) == [
        ("user.created", server_user(replaced(user, {"selected_team_id": None}))),
        ("team.created", server_team(team)),
        ("team_membership.created", {"team_id": "t1", "user_id": "u1"}),
    ]
    # Another project is untouched.
    assert store.apply(LoadUser(OTHER_PROJECT, "u1")) is None


def test_a_guard_that_does_not_hold_refuses_the_whole_commit(store: Store) -> None:
    subscribe(store, PROJECT)  # events are recorded for a project with a webhook endpoint
    assert isinstance(store.apply(add_user(PROJECT, make_user("u1", EMAIL))), Committed)
    before = events(store)
    # The address is taken (guard 1 of the sign-up): nothing of the second user, its team or events.
    refused = store.apply(sign_up(make_user("u2", EMAIL), make_team("t2")))
    assert refused == Conflict(1)
    assert store.apply(LoadUser(PROJECT, "u2")) is None
    assert store.apply(LoadTeam(PROJECT, "t2")) is None
    assert store.apply(ListMemberships(PROJECT, team_id="t2")) == ()
    assert store.apply(ListProjectPermissions(PROJECT, "u2")) == ()
    assert store.apply(find_user_by_email(PROJECT, EMAIL)).id == "u1"  # type: ignore[union-attr]
    assert events(store) == before
    # The id is taken (guard 0).
    assert store.apply(sign_up(make_user("u1", "other@example.com"), make_team("t3"))) == Conflict(0)
    assert store.apply(find_user_by_email(PROJECT, "other@example.com")) is None


def test_fields_are_compares_exactly_the_named_fields(store: Store) -> None:
    read = make_user("u1", EMAIL, display_name="Ada", client_metadata={"a": 1})
    store.apply(add_user(PROJECT, read))
    # Another writer changes the display name after `read` was read.
    assert (
        store.apply(Commit(PROJECT, (FieldsAre(read),), (PatchUser("u1", UserChanges.of(display_name="B")),)))
        == Committed()
    )
    # A write that depended only on the metadata still commits; one that depended on the name conflicts.
    on_metadata = Commit(
        PROJECT, (FieldsAre(read, ("client_metadata",)),), (PatchUser("u1", UserChanges.of(server_metadata=[1])),)
    )
    on_name = Commit(
        PROJECT, (FieldsAre(read, ("display_name",)),), (PatchUser("u1", UserChanges.of(is_anonymous=True)),)
    )
    assert store.apply(on_metadata) == Committed()
    assert store.apply(on_name) == Conflict(0)
    stored = store.apply(LoadUser(PROJECT, "u1"))
    assert stored is not None
    assert (stored.display_name, stored.server_metadata, stored.is_anonymous) == ("B", [1], False)
    # A record that does not exist never matches.
    assert store.apply(Commit(PROJECT, (FieldsAre(make_user("nobody")),))) == Conflict(0)


def test_index_guards_and_writes(store: Store) -> None:
    store.apply(add_user(PROJECT, make_user("u1", EMAIL)))
    assert store.apply(Commit(PROJECT, (IndexIs(IndexName.EMAIL, EMAIL, "u2"),))) == Conflict(0)
    moved = Commit(
        PROJECT,
        (IndexIs(IndexName.EMAIL, EMAIL, "u1"), IndexIs(IndexName.OAUTH, "github\n42", None)),
        (DropIndex(IndexName.EMAIL, EMAIL), SetIndex(IndexName.OAUTH, "github\n42", "u1")),
    )
    assert store.apply(moved) == Committed()
    assert store.apply(find_user_by_email(PROJECT, EMAIL)) is None
    found = store.apply(find_user_by_oauth_account(PROJECT, "github", "42"))
    assert found is not None
    assert found.id == "u1"


def test_a_session_guard_holds_only_while_the_session_lives(store: Store) -> None:
    store.apply(add_user(PROJECT, make_user("u1", EMAIL)))
    session = make_session("s1", "u1")
    put_session(store, PROJECT, session)
    patch = (PatchUser("u1", UserChanges.of(display_name="live")),)
    assert store.apply(Commit(PROJECT, (SessionIsLive("s1", "u1", T0),), patch)) == Committed()
    assert store.apply(Commit(PROJECT, (SessionIsLive("s1", "u2", T0),), patch)) == Conflict(0)
    assert store.apply(Commit(PROJECT, (SessionIsLive("s1", "u1", session.expires_at_millis),), patch)) == Conflict(0)
    assert store.apply(Commit(PROJECT, (SessionIsLive("gone", "u1", T0),), patch)) == Conflict(0)


def test_concurrent_patches_of_different_fields_both_survive(store: Store) -> None:
    read = make_user("u1", EMAIL)
    store.apply(add_user(PROJECT, read))
    team = make_team("t1")
    store.apply(Commit(PROJECT, (IsAbsent(RecordKind.TEAM, "t1"),), (PutTeam(team),)))

    def patch(**fields: Any) -> Any:
        return store.apply(Commit(PROJECT, (FieldsAre(read),), (PatchUser("u1", UserChanges.of(**fields)),)))

    for n in range(10):
        in_threads(lambda n=n: patch(display_name=f"n{n}"), lambda n=n: patch(client_metadata={"n": n}))
        stored = store.apply(LoadUser(PROJECT, "u1"))
        assert stored is not None
        assert (stored.display_name, stored.client_metadata) == (f"n{n}", {"n": n})
    assert store.apply(Commit(PROJECT, (), (PatchTeam("t1", TeamChanges.of(display_name="T")),))) == Committed()
    assert store.apply(LoadTeam(PROJECT, "t1")).display_name == "T"  # type: ignore[union-attr]


def test_of_concurrent_sign_ups_of_one_address_exactly_one_commits(store: Store) -> None:
    subscribe(store, PROJECT)  # events are recorded for a project with a webhook endpoint

    def attempt(n: int) -> Conflict | Committed:
        return store.apply(sign_up(make_user(f"u{n}", EMAIL), make_team(f"t{n}")))  # type: ignore[no-any-return]

    results = in_threads(*(lambda n=n: attempt(n) for n in range(8)))
    winners = [n for n, result in enumerate(results) if result == Committed()]
    assert len(winners) == 1
    assert all(result == Conflict(1) for result in results if result != Committed())
    assert [u.id for u in store.apply(ListUsers(PROJECT))] == [f"u{winners[0]}"]
    assert [t.id for t in store.apply(ListTeams(PROJECT))] == [f"t{winners[0]}"]
    assert [kind for kind, _data in events(store)] == ["user.created", "team.created", "team_membership.created"]


def test_the_async_stores_commit_alike(async_store: AsyncBackend) -> None:
    async def scenario(store: Any) -> None:
        user, team = make_user("u1", EMAIL, selected_team_id="t1"), make_team("t1")
        assert await store.apply(sign_up(user, team)) == Committed()
        assert await store.apply(sign_up(make_user("u2", EMAIL), make_team("t2"))) == Conflict(1)
        assert await store.apply(LoadUser(PROJECT, "u1")) == user
        assert await store.apply(LoadUser(PROJECT, "u2")) is None

    async_store.run(scenario)


@pytest.mark.parametrize("kind", list(RecordKind))
def test_is_absent_names_each_record_kind(store: Store, kind: RecordKind) -> None:
    puts = {
        RecordKind.USER: PutUser(make_user("x1")),
        RecordKind.TEAM: PutTeam(make_team("x1")),
        RecordKind.PROJECT: PutProject(Project("x1", "X", 1, "00" * 32)),  # a commit's project is its own
    }
    project_id = "x1" if kind is RecordKind.PROJECT else PROJECT
    assert store.apply(Commit(project_id, (IsAbsent(kind, "x1"),), (puts[kind],))) == Committed()
    assert store.apply(Commit(project_id, (IsAbsent(kind, "x1"),), (puts[kind],))) == Conflict(0)


def test_a_commit_answers_with_the_records_it_was_asked_for_as_stored_now(store: Store) -> None:
    read = make_user("u1", EMAIL, display_name="Ada", client_metadata={"a": 1})
    store.apply(add_user(PROJECT, read))
    store.apply(Commit(PROJECT, (FieldsAre(read),), (PatchUser("u1", UserChanges.of(client_metadata={"b": 2})),)))
    answer = store.apply(
        Commit(
            PROJECT,
            (FieldsAre(read),),
            (PatchUser("u1", UserChanges.of(display_name="Grace")),),
            returns=((RecordKind.USER, "u1"), (RecordKind.TEAM, "no-team")),
        )
    )
    assert answer == Committed((replaced(read, {"display_name": "Grace", "client_metadata": {"b": 2}}), None))


def test_a_session_put_by_a_commit_is_used_listed_and_dropped(store: Store) -> None:
    from identity_proto.effects import DropSession, ListSessions, UseRefreshToken
    from identity_proto.effects.commit import PutSession

    store.apply(add_user(PROJECT, make_user("u1", EMAIL)))
    session = make_session("s1", "u1")
    assert store.apply(Commit(PROJECT, (), (PutSession(session),))) == Committed()
    assert [s.id for s in store.apply(ListSessions(PROJECT, "u1"))] == ["s1"]
    used = store.apply(UseRefreshToken(PROJECT, session.refresh_token_hash, T0 + 1))
    assert used is not None
    assert used[0].id == "s1"
    assert store.apply(Commit(PROJECT, (), (DropSession(session),))) == Committed()
    assert store.apply(ListSessions(PROJECT, "u1")) == ()
    assert store.apply(UseRefreshToken(PROJECT, session.refresh_token_hash, T0 + 2)) is None
    assert store.apply(Commit(PROJECT, (SessionIsLive("s1", "u1", T0),))) == Conflict(0)
    assert store.apply(Commit(PROJECT, (), (DropSession(session),))) == Committed()  # gone already: no error
