"""The team and membership contract (CreateTeam, LoadTeam, ListTeams, an update (`patch_team`), DeleteTeam;
AddMembership, LoadMembership, ListMemberships, RemoveMembership, UpdateMembership, ChangePermission) over every
store."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from redis.crc import key_slot

from backends.redis import RedisStore
from identity_proto.changes import MembershipChanges, TeamChanges
from identity_proto.drivers import Store, arun
from identity_proto.effects import (
    ListMemberships,
    ListTeams,
    LoadMembership,
    LoadTeam,
    LoadUser,
    TeamWrite,
    perform,
)
from identity_proto.effects.commit import Committed
from identity_proto.flows.teams import (
    add_member,
    drop_team,
    patch_membership,
    patch_team,
    remove_member,
    store_team,
)
from identity_proto.flows.teams import change_permission as change_permission_flow
from identity_proto.records import Membership, Team, User
from tests.contract.conftest import AsyncBackend
from tests.contract.factories import (
    OTHER_PROJECT,
    PROJECT,
    T0,
    add_membership,
    add_user,
    change_permission,
    create_team,
    delete_team,
    in_threads,
    make_membership,
    make_team,
    make_user,
    patched_user,
    remove_membership,
    rich_team,
    update_membership,
    update_team,
)


def _users(store: Store, *user_ids: str, project_id: str = PROJECT) -> list[User]:
    users = [make_user(user_id) for user_id in user_ids]
    for user in users:
        assert store.apply(add_user(project_id, user)) == Committed((user,))
    return users


def _teams(store: Store, *teams: Team, project_id: str = PROJECT) -> None:
    for team in teams:
        assert create_team(store, project_id, team) == team


def _select(store: Store, user_id: str, team_id: str | None) -> None:
    assert isinstance(patched_user(store, PROJECT, user_id, (("selected_team_id", team_id),))[0], User)


def _selected(store: Store, user_id: str) -> str | None:
    user = store.apply(LoadUser(PROJECT, user_id))
    assert user is not None
    return user.selected_team_id


# --------------------------------------------------------------------------------------------------------------
# CreateTeam, LoadTeam


def test_load_of_a_missing_team_is_none(store: Store) -> None:
    assert store.apply(LoadTeam(PROJECT, "no-team")) is None


def test_create_then_load_round_trips_every_field(store: Store) -> None:
    team = rich_team()

    assert create_team(store, PROJECT, team) == team

    loaded = store.apply(LoadTeam(PROJECT, team.id))
    assert loaded == team
    assert loaded is not None
    assert loaded.client_metadata == {
        "theme": "dark",
        "nested": {"list": [1, 2.5, None, True, "ß"], "empty": {}},
        "n": None,
    }
    assert loaded.server_metadata == {"plan": "pro", "quota": 12_345_678_901, "tags": [], "emoji": "🎉"}
    assert store.apply(ListMemberships(PROJECT, team_id=team.id)) == ()
    assert store.apply(LoadTeam(OTHER_PROJECT, team.id)) is None


def test_create_with_a_creator_stores_the_membership_with_the_team(store: Store) -> None:
    (user,) = _users(store, "user-1")
    team = make_team("team-1")
    creator = make_membership(team.id, user.id, permissions=("$read_members", "team_admin"), display_name="Boss ✓")

    assert create_team(store, PROJECT, team, creator) == team

    assert store.apply(LoadTeam(PROJECT, team.id)) == team
    assert store.apply(LoadMembership(PROJECT, team.id, user.id)) == creator
    assert store.apply(ListMemberships(PROJECT, team_id=team.id)) == (creator,)
    assert store.apply(ListMemberships(PROJECT, user_id=user.id)) == (creator,)
    assert store.apply(ListTeams(PROJECT, user.id)) == (team,)


def test_create_with_a_missing_creator_is_user_not_found_and_writes_nothing(store: Store) -> None:
    _users(store, "user-1", project_id=OTHER_PROJECT)  # a user of that id, in another project
    team = make_team("team-1")

    assert create_team(store, PROJECT, team, make_membership(team.id, "user-1")) is TeamWrite.USER_NOT_FOUND

    assert store.apply(LoadTeam(PROJECT, team.id)) is None
    assert store.apply(ListTeams(PROJECT)) == ()
    assert store.apply(ListTeams(PROJECT, "user-1")) == ()
    assert store.apply(ListMemberships(PROJECT)) == ()
    assert store.apply(LoadMembership(PROJECT, team.id, "user-1")) is None


# --------------------------------------------------------------------------------------------------------------
# ListTeams


def test_list_is_oldest_first_with_ties_by_id(store: Store) -> None:
    oldest = make_team("t-oldest", created_at=T0 - 10)
    tie_a = make_team("t-tie-a")
    tie_b = make_team("t-tie-b")
    newest = make_team("t-newest", created_at=T0 + 10)
    _teams(store, tie_b, newest, oldest, tie_a)

    assert store.apply(ListTeams(PROJECT)) == (oldest, tie_a, tie_b, newest)
    assert store.apply(ListTeams(OTHER_PROJECT)) == ()


def test_list_for_a_user_is_the_users_teams_in_team_order(store: Store) -> None:
    alice, bob = _users(store, "alice", "bob")
    oldest = make_team("t-oldest", created_at=T0 - 10)
    tie_a = make_team("t-tie-a")
    tie_b = make_team("t-tie-b")
    newest = make_team("t-newest", created_at=T0 + 10)
    _teams(store, oldest, tie_a, tie_b, newest)
    for team in (newest, tie_b, oldest):  # joined in another order than the teams'
        add_membership(store, PROJECT, make_membership(team.id, alice.id))
    add_membership(store, PROJECT, make_membership(tie_a.id, bob.id))

    assert store.apply(ListTeams(PROJECT, alice.id)) == (oldest, tie_b, newest)
    assert store.apply(ListTeams(PROJECT, bob.id)) == (tie_a,)
    assert store.apply(ListTeams(PROJECT, "nobody")) == ()
    assert store.apply(ListTeams(OTHER_PROJECT, alice.id)) == ()


# --------------------------------------------------------------------------------------------------------------
# Updating a team (`patch_team`: a read, then one Commit)


def test_update_sets_the_given_fields_and_returns_the_team(store: Store) -> None:
    team = rich_team()
    create_team(store, PROJECT, team)
    changes = (
        ("display_name", "Renamed ✓"),
        ("profile_image_url", None),
        ("client_metadata", {"new": ["ü", None, {"x": 1}]}),
        ("server_metadata", []),
    )

    updated = update_team(store, PROJECT, team.id, changes)

    expected = dataclasses.replace(team, **dict(changes))
    assert updated == expected
    assert store.apply(LoadTeam(PROJECT, team.id)) == expected
    assert update_team(store, PROJECT, team.id, ()) == expected


def test_update_of_a_missing_team_is_none_and_creates_nothing(store: Store) -> None:
    assert update_team(store, PROJECT, "no-team", (("display_name", "Ghost"),)) is None

    assert store.apply(LoadTeam(PROJECT, "no-team")) is None
    assert store.apply(ListTeams(PROJECT)) == ()


def test_update_of_an_unknown_field_is_a_type_error(store: Store) -> None:
    team = make_team("team-1")
    create_team(store, PROJECT, team)

    with pytest.raises(TypeError):
        update_team(store, PROJECT, team.id, (("no_such_field", 1),))
    assert store.apply(LoadTeam(PROJECT, team.id)) == team


def test_changing_the_creation_time_moves_the_team_in_the_list(store: Store) -> None:
    first, second = make_team("t-1", created_at=T0), make_team("t-2", created_at=T0 + 1)
    _teams(store, first, second)

    moved = update_team(store, PROJECT, first.id, (("created_at_millis", T0 + 2),))

    assert store.apply(ListTeams(PROJECT)) == (second, moved)


def test_concurrent_updates_of_different_fields_both_survive(store: Store) -> None:
    team = rich_team()
    create_team(store, PROJECT, team)

    def writer(field: str, value: Any) -> None:
        for i in range(25):
            assert isinstance(update_team(store, PROJECT, team.id, ((field, value(i)),)), Team)

    in_threads(
        lambda: writer("display_name", lambda i: f"name-{i}"),
        lambda: writer("client_metadata", lambda i: {"i": i}),
    )

    final = store.apply(LoadTeam(PROJECT, team.id))
    assert final == dataclasses.replace(team, display_name="name-24", client_metadata={"i": 24})


# --------------------------------------------------------------------------------------------------------------
# DeleteTeam


def test_delete_removes_the_team_with_its_memberships_only(store: Store) -> None:
    alice, bob = _users(store, "alice", "bob")
    doomed, kept = make_team("t-doomed"), make_team("t-kept", created_at=T0 + 1)
    _teams(store, doomed, kept)
    in_kept = make_membership(kept.id, alice.id)
    for membership in (
        make_membership(doomed.id, alice.id),
        in_kept,
        make_membership(doomed.id, bob.id),
    ):
        add_membership(store, PROJECT, membership)

    assert delete_team(store, PROJECT, doomed.id) is True
    assert delete_team(store, PROJECT, doomed.id) is False

    assert store.apply(LoadTeam(PROJECT, doomed.id)) is None
    assert store.apply(ListTeams(PROJECT)) == (kept,)
    assert store.apply(ListTeams(PROJECT, alice.id)) == (kept,)
    assert store.apply(ListTeams(PROJECT, bob.id)) == ()
    assert store.apply(LoadMembership(PROJECT, doomed.id, alice.id)) is None
    assert store.apply(ListMemberships(PROJECT, team_id=doomed.id)) == ()
    assert store.apply(ListMemberships(PROJECT)) == (in_kept,)
    assert store.apply(ListMemberships(PROJECT, user_id=alice.id)) == (in_kept,)
    assert update_team(store, PROJECT, doomed.id, (("display_name", "x"),)) is None
    assert add_membership(store, PROJECT, make_membership(doomed.id, bob.id)) is TeamWrite.TEAM_NOT_FOUND
    # users stay
    assert store.apply(LoadUser(PROJECT, bob.id)) == bob


def test_delete_of_a_missing_team_is_false(store: Store) -> None:
    assert delete_team(store, PROJECT, "no-team") is False


def test_delete_deselects_the_team_for_every_member_who_had_it_selected(store: Store) -> None:
    alice, bob, carol = _users(store, "alice", "bob", "carol")
    doomed, other = make_team("t-doomed"), make_team("t-other")
    _teams(store, doomed, other)
    for user in (alice, bob, carol):
        add_membership(store, PROJECT, make_membership(doomed.id, user.id))
    add_membership(store, PROJECT, make_membership(other.id, bob.id))
    _select(store, alice.id, doomed.id)
    _select(store, bob.id, other.id)

    assert delete_team(store, PROJECT, doomed.id) is True

    assert _selected(store, alice.id) is None
    assert _selected(store, bob.id) == other.id  # another team selected: kept
    assert _selected(store, carol.id) is None  # had none
    alice_now = store.apply(LoadUser(PROJECT, alice.id))
    assert alice_now == alice  # nothing else changed


def test_a_team_deleted_while_members_are_added_keeps_none(store: Store) -> None:
    users = _users(store, *[f"user-{i}" for i in range(10)])
    team = make_team("team-1")
    _teams(store, team)

    results = in_threads(
        *[lambda u=u: add_membership(store, PROJECT, make_membership(team.id, u.id)) for u in users],
        lambda: delete_team(store, PROJECT, team.id),
    )

    assert results[-1] is True
    assert all(isinstance(r, Membership) or r is TeamWrite.TEAM_NOT_FOUND for r in results[:-1])
    assert store.apply(ListMemberships(PROJECT)) == ()
    for user in users:
        assert store.apply(ListTeams(PROJECT, user.id)) == ()


# --------------------------------------------------------------------------------------------------------------
# AddMembership, LoadMembership


def test_add_then_load_round_trips_every_field(store: Store) -> None:
    (user,) = _users(store, "user-1")
    _teams(store, make_team("team-1"))
    membership = make_membership(
        "team-1",
        user.id,
        created_at=T0 + 7,
        display_name="Zoë ✓ «member»",
        profile_image_url="https://img.example.com/m/ü.png",
        permissions=("$read_members", "team_admin", "ünïcode"),
    )

    assert add_membership(store, PROJECT, membership) == membership

    assert store.apply(LoadMembership(PROJECT, "team-1", user.id)) == membership
    assert store.apply(LoadMembership(PROJECT, "team-1", "nobody")) is None
    assert store.apply(LoadMembership(PROJECT, "no-team", user.id)) is None
    assert store.apply(LoadMembership(OTHER_PROJECT, "team-1", user.id)) is None


def test_add_round_trips_a_membership_with_every_default(store: Store) -> None:
    _users(store, "user-1")
    _teams(store, make_team("team-1"))
    membership = Membership("team-1", "user-1", 1)

    assert add_membership(store, PROJECT, membership) == membership
    assert store.apply(LoadMembership(PROJECT, "team-1", "user-1")) == membership


def test_add_checks_user_then_team_then_membership_and_writes_nothing_when_refused(store: Store) -> None:
    # no user, no team: the user is checked first
    assert add_membership(store, PROJECT, make_membership("team-1", "user-1")) is TeamWrite.USER_NOT_FOUND
    _teams(store, make_team("team-1"))
    assert add_membership(store, PROJECT, make_membership("team-1", "user-1")) is TeamWrite.USER_NOT_FOUND
    # a user, no team
    _users(store, "user-1")
    assert add_membership(store, PROJECT, make_membership("team-2", "user-1")) is TeamWrite.TEAM_NOT_FOUND
    assert store.apply(ListMemberships(PROJECT)) == ()
    # both: added; again: exists, and the stored one is kept
    first = make_membership("team-1", "user-1", permissions=("a",))
    assert add_membership(store, PROJECT, first) == first
    second = make_membership("team-1", "user-1", created_at=T0 + 1, display_name="Second", permissions=("b",))
    assert add_membership(store, PROJECT, second) is TeamWrite.MEMBERSHIP_EXISTS
    assert store.apply(LoadMembership(PROJECT, "team-1", "user-1")) == first
    assert store.apply(ListMemberships(PROJECT)) == (first,)
    assert store.apply(ListTeams(PROJECT, "user-1")) == (make_team("team-1"),)


def test_of_20_concurrent_adds_of_one_membership_exactly_one_succeeds(store: Store) -> None:
    _users(store, "user-1")
    _teams(store, make_team("team-1"))
    attempts = [make_membership("team-1", "user-1", display_name=f"attempt-{i}") for i in range(20)]

    results = in_threads(*[lambda m=m: add_membership(store, PROJECT, m) for m in attempts])

    winners = [result for result in results if isinstance(result, Membership)]
    assert len(winners) == 1
    assert results.count(TeamWrite.MEMBERSHIP_EXISTS) == 19
    assert store.apply(LoadMembership(PROJECT, "team-1", "user-1")) == winners[0]
    assert store.apply(ListMemberships(PROJECT)) == (winners[0],)
    assert store.apply(ListMemberships(PROJECT, team_id="team-1")) == (winners[0],)
    assert store.apply(ListMemberships(PROJECT, user_id="user-1")) == (winners[0],)


# --------------------------------------------------------------------------------------------------------------
# ListMemberships: creation order, filters


def test_list_is_in_creation_order_not_by_timestamp(store: Store) -> None:
    users = _users(store, *[f"user-{c}" for c in "qwertyuiopas"])  # 12: sequence numbers past one digit
    team_x, team_y = make_team("team-x"), make_team("team-y")
    _teams(store, team_x, team_y)
    created: list[Membership] = []
    for i, user in enumerate(users):
        # the same millisecond for most, an earlier one for some: neither time nor id gives this order
        at = T0 - 5 if i % 4 == 3 else T0
        for team in (team_x, team_y) if i % 3 == 0 else (team_y,):
            membership = make_membership(team.id, user.id, created_at=at)
            assert add_membership(store, PROJECT, membership) == membership
            created.append(membership)

    assert store.apply(ListMemberships(PROJECT)) == tuple(created)
    assert store.apply(ListMemberships(PROJECT, team_id="team-y")) == tuple(m for m in created if m.team_id == "team-y")
    assert store.apply(ListMemberships(PROJECT, team_id="team-x")) == tuple(m for m in created if m.team_id == "team-x")
    assert store.apply(ListMemberships(PROJECT, user_id="user-q")) == tuple(m for m in created if m.user_id == "user-q")
    assert store.apply(ListMemberships(PROJECT, team_id="team-x", user_id="user-q")) == (created[0],)
    assert store.apply(ListMemberships(PROJECT, team_id="team-x", user_id="user-w")) == ()
    assert store.apply(ListMemberships(PROJECT, team_id="no-team")) == ()
    assert store.apply(ListMemberships(PROJECT, user_id="nobody")) == ()
    assert store.apply(ListMemberships(OTHER_PROJECT)) == ()


def test_a_membership_added_again_comes_last(store: Store) -> None:
    _users(store, "a", "b", "c")
    _teams(store, make_team("team-1"))
    for user_id in ("a", "b", "c"):
        add_membership(store, PROJECT, make_membership("team-1", user_id))

    remove_membership(store, PROJECT, "team-1", "a")
    add_membership(store, PROJECT, make_membership("team-1", "a"))

    assert [m.user_id for m in store.apply(ListMemberships(PROJECT, team_id="team-1"))] == ["b", "c", "a"]


def test_concurrent_adds_each_keep_their_own_place(store: Store) -> None:
    users = _users(store, *[f"user-{i}" for i in range(20)])
    teams = [make_team("team-1"), make_team("team-2")]
    _teams(store, *teams)

    def join(team: Team) -> None:
        for user in users:
            assert isinstance(add_membership(store, PROJECT, make_membership(team.id, user.id)), Membership)

    in_threads(*[lambda t=t: join(t) for t in teams])

    listed = store.apply(ListMemberships(PROJECT))
    assert len(listed) == 40
    for team in teams:  # each thread's adds, in the order it made them
        mine = [m.user_id for m in listed if m.team_id == team.id]
        assert mine == [u.id for u in users]
        assert store.apply(ListMemberships(PROJECT, team_id=team.id)) == tuple(
            m for m in listed if m.team_id == team.id
        )


# --------------------------------------------------------------------------------------------------------------
# RemoveMembership


def test_remove_takes_the_membership_and_only_it(store: Store) -> None:
    alice, bob = _users(store, "alice", "bob")
    team, other = make_team("team-1"), make_team("team-2", created_at=T0 + 1)
    _teams(store, team, other)
    kept = [make_membership(team.id, bob.id), make_membership(other.id, alice.id)]
    add_membership(store, PROJECT, make_membership(team.id, alice.id, permissions=("team_admin",)))
    for membership in kept:
        add_membership(store, PROJECT, membership)

    assert remove_membership(store, PROJECT, team.id, alice.id) is True
    assert remove_membership(store, PROJECT, team.id, alice.id) is False

    assert store.apply(LoadMembership(PROJECT, team.id, alice.id)) is None
    assert store.apply(ListMemberships(PROJECT)) == tuple(kept)
    assert store.apply(ListTeams(PROJECT, alice.id)) == (other,)
    assert store.apply(LoadTeam(PROJECT, team.id)) == team
    # joining again starts afresh: no permissions survive
    again = make_membership(team.id, alice.id)
    assert add_membership(store, PROJECT, again) == again
    assert store.apply(LoadMembership(PROJECT, team.id, alice.id)) == again


def test_remove_of_a_missing_membership_is_false(store: Store) -> None:
    _users(store, "alice")
    _teams(store, make_team("team-1"))

    assert remove_membership(store, PROJECT, "team-1", "alice") is False
    assert remove_membership(store, PROJECT, "no-team", "nobody") is False


def test_remove_deselects_the_team_only_for_that_user_and_only_that_team(store: Store) -> None:
    alice, bob = _users(store, "alice", "bob")
    team, other = make_team("team-1"), make_team("team-2")
    _teams(store, team, other)
    for membership in (
        make_membership(team.id, alice.id),
        make_membership(team.id, bob.id),
        make_membership(other.id, alice.id),
    ):
        add_membership(store, PROJECT, membership)
    _select(store, alice.id, team.id)
    _select(store, bob.id, team.id)

    remove_membership(store, PROJECT, team.id, alice.id)

    assert _selected(store, alice.id) is None
    assert _selected(store, bob.id) == team.id
    # leaving a team one has not selected keeps the selection
    _select(store, alice.id, other.id)
    remove_membership(store, PROJECT, team.id, bob.id)
    add_membership(store, PROJECT, make_membership(team.id, alice.id))
    remove_membership(store, PROJECT, team.id, alice.id)
    assert _selected(store, alice.id) == other.id


# --------------------------------------------------------------------------------------------------------------
# UpdateMembership, ChangePermission


def test_update_membership_sets_the_given_fields(store: Store) -> None:
    _users(store, "alice")
    _teams(store, make_team("team-1"))
    membership = make_membership("team-1", "alice", display_name="Alice", permissions=("a",))
    add_membership(store, PROJECT, membership)
    changes = (("display_name", "Ålice ✓"), ("profile_image_url", "https://img.example.com/a.png"))

    updated = update_membership(store, PROJECT, "team-1", "alice", changes)

    expected = dataclasses.replace(membership, **dict(changes))
    assert updated == expected
    assert store.apply(LoadMembership(PROJECT, "team-1", "alice")) == expected
    replaced = update_membership(store, PROJECT, "team-1", "alice", (("permissions", ("b", "c")),))
    assert replaced == dataclasses.replace(expected, permissions=("b", "c"))
    cleared = update_membership(store, PROJECT, "team-1", "alice", (("display_name", None),))
    assert cleared == dataclasses.replace(expected, permissions=("b", "c"), display_name=None)
    assert update_membership(store, PROJECT, "team-1", "alice", ()) == cleared
    assert store.apply(ListMemberships(PROJECT)) == (cleared,)


def test_update_of_a_missing_membership_is_none_and_creates_nothing(store: Store) -> None:
    _users(store, "alice")
    _teams(store, make_team("team-1"))

    assert update_membership(store, PROJECT, "team-1", "alice", (("display_name", "x"),)) is None
    assert update_membership(store, PROJECT, "no-team", "nobody", ()) is None

    assert store.apply(LoadMembership(PROJECT, "team-1", "alice")) is None
    assert store.apply(ListMemberships(PROJECT)) == ()


def test_update_membership_of_an_unknown_field_is_a_type_error(store: Store) -> None:
    _users(store, "alice")
    _teams(store, make_team("team-1"))
    membership = make_membership("team-1", "alice")
    add_membership(store, PROJECT, membership)

    with pytest.raises(TypeError):
        update_membership(store, PROJECT, "team-1", "alice", (("no_such_field", 1),))
    assert store.apply(LoadMembership(PROJECT, "team-1", "alice")) == membership


def test_change_permission_grants_and_revokes_keeping_them_sorted(store: Store) -> None:
    _users(store, "alice")
    _teams(store, make_team("team-1"))
    add_membership(store, PROJECT, make_membership("team-1", "alice", permissions=("m-perm",)))

    def change(permission_id: str, granted: bool) -> tuple[str, ...]:
        membership = change_permission(store, PROJECT, "team-1", "alice", permission_id, granted)
        assert membership is not None
        return membership.permissions

    assert change("team_admin", True) == ("m-perm", "team_admin")
    assert change("$read_members", True) == ("$read_members", "m-perm", "team_admin")
    assert change("Zeta", True) == ("$read_members", "Zeta", "m-perm", "team_admin")
    assert change("ünïcode", True) == ("$read_members", "Zeta", "m-perm", "team_admin", "ünïcode")
    assert change("team_admin", True) == ("$read_members", "Zeta", "m-perm", "team_admin", "ünïcode")  # idempotent
    assert change("m-perm", False) == ("$read_members", "Zeta", "team_admin", "ünïcode")
    assert change("never-held", False) == ("$read_members", "Zeta", "team_admin", "ünïcode")
    loaded = store.apply(LoadMembership(PROJECT, "team-1", "alice"))
    assert loaded is not None
    assert loaded.permissions == ("$read_members", "Zeta", "team_admin", "ünïcode")
    for permission_id in loaded.permissions:
        change(permission_id, False)
    assert change("solo", False) == ()
    assert change("solo", True) == ("solo",)


def test_change_permission_of_a_missing_membership_is_none_and_creates_nothing(store: Store) -> None:
    _users(store, "alice")
    _teams(store, make_team("team-1"))

    assert change_permission(store, PROJECT, "team-1", "alice", "team_admin", True) is None
    assert change_permission(store, PROJECT, "no-team", "nobody", "team_admin", False) is None

    assert store.apply(LoadMembership(PROJECT, "team-1", "alice")) is None
    assert store.apply(ListMemberships(PROJECT)) == ()


def test_concurrent_grants_of_different_permissions_all_survive(store: Store) -> None:
    _users(store, "alice")
    _teams(store, make_team("team-1"))
    add_membership(store, PROJECT, make_membership("team-1", "alice", permissions=("initial",)))

    def grant(prefix: str) -> None:
        for i in range(25):
            result = change_permission(store, PROJECT, "team-1", "alice", f"{prefix}-{i:02d}", True)
            assert result is not None

    in_threads(lambda: grant("a"), lambda: grant("b"))

    membership = store.apply(LoadMembership(PROJECT, "team-1", "alice"))
    assert membership is not None
    expected = {"initial", *(f"{p}-{i:02d}" for p in "ab" for i in range(25))}
    assert membership.permissions == tuple(sorted(expected))


def test_concurrent_profile_updates_and_grants_both_survive(store: Store) -> None:
    _users(store, "alice")
    _teams(store, make_team("team-1"))
    add_membership(store, PROJECT, make_membership("team-1", "alice"))

    def rename() -> None:
        for i in range(25):
            update_membership(store, PROJECT, "team-1", "alice", (("display_name", f"name-{i}"),))

    def grant() -> None:
        for i in range(25):
            change_permission(store, PROJECT, "team-1", "alice", f"p-{i:02d}", True)

    in_threads(rename, grant)

    membership = store.apply(LoadMembership(PROJECT, "team-1", "alice"))
    assert membership is not None
    assert membership.display_name == "name-24"
    assert membership.permissions == tuple(f"p-{i:02d}" for i in range(25))


# --------------------------------------------------------------------------------------------------------------
# Async


def test_async_teams_through_arun(async_store: AsyncBackend) -> None:
    alice, bob = make_user("alice"), make_user("bob")
    team = make_team("team-1")
    creator = make_membership(team.id, alice.id, permissions=("team_admin",))
    member = make_membership(team.id, bob.id)

    async def scenario(store: Any) -> list[Any]:
        async def do(effect: Any) -> Any:
            return await arun(perform(effect), store)

        await do(add_user(PROJECT, alice))
        await do(add_user(PROJECT, bob))
        return [
            await arun(store_team(PROJECT, team, creator), store),
            await arun(add_member(PROJECT, member), store),
            await arun(add_member(PROJECT, member), store),
            await arun(change_permission_flow(PROJECT, team.id, bob.id, "$read_members", True), store),
            await arun(patch_membership(PROJECT, team.id, bob.id, MembershipChanges.of(display_name="Bob")), store),
            await arun(patch_team(PROJECT, team.id, TeamChanges.of(display_name="Renamed")), store),
            await do(ListTeams(PROJECT, bob.id)),
            await do(ListMemberships(PROJECT, team_id=team.id)),
            await arun(remove_member(PROJECT, team.id, alice.id), store),
            await arun(drop_team(PROJECT, team.id), store),
            await do(LoadTeam(PROJECT, team.id)),
            await do(ListMemberships(PROJECT)),
        ]

    renamed = dataclasses.replace(team, display_name="Renamed")
    bob_member = dataclasses.replace(member, permissions=("$read_members",), display_name="Bob")
    assert async_store.run(scenario) == [
        team,
        member,
        TeamWrite.MEMBERSHIP_EXISTS,
        dataclasses.replace(member, permissions=("$read_members",)),
        bob_member,
        renamed,
        (renamed,),
        (creator, bob_member),
        True,
        True,
        None,
        (),
    ]


# --------------------------------------------------------------------------------------------------------------
# Redis: layout


def test_redis_team_and_membership_layout(redis_store: RedisStore) -> None:
    (alice,) = _users(redis_store, "alice")
    team = rich_team()
    creator = make_membership(team.id, alice.id, permissions=("team_admin",))
    create_team(redis_store, PROJECT, team, creator)
    change_permission(redis_store, PROJECT, team.id, alice.id, "$read_ü/x", True)
    client, keys = redis_store.client, redis_store.keys
    prefix = f"{keys.namespace}{{p:{PROJECT}}}:"

    assert keys.team(PROJECT, team.id) == f"{prefix}team:{team.id}"
    assert keys.team_order(PROJECT) == f"{prefix}team-order"
    assert keys.membership(PROJECT, 1) == f"{prefix}membership:1"
    assert keys.membership_seq(PROJECT) == f"{prefix}membership-seq"
    assert keys.membership_order(PROJECT) == f"{prefix}membership-order"
    assert keys.team_members(PROJECT, team.id) == f"{prefix}team-members:{team.id}"
    assert keys.user_teams(PROJECT, alice.id) == f"{prefix}user-teams:{alice.id}"
    new_keys = {
        f"{prefix}team:{team.id}": b"hash",
        f"{prefix}team-order": b"zset",
        f"{prefix}membership:1": b"hash",
        f"{prefix}membership-seq": b"string",
        f"{prefix}membership-order": b"zset",
        f"{prefix}team-members:{team.id}": b"zset",
        f"{prefix}user-teams:{alice.id}": b"zset",
    }
    found = {key.decode() for key in client.scan_iter(match=f"{keys.namespace}*")}
    # webhooks: no events stream, the project has no endpoint (its events are recorded only while it has one)
    assert found == {*new_keys, f"{prefix}user:{alice.id}", f"{prefix}user-order"}
    for key, kind in new_keys.items():
        assert client.type(key) == kind
        assert key_slot(key.encode()) == key_slot(f"{{p:{PROJECT}}}".encode())
        assert client.pttl(key) == -1  # no TTL
    team_key = f"{prefix}team:{team.id}"
    assert {f.decode() for f in client.hkeys(team_key)} == {f.name for f in dataclasses.fields(Team)}
    assert client.hget(team_key, "display_name") == '"Ünïcode ✓ «team» 🎉"'.encode()
    assert client.hget(team_key, "created_at_millis") == str(team.created_at_millis).encode()
    membership_key = f"{prefix}membership:1"
    assert {f.decode() for f in client.hkeys(membership_key)} == {f.name for f in dataclasses.fields(Membership)}
    assert client.hget(membership_key, "team_id") == f'"{team.id}"'.encode()
    assert json.loads(client.hget(membership_key, "permissions")) == ["$read_ü/x", "team_admin"]  # sorted JSON
    assert client.get(f"{prefix}membership-seq") == b"1"
    assert client.zrange(f"{prefix}team-order", 0, -1, withscores=True) == [
        (team.id.encode(), float(team.created_at_millis))
    ]
    assert client.zrange(f"{prefix}membership-order", 0, -1, withscores=True) == [(b"1", 1.0)]
    assert client.zrange(f"{prefix}team-members:{team.id}", 0, -1, withscores=True) == [(b"alice", 1.0)]
    assert client.zrange(f"{prefix}user-teams:{alice.id}", 0, -1, withscores=True) == [(team.id.encode(), 1.0)]
    loaded = redis_store.apply(LoadMembership(PROJECT, team.id, alice.id))
    assert loaded is not None
    assert loaded.permissions == ("$read_ü/x", "team_admin")


def test_redis_a_membership_record_missing_a_field_reads_its_default(redis_store: RedisStore) -> None:
    _users(redis_store, "alice")
    _teams(redis_store, make_team("team-1"))
    membership = make_membership("team-1", "alice", display_name="A", permissions=("p",))
    add_membership(redis_store, PROJECT, membership)
    redis_store.client.hdel(redis_store.keys.membership(PROJECT, 1), "display_name", "permissions")

    assert redis_store.apply(LoadMembership(PROJECT, "team-1", "alice")) == dataclasses.replace(
        membership, display_name=None, permissions=()
    )
    granted = change_permission(redis_store, PROJECT, "team-1", "alice", "q", True)
    assert granted == dataclasses.replace(membership, display_name=None, permissions=("q",))


def test_redis_delete_team_leaves_no_key_of_the_team(redis_store: RedisStore) -> None:
    alice, bob = _users(redis_store, "alice", "bob")
    before = {key.decode() for key in redis_store.client.scan_iter(match=f"{redis_store.keys.namespace}*")}
    kept, doomed = make_team("team-kept"), make_team("team-doomed")
    create_team(redis_store, PROJECT, kept, make_membership(kept.id, alice.id))
    create_team(redis_store, PROJECT, doomed, make_membership(doomed.id, alice.id))
    add_membership(redis_store, PROJECT, make_membership(doomed.id, bob.id))
    keys = redis_store.keys

    assert delete_team(redis_store, PROJECT, doomed.id) is True

    left = {key.decode() for key in redis_store.client.scan_iter(match=f"{keys.namespace}*")}
    assert left == before | {
        keys.team(PROJECT, kept.id),
        keys.team_order(PROJECT),
        keys.team_members(PROJECT, kept.id),
        keys.user_teams(PROJECT, alice.id),
        keys.membership(PROJECT, 1),
        keys.membership_order(PROJECT),
        keys.membership_seq(PROJECT),
    }
    assert redis_store.client.zrange(keys.team_order(PROJECT), 0, -1) == [kept.id.encode()]
    assert redis_store.client.zrange(keys.membership_order(PROJECT), 0, -1) == [b"1"]


# --------------------------------------------------------------------------------------------------------------
# Races through the core's commits: they re-run and converge


def test_concurrent_adds_and_removes_of_one_membership_converge(store: Store) -> None:
    (alice,) = _users(store, "alice")
    team = make_team("team-1")
    _teams(store, team)

    def churn(adding: bool) -> None:
        for _ in range(15):
            if adding:
                add_membership(store, PROJECT, make_membership(team.id, alice.id, permissions=("p",)))
            else:
                remove_membership(store, PROJECT, team.id, alice.id)

    in_threads(*[lambda adding=adding: churn(adding) for adding in (True, False, True, False)])

    # every index agrees: the membership is there once, or nowhere
    membership = store.apply(LoadMembership(PROJECT, team.id, alice.id))
    expected = () if membership is None else (membership,)
    assert store.apply(ListMemberships(PROJECT)) == expected
    assert store.apply(ListMemberships(PROJECT, team_id=team.id)) == expected
    assert store.apply(ListMemberships(PROJECT, user_id=alice.id)) == expected
    assert store.apply(ListTeams(PROJECT, alice.id)) == (() if membership is None else (team,))
    # the survivor (if any) can still be removed, once, clearing its selection
    if membership is not None:
        _select(store, alice.id, team.id)
    assert remove_membership(store, PROJECT, team.id, alice.id) is (membership is not None)
    assert store.apply(ListMemberships(PROJECT)) == ()
    assert _selected(store, alice.id) is None


def test_a_team_deleted_while_members_are_removed_and_granted_leaves_nothing(store: Store) -> None:
    users = _users(store, *[f"user-{i}" for i in range(6)])
    team = make_team("team-1")
    _teams(store, team)
    for user in users:
        add_membership(store, PROJECT, make_membership(team.id, user.id))
        _select(store, user.id, team.id)

    results = in_threads(
        *[lambda u=u: remove_membership(store, PROJECT, team.id, u.id) for u in users[:3]],
        *[lambda u=u: change_permission(store, PROJECT, team.id, u.id, "p", True) for u in users[3:]],
        lambda: delete_team(store, PROJECT, team.id),
    )

    assert results[-1] is True
    assert store.apply(LoadTeam(PROJECT, team.id)) is None
    assert store.apply(ListMemberships(PROJECT)) == ()
    for user in users:
        assert store.apply(ListTeams(PROJECT, user.id)) == ()
        assert _selected(store, user.id) is None
