"""Anonymous users over every store, each write one atomic step: the sign-up (the core's new-user commit: the user,
its personal team and its session together, or nothing) and the upgrade (the core's commit: the user becomes
non-anonymous and takes its address only while it is anonymous and the address is free, its "Personal Team" renamed; a
refusal writes nothing), with concurrent upgrades to one address making one holder, and the TTLs of what the sign-up
stores on Redis."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest

from backends.redis import GRACE_MS, RedisStore
from identity_proto.drivers import Store, arun, run
from identity_proto.effects import (
    ChannelWrite,
    ListMemberships,
    ListSessions,
    ListTeams,
    ListUsers,
    LoadSession,
    LoadTeam,
    LoadUser,
    LoadUserWithTeam,
    UpgradeRefusal,
    UseRefreshToken,
    find_user_by_email,
    perform,
)
from identity_proto.effects.base import Flow
from identity_proto.effects.commit import Committed
from identity_proto.flows.contact_channels import create_channel
from identity_proto.records import ContactChannel, Membership, Session, Team, User
from tests.contract.conftest import AsyncBackend
from tests.contract.factories import (
    EMAIL_TAKEN,
    OTHER_PROJECT,
    PROJECT,
    T0,
    add_membership,
    add_user,
    create_team,
    in_threads,
    make_membership,
    make_session,
    make_team,
    make_user,
    run_flow,
    sign_up_anonymously,
    upgrading_anonymous,
)

EMAIL = "ada@example.com"
LATER = T0 + 60_000


def anonymous(user_id: str = "anon", **fields: Any) -> User:
    """An anonymous user as the sign-up makes it (signed up at T0)."""
    return dataclasses.replace(make_user(user_id), is_anonymous=True, **fields)


def personal_team(user_id: str = "anon", team_id: str = "team-anon") -> tuple[Team, Membership]:
    team = Team(id=team_id, display_name="Personal Team", created_at_millis=T0)
    return team, make_membership(team_id, user_id, permissions=("$read_members", "team_admin"))


def sign_up(
    user: User | None = None, session: Session | None = None, team: tuple[Team, Membership] | None = None
) -> Flow[User | None]:
    """An anonymous sign-up as the core commits it (`factories.sign_up_anonymously`)."""
    user = user or anonymous()
    if team is not None:
        user = dataclasses.replace(user, selected_team_id=team[0].id)
    return sign_up_anonymously(PROJECT, user, session or make_session("s-anon", user.id), team)


def run_on(store: Store, flow: Flow[Any]) -> Any:
    return run(flow, store)


def upgrade_changes(email: str = EMAIL, **fields: Any) -> tuple[tuple[str, Any], ...]:
    """What a password sign-up sets on an anonymous user."""
    values: dict[str, Any] = {
        "primary_email": email,
        "primary_email_auth_enabled": True,
        "password_hash": "$2b$04$hash",
        "is_anonymous": False,
        "signed_up_at_millis": LATER,
        "last_active_at_millis": LATER,
    }
    return tuple((values | fields).items())


def upgrade(user_id: str = "anon", email: str = EMAIL, team_name: str = f"{EMAIL}'s Team") -> Flow[Any]:
    """An upgrade as the core makes it (`factories.upgrading_anonymous`: a read, then one `Commit`)."""
    return upgrading_anonymous(PROJECT, user_id, upgrade_changes(email), team_name)


def nothing_stored_for_the_session(store: Store, session: Session) -> None:
    assert store.apply(LoadSession(PROJECT, session.id)) is None
    assert store.apply(UseRefreshToken(PROJECT, session.refresh_token_hash, T0)) is None


# --------------------------------------------------------------------------------------------------------------
# Anonymous sign-up (the core's new-user commit)


def test_an_anonymous_sign_up_stores_the_user_and_its_session_together(store: Store) -> None:
    user, session = anonymous(), make_session("s-anon", "anon")

    assert run_on(store, sign_up(user, session)) == user

    assert store.apply(LoadUserWithTeam(PROJECT, user.id)) == (user, None)
    assert store.apply(ListUsers(PROJECT)) == (user,)
    assert store.apply(ListSessions(PROJECT, user.id)) == (session,)
    found = store.apply(UseRefreshToken(PROJECT, session.refresh_token_hash, T0))
    assert found is not None
    assert found[1] == user
    assert store.apply(ListTeams(PROJECT)) == ()


def test_an_anonymous_sign_up_gets_its_personal_team_selected(store: Store) -> None:
    team, creator = personal_team()

    stored = run_on(store, sign_up(team=(team, creator)))

    assert stored == anonymous(selected_team_id=team.id)
    assert store.apply(LoadUserWithTeam(PROJECT, "anon")) == (stored, team)
    assert store.apply(ListTeams(PROJECT, user_id="anon")) == (team,)
    assert store.apply(ListMemberships(PROJECT, team_id=team.id)) == (creator,)


def test_an_anonymous_sign_up_whose_id_is_taken_writes_nothing(store: Store) -> None:
    holder = make_user("anon", "bob@example.com")
    store.apply(add_user(PROJECT, holder))
    session = make_session("s-anon", "anon")

    assert run_on(store, sign_up(session=session, team=personal_team())) is None

    assert store.apply(ListUsers(PROJECT)) == (holder,)
    assert store.apply(ListTeams(PROJECT)) == ()
    assert store.apply(ListMemberships(PROJECT)) == ()
    nothing_stored_for_the_session(store, session)


def test_an_anonymous_sign_up_looks_at_its_own_project_only(store: Store) -> None:
    store.apply(add_user(OTHER_PROJECT, make_user("anon")))
    assert run_on(store, sign_up()) == anonymous()
    assert store.apply(ListUsers(OTHER_PROJECT)) == (make_user("anon"),)


def test_the_sign_up_checks_what_it_is_given(store: Store) -> None:
    with pytest.raises(ValueError, match="anonymous user"):
        run_on(store, sign_up(make_user("anon")))
    with pytest.raises(ValueError, match="anonymous user"):
        run_on(store, sign_up(anonymous(primary_email=EMAIL, primary_email_auth_enabled=True)))
    with pytest.raises(ValueError, match="session"):
        run_on(store, sign_up(session=make_session("s1", "someone-else")))
    team, _creator = personal_team()
    with pytest.raises(ValueError, match="personal team"):
        run_on(store, sign_up_anonymously(PROJECT, anonymous(), make_session("s1", "anon"), (team, _creator)))
    with pytest.raises(ValueError, match="personal team"):
        run_on(store, sign_up(team=(team, make_membership(team.id, "someone-else"))))
    assert store.apply(ListUsers(PROJECT)) == ()


def test_redis_an_anonymous_session_expires_a_grace_period_after_it(redis_store: RedisStore) -> None:
    now = int(time.time() * 1000)
    session = make_session("s1", "anon", created_at=now, lifetime_ms=60_000)
    assert run_on(redis_store, sign_up(session=session, team=personal_team())) is not None
    keys = redis_store.keys
    for key in (
        keys.session(PROJECT, session.id),
        keys.session_by_token(PROJECT, session.refresh_token_hash),
        keys.user_sessions(PROJECT, "anon"),
    ):
        expected = 60_000 + GRACE_MS
        assert expected - 2_000 <= int(redis_store.client.pttl(key)) <= expected
    for key in (keys.user(PROJECT, "anon"), keys.team(PROJECT, "team-anon")):
        assert redis_store.client.pttl(key) == -1  # users and teams never expire


# --------------------------------------------------------------------------------------------------------------
# The upgrade in place (the core's read, then one Commit)


def test_an_upgrade_makes_the_user_signed_up_in_place_and_gives_it_the_address(store: Store) -> None:
    kept = {"display_name": "Ada", "client_metadata": {"theme": "dark"}, "server_metadata": [1, None]}
    run_on(store, sign_up(anonymous(**kept)))
    earlier = make_user("early")
    earlier = dataclasses.replace(earlier, signed_up_at_millis=T0 + 1)
    store.apply(add_user(PROJECT, earlier))

    upgraded = run_flow(store, lambda: upgrade())

    expected = dataclasses.replace(
        anonymous(**kept),
        primary_email=EMAIL,
        primary_email_auth_enabled=True,
        password_hash="$2b$04$hash",
        is_anonymous=False,
        signed_up_at_millis=LATER,
        last_active_at_millis=LATER,
    )
    assert upgraded == expected
    assert store.apply(LoadUser(PROJECT, "anon")) == expected
    assert store.apply(find_user_by_email(PROJECT, EMAIL)) == expected
    # Its new sign-up time moved it in the order of ListUsers (after a user who signed up in between).
    assert [u.id for u in store.apply(ListUsers(PROJECT))] == ["early", "anon"]
    assert store.apply(ListSessions(PROJECT, "anon")) == (make_session("s-anon", "anon"),)


def test_an_upgrade_renames_the_users_personal_teams_only(store: Store) -> None:
    run_on(store, sign_up(team=personal_team()))
    # Another team of the user keeps its name; another user's "Personal Team" too.
    store.apply(add_user(PROJECT, make_user("bob")))
    bobs, _ = personal_team("bob", "team-bob")
    create_team(store, PROJECT, bobs, make_membership(bobs.id, "bob"))
    club = make_team("club")
    create_team(store, PROJECT, club, make_membership(club.id, "bob"))
    add_membership(store, PROJECT, make_membership(club.id, "anon"))
    add_membership(store, PROJECT, make_membership(bobs.id, "anon"))  # a member of Bob's personal team

    run_flow(store, lambda: upgrade(team_name="Ada's Team"))

    assert store.apply(LoadTeam(PROJECT, "team-anon")) == Team("team-anon", "Ada's Team", T0)
    assert store.apply(LoadTeam(PROJECT, "club")) == club
    # "every team it is a member of that is still called Personal Team", as the original's updateMany
    assert store.apply(LoadTeam(PROJECT, "team-bob")) == Team("team-bob", "Ada's Team", T0)


def test_an_upgrade_leaves_a_renamed_personal_team_alone(store: Store) -> None:
    team, creator = personal_team()
    run_on(store, sign_up(team=(dataclasses.replace(team, display_name="Our shop"), creator)))
    run_flow(store, lambda: upgrade())
    assert store.apply(LoadTeam(PROJECT, team.id)) == dataclasses.replace(team, display_name="Our shop")


def test_an_upgrade_to_a_taken_address_writes_nothing(store: Store) -> None:
    run_on(store, sign_up(team=personal_team()))
    holder = make_user("holder", EMAIL)
    store.apply(add_user(PROJECT, holder))

    assert run_flow(store, lambda: upgrade()) is UpgradeRefusal.EMAIL_TAKEN

    assert store.apply(LoadUser(PROJECT, "anon")) == anonymous(selected_team_id="team-anon")
    assert store.apply(find_user_by_email(PROJECT, EMAIL)) == holder
    assert store.apply(LoadTeam(PROJECT, "team-anon")) == personal_team()[0]
    assert [u.id for u in store.apply(ListUsers(PROJECT))] == ["anon", "holder"]


def test_an_address_held_without_sign_in_is_free_to_take(store: Store) -> None:
    run_on(store, sign_up())
    store.apply(add_user(PROJECT, make_user("other", EMAIL, auth=False)))
    upgraded = run_flow(store, lambda: upgrade())
    assert isinstance(upgraded, User)
    assert store.apply(find_user_by_email(PROJECT, EMAIL)) == upgraded


def test_an_upgrade_to_an_address_the_user_has_as_another_channel_writes_nothing(store: Store) -> None:
    """One address is never two channels of one user (as a PATCH): held or not, the upgrade is refused."""
    run_on(store, sign_up(team=personal_team()))
    for n, trusted in enumerate((False, True)):
        email = f"ada{n}@example.com"
        work = ContactChannel(f"c{n}", "anon", email, False, True, T0 + 1)
        created = run_flow(
            store,
            lambda w=work, t=trusted: create_channel(PROJECT, w, make_primary=False, next_primary_id="next", trusted=t),
        )
        assert not isinstance(created, ChannelWrite)
        assert run_flow(store, lambda e=email: upgrade(email=e)) is UpgradeRefusal.EMAIL_TAKEN
        assert store.apply(LoadUser(PROJECT, "anon")) == anonymous(selected_team_id="team-anon")


def test_an_upgrade_of_a_user_no_longer_anonymous_writes_nothing(store: Store) -> None:
    run_on(store, sign_up())
    first = run_flow(store, lambda: upgrade())
    assert isinstance(first, User)

    assert run_flow(store, lambda: upgrade(email="other@example.com")) is UpgradeRefusal.NOT_ANONYMOUS

    assert store.apply(LoadUser(PROJECT, "anon")) == first
    assert store.apply(find_user_by_email(PROJECT, "other@example.com")) is None


def test_an_upgrade_of_a_missing_user_writes_nothing(store: Store) -> None:
    assert run_flow(store, lambda: upgrade()) is UpgradeRefusal.NOT_FOUND
    assert store.apply(find_user_by_email(PROJECT, EMAIL)) is None
    assert store.apply(ListUsers(PROJECT)) == ()


def test_an_upgrade_looks_at_its_own_project_only(store: Store) -> None:
    store.apply(add_user(OTHER_PROJECT, make_user("holder", EMAIL)))
    run_on(store, sign_up())
    assert isinstance(run_flow(store, lambda: upgrade()), User)
    assert store.apply(find_user_by_email(OTHER_PROJECT, EMAIL)) == make_user("holder", EMAIL)


def test_the_upgrade_makes_the_user_non_anonymous(store: Store) -> None:
    run_on(store, sign_up())
    with pytest.raises(ValueError, match="non-anonymous"):
        run_flow(store, lambda: upgrading_anonymous(PROJECT, "anon", (("primary_email", EMAIL),), "x"))
    with pytest.raises(ValueError, match="non-anonymous"):
        run_flow(store, lambda: upgrading_anonymous(PROJECT, "anon", (("is_anonymous", True),), "x"))
    changes = (("is_anonymous", False), ("no_such_field", 1))
    with pytest.raises(TypeError):
        run_flow(store, lambda: upgrading_anonymous(PROJECT, "anon", changes, "x"))
    assert store.apply(LoadUser(PROJECT, "anon")) == anonymous()


def test_concurrent_upgrades_to_one_address_make_one_holder(store: Store) -> None:
    ids = [f"anon-{n}" for n in range(12)]
    for n, user_id in enumerate(ids):
        run_on(store, sign_up(anonymous(user_id), make_session(f"s-{n}", user_id)))

    results = in_threads(*(lambda user_id=user_id: run_flow(store, lambda: upgrade(user_id)) for user_id in ids))

    winners = [result for result in results if isinstance(result, User)]
    assert len(winners) == 1
    assert sorted(r.value for r in results if isinstance(r, UpgradeRefusal)) == ["email_taken"] * 11
    assert store.apply(find_user_by_email(PROJECT, EMAIL)) == winners[0]
    still_anonymous = [u.id for u in store.apply(ListUsers(PROJECT)) if u.is_anonymous]
    assert sorted(still_anonymous) == sorted(set(ids) - {winners[0].id})


def test_an_upgrade_racing_a_sign_up_of_the_address_makes_one_holder(store: Store) -> None:
    run_on(store, sign_up())
    results = in_threads(
        lambda: run_flow(store, lambda: upgrade()),
        lambda: store.apply(add_user(PROJECT, make_user("newcomer", EMAIL))),
    )
    holder = store.apply(find_user_by_email(PROJECT, EMAIL))
    assert holder is not None
    if holder.id == "anon":
        assert isinstance(results[0], User)
        assert results[1] == EMAIL_TAKEN
    else:
        assert isinstance(results[1], Committed)
        assert results[0] is UpgradeRefusal.EMAIL_TAKEN
        assert store.apply(LoadUser(PROJECT, "anon")) == anonymous()


def test_async_anonymous_sign_up_and_upgrade_through_arun(async_store: AsyncBackend) -> None:
    async def scenario(store: Any) -> list[Any]:
        return [
            await arun(sign_up(team=personal_team()), store),
            await arun(upgrade(), store),
            await arun(upgrade(), store),
            await arun(perform(LoadTeam(PROJECT, "team-anon")), store),
        ]

    results = async_store.run(scenario)
    assert results[0] == anonymous(selected_team_id="team-anon")
    assert isinstance(results[1], User)
    assert (results[1].id, results[1].is_anonymous, results[1].primary_email) == ("anon", False, EMAIL)
    assert results[2:] == [UpgradeRefusal.NOT_ANONYMOUS, Team("team-anon", f"{EMAIL}'s Team", T0)]
