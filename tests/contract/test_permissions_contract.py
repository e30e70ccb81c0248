"""The permissions contract (the core's commits granting and revoking project permissions, ListProjectPermissions,
a change of the definitions (`change_definitions`), and a user's deletion taking their grants) over every store."""

from __future__ import annotations

from typing import Any

import orjson
from redis.crc import key_slot

from backends.redis import RedisStore
from identity_proto.changes import ProjectConfigChanges
from identity_proto.drivers import Store, arun, run
from identity_proto.effects import (
    DefinitionsWrite,
    Flow,
    ListMemberships,
    ListProjectPermissions,
    LoadProject,
    create_project,
    perform,
)
from identity_proto.flows.permissions import change_definitions, revoke_project_permission_of
from identity_proto.flows.permissions import grant_project_permissions as grant_project_permissions_of
from identity_proto.flows.projects import new_project
from identity_proto.records import BUILT_IN_PERMISSION_DEFINITIONS, PermissionDefinition, Project, ProjectConfig
from identity_proto.tokens import SeededEntropy
from tests.contract.conftest import AsyncBackend
from tests.contract.factories import (
    T0,
    add_membership,
    add_user,
    change_permission,
    create_team,
    delete_user,
    grant_project_permissions,
    in_threads,
    make_membership,
    make_team,
    make_user,
    revoke_project_permission,
)

READ = PermissionDefinition("read", "project", "Read things")
WRITE = PermissionDefinition("write", "project", None, ("read",))
EDITOR = PermissionDefinition("editor", "team", None, ("$update_team",))


def _project(store: Store, config: ProjectConfig | None = None) -> Project:
    project, _ = new_project(SeededEntropy(3), T0, "Permissions", config)
    assert run(create_project(project), store)
    return project


def _users(store: Store, project_id: str, *user_ids: str) -> None:
    for user_id in user_ids:
        store.apply(add_user(project_id, make_user(user_id)))


def _definitions(*extra: PermissionDefinition) -> tuple[PermissionDefinition, ...]:
    return tuple(sorted((*BUILT_IN_PERMISSION_DEFINITIONS, *extra), key=lambda d: d.id))


def _change(
    project: Project,
    definitions: tuple[PermissionDefinition, ...],
    *,
    also: tuple[tuple[str, Any], ...] = (),
    renamed: tuple[str, str] | None = None,
    removed: str | None = None,
) -> Flow[Project | DefinitionsWrite]:
    expected = ProjectConfigChanges.of((("permission_definitions", project.config.permission_definitions),))
    config = ProjectConfigChanges.of((("permission_definitions", definitions), *also))
    return change_definitions(project.id, expected, config, renamed=renamed, removed=removed)


# --------------------------------------------------------------------------------------------------------------
# Project grants


def test_a_grant_needs_an_existing_user_and_writes_nothing_otherwise(store: Store) -> None:
    project = _project(store)
    assert grant_project_permissions(store, project.id, "ghost", ("read",)) is False
    assert store.apply(ListProjectPermissions(project.id)) == ()
    assert store.apply(ListProjectPermissions(project.id, "ghost")) == ()


def test_grants_are_listed_per_user_sorted_and_granting_twice_changes_nothing(store: Store) -> None:
    project = _project(store)
    _users(store, project.id, "bob", "alice")
    assert grant_project_permissions(store, project.id, "bob", ("write", "read")) is True
    assert grant_project_permissions(store, project.id, "bob", ("read",)) is True
    assert grant_project_permissions(store, project.id, "alice", ("read",)) is True
    assert grant_project_permissions(store, project.id, "alice", ()) is True
    assert store.apply(ListProjectPermissions(project.id)) == (("alice", ("read",)), ("bob", ("read", "write")))
    assert store.apply(ListProjectPermissions(project.id, "bob")) == (("bob", ("read", "write")),)


def test_revoking_answers_whether_it_was_held_and_a_user_without_grants_is_not_listed(store: Store) -> None:
    project = _project(store)
    _users(store, project.id, "alice")
    grant_project_permissions(store, project.id, "alice", ("read",))
    assert revoke_project_permission(store, project.id, "alice", "write") is False
    assert revoke_project_permission(store, project.id, "alice", "read") is True
    assert revoke_project_permission(store, project.id, "alice", "read") is False
    assert store.apply(ListProjectPermissions(project.id)) == ()
    assert store.apply(ListProjectPermissions(project.id, "alice")) == ()


def test_deleting_a_user_takes_their_grants_and_leaves_others(store: Store) -> None:
    project = _project(store)
    _users(store, project.id, "alice", "bob")
    grant_project_permissions(store, project.id, "alice", ("read",))
    grant_project_permissions(store, project.id, "bob", ("read",))
    assert delete_user(store, project.id, "alice") is True
    assert store.apply(ListProjectPermissions(project.id)) == (("bob", ("read",)),)
    store.apply(add_user(project.id, make_user("alice")))  # the same id again starts with nothing
    assert store.apply(ListProjectPermissions(project.id, "alice")) == ()


def test_grants_are_per_project(store: Store) -> None:
    project = _project(store)
    _users(store, project.id, "alice")
    _users(store, "elsewhere", "alice")
    grant_project_permissions(store, project.id, "alice", ("read",))
    assert store.apply(ListProjectPermissions("elsewhere")) == ()


# --------------------------------------------------------------------------------------------------------------
# Definition changes


def test_a_definition_change_sets_the_config_fields_it_names(store: Store) -> None:
    project = _project(store)
    changed = run(_change(project, _definitions(READ), also=(("user_default_permissions", ("read",)),)), store)
    assert isinstance(changed, Project)
    assert changed.config.permission_definitions == _definitions(READ)
    assert changed.config.user_default_permissions == ("read",)
    assert changed.config.team_creator_default_permissions == ("team_admin",)  # untouched
    assert store.apply(LoadProject(project.id)) == changed


def test_a_definition_change_based_on_an_older_read_is_a_conflict_and_writes_nothing(store: Store) -> None:
    project = _project(store)
    assert isinstance(run(_change(project, _definitions(READ)), store), Project)
    stale = run(_change(project, _definitions(WRITE), also=(("user_default_permissions", ("x",)),)), store)
    assert stale is DefinitionsWrite.CONFLICT
    stored = store.apply(LoadProject(project.id))
    assert stored is not None
    assert stored.config.permission_definitions == _definitions(READ)
    assert stored.config.user_default_permissions == ()


def test_a_definition_change_of_a_missing_project_says_so(store: Store) -> None:
    project, _ = new_project(SeededEntropy(4), T0, "Never stored")
    assert run(_change(project, _definitions(READ)), store) is DefinitionsWrite.PROJECT_NOT_FOUND
    assert store.apply(LoadProject(project.id)) is None


def test_a_rename_rewrites_every_grant_of_the_id_in_the_same_step(store: Store) -> None:
    project = _project(store)
    _users(store, project.id, "alice", "bob")
    team = make_team("team-1")
    create_team(store, project.id, team, make_membership(team.id, "alice", permissions=("editor", "team_admin")))
    add_membership(store, project.id, make_membership(team.id, "bob", permissions=("team_member",)))
    grant_project_permissions(store, project.id, "alice", ("editor", "read"))
    grant_project_permissions(store, project.id, "bob", ("read",))
    renamed = PermissionDefinition("a_editor", "team", None, ("$update_team",))
    changed = run(_change(project, _definitions(READ, renamed), renamed=("editor", "a_editor")), store)
    assert isinstance(changed, Project)
    memberships = store.apply(ListMemberships(project.id, team_id=team.id))
    assert [m.permissions for m in memberships] == [("a_editor", "team_admin"), ("team_member",)]  # sorted
    assert store.apply(ListProjectPermissions(project.id)) == (("alice", ("a_editor", "read")), ("bob", ("read",)))


def test_a_rename_onto_an_id_held_already_leaves_it_once(store: Store) -> None:
    project = _project(store)
    _users(store, project.id, "alice")
    team = make_team("team-1")
    create_team(store, project.id, team, make_membership(team.id, "alice", permissions=("editor", "team_admin")))
    run(_change(project, _definitions(), renamed=("editor", "team_admin")), store)
    [membership] = store.apply(ListMemberships(project.id, team_id=team.id))
    assert membership.permissions == ("team_admin",)


#: Ids whose JSON differs between encoders (cjson escapes "/" and DEL; the stores' codec writes them as they are).
AWKWARD_IDS = ("a/b", "c\x7fd", "e\x01f", 'g"h\\i', "j\u2028k")


def test_after_a_rename_a_grant_of_a_membership_holding_awkward_ids_still_lands(store: Store) -> None:
    # A team permission grant compares the membership's permissions with what it read: a definition change that
    # rewrote them must store them as any other write does, or no grant would ever land again.
    project = _project(store)
    _users(store, project.id, "alice")
    team = make_team("team-1")
    create_team(store, project.id, team, make_membership(team.id, "alice", permissions=("editor", *AWKWARD_IDS)))
    run(_change(project, _definitions(), renamed=("editor", "a_editor")), store)
    granted = change_permission(store, project.id, team.id, "alice", "team_admin", True)
    expected = tuple(sorted(("a_editor", "team_admin", *AWKWARD_IDS)))
    assert granted is not None
    assert granted.permissions == expected
    [membership] = store.apply(ListMemberships(project.id, team_id=team.id))
    assert membership.permissions == expected
    if isinstance(store, RedisStore):  # stored as the stores' codec writes it
        seq = store.client.zscore(store.keys.team_members(project.id, team.id), "alice")
        stored = store.client.hget(store.keys.membership(project.id, "") + f"{seq:.0f}", "permissions")
        assert stored == orjson.dumps(expected)


def test_a_removal_strips_the_id_from_every_grant(store: Store) -> None:
    project = _project(store)
    _users(store, project.id, "alice", "bob")
    team = make_team("team-1")
    create_team(store, project.id, team, make_membership(team.id, "alice", permissions=("editor", "team_admin")))
    grant_project_permissions(store, project.id, "alice", ("editor",))
    grant_project_permissions(store, project.id, "bob", ("read",))
    assert isinstance(run(_change(project, _definitions(READ), removed="editor"), store), Project)
    [membership] = store.apply(ListMemberships(project.id, team_id=team.id))
    assert membership.permissions == ("team_admin",)
    assert store.apply(ListProjectPermissions(project.id)) == (("bob", ("read",)),)


def test_concurrent_definition_changes_all_land_when_each_retries_its_conflicts(store: Store) -> None:
    project = _project(store)
    ids = [f"p{i}" for i in range(8)]

    def create(permission_id: str) -> int:
        for attempt in range(100):
            stored = store.apply(LoadProject(project.id))
            assert stored is not None
            definitions = (*stored.config.permission_definitions, PermissionDefinition(permission_id, "project"))
            ordered = tuple(sorted(definitions, key=lambda d: d.id))
            if isinstance(run(_change(stored, ordered), store), Project):
                return attempt
        raise AssertionError("never landed")

    in_threads(*(lambda i=i: create(i) for i in ids))
    stored = store.apply(LoadProject(project.id))
    assert stored is not None
    assert {d.id for d in stored.config.permission_definitions} == {"team_admin", "team_member", *ids}


def test_concurrent_revokes_of_every_grant_leave_the_user_holding_none(store: Store) -> None:
    project = _project(store)
    _users(store, project.id, "alice")
    ids = tuple(f"p{n}" for n in range(6))
    assert grant_project_permissions(store, project.id, "alice", ids)
    # Each revoke decided on the grants it read; one that finds them changed re-runs, so the last one out also
    # takes the user off the holders.
    assert (
        in_threads(*(lambda p=p: revoke_project_permission(store, project.id, "alice", p) for p in ids)) == [True] * 6
    )
    assert store.apply(ListProjectPermissions(project.id)) == ()
    assert store.apply(ListProjectPermissions(project.id, "alice")) == ()
    if isinstance(store, RedisStore):
        assert store.client.smembers(store.keys.permission_users(project.id)) == set()
    assert grant_project_permissions(store, project.id, "alice", ("read",))
    assert store.apply(ListProjectPermissions(project.id)) == (("alice", ("read",)),)


def test_concurrent_grants_and_revokes_of_one_user_converge(store: Store) -> None:
    project = _project(store)
    _users(store, project.id, "alice")
    assert grant_project_permissions(store, project.id, "alice", ("keep", "p0", "p1"))
    workers = [lambda p=p: revoke_project_permission(store, project.id, "alice", p) for p in ("p0", "p1")]
    workers += [lambda p=p: grant_project_permissions(store, project.id, "alice", (p,)) for p in ("p2", "p3")]
    assert in_threads(*workers) == [True] * 4
    assert store.apply(ListProjectPermissions(project.id)) == (("alice", ("keep", "p2", "p3")),)


def test_async_permissions_through_arun(async_store: AsyncBackend) -> None:
    project, _ = new_project(SeededEntropy(5), T0, "Async")

    async def scenario(store: Any) -> list[Any]:
        async def do(effect: Any) -> Any:
            return await arun(perform(effect), store)

        assert await arun(create_project(project), store)
        await do(add_user(project.id, make_user("alice")))
        changed = await arun(_change(project, _definitions(READ)), store)
        return [
            changed.config.permission_definitions,
            await arun(grant_project_permissions_of(project.id, "alice", ("read",)), store),
            await do(ListProjectPermissions(project.id)),
            await arun(revoke_project_permission_of(project.id, "alice", "read", ("read",)), store),
            await do(ListProjectPermissions(project.id, "alice")),
        ]

    assert async_store.run(scenario) == [_definitions(READ), True, (("alice", ("read",)),), True, ()]


# --------------------------------------------------------------------------------------------------------------
# Redis: the keys and the record written by an older version


def test_redis_grant_keys_are_sets_in_the_project_slot(redis_store: RedisStore) -> None:
    project = _project(redis_store)
    _users(redis_store, project.id, "alice")
    grant_project_permissions(redis_store, project.id, "alice", ("read", "write"))
    keys, client = redis_store.keys, redis_store.client
    grants, holders = keys.user_permissions(project.id, "alice"), keys.permission_users(project.id)
    assert {m.decode() for m in client.smembers(grants)} == {"read", "write"}
    assert client.smembers(holders) == {b"alice"}
    for key in (grants, holders):
        assert client.type(key) == b"set"
        assert key_slot(key.encode()) == key_slot(f"{{p:{project.id}}}".encode())
        assert client.pttl(key) == -1
    delete_user(redis_store, project.id, "alice")
    assert client.exists(grants, holders) == 0


def test_redis_a_record_without_the_definitions_field_compares_as_the_built_ins(redis_store: RedisStore) -> None:
    project = _project(redis_store)
    redis_store.client.hdel(redis_store.keys.project(project.id), "config.permission_definitions")
    loaded = redis_store.apply(LoadProject(project.id))
    assert loaded is not None
    assert loaded.config.permission_definitions == BUILT_IN_PERMISSION_DEFINITIONS
    changed = run(_change(loaded, _definitions(READ)), redis_store)
    assert isinstance(changed, Project)
    assert changed.config.permission_definitions == _definitions(READ)
