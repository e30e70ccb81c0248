"""Contract of the dev/test-mode effects (clock override, project reset) and of a sign-up's commit refusing a taken id,
over every store."""

from __future__ import annotations

from identity_proto import SeededEntropy
from identity_proto.drivers import Store, run
from identity_proto.effects import (
    ListMemberships,
    ListOutbox,
    ListTeams,
    ListUsers,
    LoadClockOverride,
    LoadProject,
    LoadUser,
    ResetProjectData,
    SetClockOverride,
    append_outbox,
    create_project,
    find_user_by_email,
)
from identity_proto.effects.commit import Committed
from identity_proto.flows.projects import new_project
from identity_proto.records import ClockOverride
from tests.contract.factories import (
    ID_TAKEN,
    T0,
    add_membership,
    add_user,
    create_team,
    make_code,
    make_email,
    make_membership,
    make_session,
    make_team,
    make_user,
    patched_user,
    put_code,
    put_session,
)


def test_the_clock_override_round_trips_and_clears(store: Store) -> None:
    assert store.apply(LoadClockOverride()) is None
    store.apply(SetClockOverride(ClockOverride(frozen_ms=T0)))
    assert store.apply(LoadClockOverride()) == ClockOverride(frozen_ms=T0)
    store.apply(SetClockOverride(ClockOverride(offset_ms=-5)))
    assert store.apply(LoadClockOverride()) == ClockOverride(frozen_ms=None, offset_ms=-5)
    store.apply(SetClockOverride(None))
    assert store.apply(LoadClockOverride()) is None


def _filled(store: Store, seed: int) -> str:
    project, _ = new_project(SeededEntropy(seed), T0, f"P{seed}")
    assert run(create_project(project), store)
    pid = project.id
    store.apply(add_user(pid, make_user("u1", "a@example.com")))
    create_team(store, pid, make_team("t1"), make_membership("t1", "u1"))
    put_session(store, pid, make_session("s1", "u1"))
    store.apply(put_code(pid, make_code("c1")))
    run(append_outbox(pid, make_email(1, "a@example.com")), store)
    return pid


def test_reset_removes_one_projects_data_and_keeps_the_project(store: Store) -> None:
    reset, kept = _filled(store, 1), _filled(store, 2)
    before = store.apply(LoadProject(reset))
    assert store.apply(ResetProjectData(reset)) is True
    assert store.apply(LoadProject(reset)) == before
    for pid, empty in ((reset, True), (kept, False)):
        assert (store.apply(ListUsers(pid)) == ()) is empty
        assert (store.apply(ListTeams(pid)) == ()) is empty
        assert (store.apply(ListMemberships(pid)) == ()) is empty
        assert (store.apply(ListOutbox(pid)) == ()) is empty
        assert (store.apply(find_user_by_email(pid, "a@example.com")) is None) is empty
    # the reset project works as new: the same address and user id can be created again
    assert store.apply(add_user(reset, make_user("u1", "a@example.com"))) == Committed(
        (make_user("u1", "a@example.com"),)
    )


def test_reset_of_an_unknown_project_is_false(store: Store) -> None:
    assert store.apply(ResetProjectData("no-such-project")) is False


def test_create_user_refuses_a_taken_id_and_writes_nothing(store: Store) -> None:
    first = make_user("u1", "a@example.com")
    assert store.apply(add_user("p", first)) == Committed((first,))
    assert store.apply(add_user("p", make_user("u1", "b@example.com"))) == ID_TAKEN
    assert store.apply(LoadUser("p", "u1")) == first
    assert store.apply(find_user_by_email("p", "b@example.com")) is None
    assert [u.id for u in store.apply(ListUsers("p"))] == ["u1"]


def test_load_user_with_team_reads_both_at_once(store: Store) -> None:
    from identity_proto.effects import LoadUserWithTeam

    store.apply(add_user("p", make_user("u1", "a@example.com")))
    assert store.apply(LoadUserWithTeam("p", "u1")) == (make_user("u1", "a@example.com"), None)
    assert store.apply(LoadUserWithTeam("p", "nobody")) is None
    team = make_team("t1")
    create_team(store, "p", team)
    add_membership(store, "p", make_membership("t1", "u1"))
    selected = patched_user(store, "p", "u1", (("selected_team_id", "t1"),))
    assert store.apply(LoadUserWithTeam("p", "u1")) == selected == (selected[0], team)


def test_together_performs_each_effect_and_answers_in_order(store: Store) -> None:
    from identity_proto.effects import HitRateLimits, RateLimitHit, Together

    store.apply(add_user("p", make_user("u1", "a@example.com")))
    hit = RateLimitHit("rl:ip:1.1.1.1:0", T0)
    counts, user = store.apply(Together((HitRateLimits((hit,), T0 - 1), LoadUser("p", "u1"))))
    assert counts == (1,)
    assert user == make_user("u1", "a@example.com")
    assert store.apply(Together((HitRateLimits((hit,), T0 - 1), LoadUser("p", "none")))) == ((2,), None)
