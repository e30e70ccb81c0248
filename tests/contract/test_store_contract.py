"""The storage contract (identity_proto.effects), one behaviour suite over every store.

Each test runs against the memory store, RedisStore over fakeredis, and RedisStore over a real redis-server
(see conftest.py); the async tests run the same behaviours through `identity_proto.drivers.arun`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from typing import Any

import pytest
from redis.crc import key_slot

from backends.memory import AsyncMemoryStore, MemoryStore
from backends.redis import AsyncRedisStore, RedisStore
from identity_proto import effects
from identity_proto.drivers import Store, arun, run
from identity_proto.effects import (
    AttemptVerificationCode,
    CodeOutcome,
    Commit,
    Conflict,
    DeleteProject,
    FindApiKeyByHash,
    FindAuthAddressHolder,
    FindUserByIndex,
    HitRateLimits,
    ListApiKeys,
    ListContactChannels,
    ListMemberships,
    ListOutbox,
    ListProjectContactChannels,
    ListProjectPermissions,
    ListProjects,
    ListSessions,
    ListTeamInvitations,
    ListTeams,
    ListUsers,
    LoadApiKey,
    LoadClockOverride,
    LoadMembership,
    LoadProject,
    LoadSession,
    LoadTeam,
    LoadTeamInvitation,
    LoadUser,
    LoadUserWithTeam,
    ResetProjectData,
    SetClockOverride,
    StorageEffect,
    Together,
    UseRefreshToken,
    append_outbox,
    create_project,
    ensure_project,
    find_user_by_email,
    update_project,
)
from identity_proto.errors import StorageUnavailable
from identity_proto.flows.projects import new_project
from identity_proto.records import Membership, Project, ProjectConfig, ProjectKeys, Team, TrustedDomain
from identity_proto.tokens import SeededEntropy
from tests.contract.conftest import AsyncBackend
from tests.contract.factories import (
    T0,
    add_membership,
    add_user,
    create_team,
    make_code,
    make_email,
    make_session,
    make_user,
    put_code,
    put_session,
    use_code,
)
from tests.processes import free_port

NOW_MS = 1_700_000_000_123


def make_project(
    seed: int,
    *,
    now_ms: int = NOW_MS,
    name: str = "Project",
    config: ProjectConfig | None = None,
    project_id: str | None = None,
) -> Project:
    project, _ = new_project(SeededEntropy(seed), now_ms, name, config, project_id=project_id)
    return project


def rich_project() -> Project:
    """A project whose every field differs from the defaults."""
    config = ProjectConfig(
        sign_up_enabled=False,
        magic_link_enabled=False,
        credential_enabled=False,
        allow_localhost=False,
        domains=(TrustedDomain("https://app.example.com"), TrustedDomain("https://b.example.org", "/auth/cb")),
        client_team_creation_enabled=True,
        client_user_deletion_enabled=True,
        create_team_on_sign_up=True,
        require_email_verification=True,
        require_publishable_client_key=True,
        team_creator_default_permissions=("owner", "billing"),
        team_member_default_permissions=(),
    )
    return make_project(7, now_ms=1_650_000_000_999, name="Ünïcode ✓ «project»", config=config)


# --------------------------------------------------------------------------------------------------------------
# Load and create


def test_load_of_a_missing_project_is_none(store: Store) -> None:
    assert store.apply(LoadProject("00000000-0000-4000-8000-000000000000")) is None


def test_create_then_load_round_trips_every_field(store: Store) -> None:
    project = rich_project()

    assert run(create_project(project), store) is True

    loaded = store.apply(LoadProject(project.id))
    assert loaded == project
    assert loaded is not None
    assert loaded.display_name == "Ünïcode ✓ «project»"
    assert loaded.created_at_millis == 1_650_000_000_999
    assert loaded.signing_key == project.signing_key
    assert len(loaded.signing_key) == 64
    assert loaded.config.domains[1] == TrustedDomain("https://b.example.org", "/auth/cb")
    assert loaded.config.team_creator_default_permissions == ("owner", "billing")
    assert loaded.config.team_member_default_permissions == ()
    assert loaded.config.require_publishable_client_key is True
    assert loaded.keys == project.keys
    assert loaded.keys.super_secret_admin_key_hash is not None


def test_create_round_trips_absent_key_hashes(store: Store) -> None:
    project = dataclasses.replace(make_project(8), keys=ProjectKeys(secret_server_key_hash="ab" * 32))

    assert run(create_project(project), store) is True

    loaded = store.apply(LoadProject(project.id))
    assert loaded == project
    assert loaded is not None
    assert loaded.keys == ProjectKeys(None, "ab" * 32, None)


def test_create_twice_returns_false_and_keeps_the_first_record(store: Store) -> None:
    first = make_project(1, name="First")
    second = dataclasses.replace(make_project(2, name="Second"), id=first.id)

    assert run(create_project(first), store) is True
    assert run(create_project(second), store) is False

    assert store.apply(LoadProject(first.id)) == first
    assert store.apply(ListProjects()) == (first,)


# --------------------------------------------------------------------------------------------------------------
# Ensure


def test_ensure_on_an_absent_project_creates_it(store: Store) -> None:
    project = make_project(3, name="Seeded")

    assert run(ensure_project(project), store) == project

    assert store.apply(LoadProject(project.id)) == project
    assert store.apply(ListProjects()) == (project,)


def test_ensure_on_a_present_project_replaces_only_the_key_hashes(store: Store) -> None:
    original = make_project(4, name="Original")
    assert run(create_project(original), store) is True
    run(update_project(original.id, display_name="Renamed", config=(("sign_up_enabled", False),)), store)
    configured = dataclasses.replace(make_project(5, name="From start-up config"), id=original.id)
    assert configured.signing_key != original.signing_key
    assert configured.keys != original.keys

    result = run(ensure_project(configured), store)

    expected = dataclasses.replace(
        original,
        display_name="Renamed",
        config=dataclasses.replace(original.config, sign_up_enabled=False),
        keys=configured.keys,
    )
    assert result == expected
    assert result.signing_key == original.signing_key
    assert result.created_at_millis == original.created_at_millis
    assert store.apply(LoadProject(original.id)) == expected
    assert store.apply(ListProjects()) == (expected,)
    # and again: ensuring is idempotent
    assert run(ensure_project(configured), store) == expected


# --------------------------------------------------------------------------------------------------------------
# Update


def test_update_of_a_missing_project_returns_none_and_creates_nothing(store: Store) -> None:
    missing = "11111111-1111-4111-8111-111111111111"

    assert run(update_project(missing, display_name="Ghost", config=(("sign_up_enabled", False),)), store) is None

    assert store.apply(LoadProject(missing)) is None
    assert store.apply(ListProjects()) == ()


def test_update_sets_display_name_and_config_fields_and_returns_the_record(store: Store) -> None:
    project = make_project(6, name="Before")
    run(create_project(project), store)
    domains = (TrustedDomain("https://x.example.com", "/h"),)

    updated = run(
        update_project(project.id, display_name="After", config=(("domains", domains), ("allow_localhost", False))),
        store,
    )

    expected = dataclasses.replace(
        project,
        display_name="After",
        config=dataclasses.replace(project.config, domains=domains, allow_localhost=False),
    )
    assert updated == expected
    assert store.apply(LoadProject(project.id)) == expected
    # no changes at all: the record as stored
    assert run(update_project(project.id), store) == expected


def test_updates_of_different_config_fields_both_survive(store: Store) -> None:
    project = make_project(9)
    run(create_project(project), store)

    run(update_project(project.id, config=(("require_email_verification", True),)), store)
    second = run(update_project(project.id, config=(("team_member_default_permissions", ("viewer",)),)), store)

    assert second is not None
    assert second.config.require_email_verification is True
    assert second.config.team_member_default_permissions == ("viewer",)
    assert second.display_name == project.display_name
    assert second.keys == project.keys
    assert store.apply(LoadProject(project.id)) == second


def test_concurrent_updates_of_different_config_fields_from_two_threads_both_survive(store: Store) -> None:
    project = make_project(10)
    run(create_project(project), store)
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def writer(field: str, value: Callable[[int], Any]) -> None:
        try:
            start.wait(timeout=5)
            for i in range(50):
                run(update_project(project.id, config=((field, value(i)),)), store)
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [
        threading.Thread(target=writer, args=("team_creator_default_permissions", lambda i: (f"creator-{i}",))),
        threading.Thread(target=writer, args=("domains", lambda i: (TrustedDomain(f"https://app{i}.example.com"),))),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert errors == []
    assert not any(thread.is_alive() for thread in threads)
    final = store.apply(LoadProject(project.id))
    assert final is not None
    assert final.config.team_creator_default_permissions == ("creator-49",)
    assert final.config.domains == (TrustedDomain("https://app49.example.com"),)
    assert final.config.sign_up_enabled is True  # untouched fields untouched
    assert final.display_name == project.display_name


# --------------------------------------------------------------------------------------------------------------
# List and delete


def test_list_is_oldest_first_with_ties_by_id(store: Store) -> None:
    oldest = make_project(11, now_ms=1_000, project_id="p-oldest")
    tie_a = make_project(12, now_ms=2_000, project_id="p-tie-a")
    tie_b = make_project(13, now_ms=2_000, project_id="p-tie-b")
    newest = make_project(14, now_ms=3_000, project_id="p-newest")
    for project in (newest, tie_b, oldest, tie_a):
        assert run(create_project(project), store) is True

    assert store.apply(ListProjects()) == (oldest, tie_a, tie_b, newest)


def test_list_of_an_empty_store_is_empty(store: Store) -> None:
    assert store.apply(ListProjects()) == ()


def test_delete_returns_true_then_false_and_the_project_is_gone(store: Store) -> None:
    doomed = make_project(15, now_ms=1_000)
    kept = make_project(16, now_ms=2_000)
    run(create_project(doomed), store)
    run(create_project(kept), store)

    assert store.apply(DeleteProject(doomed.id)) is True
    assert store.apply(DeleteProject(doomed.id)) is False

    assert store.apply(LoadProject(doomed.id)) is None
    assert store.apply(ListProjects()) == (kept,)
    assert store.apply(LoadProject(kept.id)) == kept
    # the id is free again
    assert run(create_project(doomed), store) is True


def _fill(store: Store, project_id: str) -> None:
    """Give a project one of every kind of data."""
    store.apply(add_user(project_id, make_user("user-1", "a@example.com")))
    put_session(store, project_id, make_session("s-1", "user-1"))
    store.apply(put_code(project_id, make_code("c-1")))
    store.apply(AttemptVerificationCode(project_id, "code-wrong", "nonce-c-1", "sign_in", T0, consume=False))
    run(append_outbox(project_id, make_email(1, "a@example.com")), store)
    create_team(store, project_id, Team("team-1", "Team", T0), Membership("team-1", "user-1", T0))


def _assert_filled(store: Store, project_id: str) -> None:
    assert store.apply(LoadUser(project_id, "user-1")) is not None
    assert store.apply(find_user_by_email(project_id, "a@example.com")) is not None
    assert store.apply(LoadSession(project_id, "s-1")) is not None
    assert len(store.apply(ListSessions(project_id, "user-1"))) == 1
    assert len(store.apply(ListOutbox(project_id))) == 1
    assert [user.id for user in store.apply(ListUsers(project_id))] == ["user-1"]
    assert store.apply(LoadTeam(project_id, "team-1")) is not None
    assert len(store.apply(ListMemberships(project_id))) == 1


def test_delete_removes_all_of_the_projects_data_and_only_its(store: Store) -> None:
    doomed = make_project(22, project_id="p-doomed")
    kept = make_project(23, project_id="p-kept")
    for project in (doomed, kept):
        run(create_project(project), store)
        _fill(store, project.id)

    assert store.apply(DeleteProject(doomed.id)) is True

    assert store.apply(LoadUser(doomed.id, "user-1")) is None
    assert store.apply(find_user_by_email(doomed.id, "a@example.com")) is None
    assert store.apply(LoadSession(doomed.id, "s-1")) is None
    assert store.apply(ListSessions(doomed.id, "user-1")) == ()
    assert store.apply(UseRefreshToken(doomed.id, "token-s-1", T0)) is None
    assert store.apply(ListOutbox(doomed.id)) == ()
    assert store.apply(use_code(doomed.id, "code-c-1")) == Conflict(0)
    assert store.apply(ListUsers(doomed.id)) == ()
    assert store.apply(LoadTeam(doomed.id, "team-1")) is None
    assert store.apply(ListTeams(doomed.id)) == ()
    assert store.apply(ListMemberships(doomed.id)) == ()
    assert store.apply(ListMemberships(doomed.id, user_id="user-1")) == ()
    _assert_filled(store, kept.id)
    # recreated, the project starts empty: the nonce counter is gone too
    run(create_project(doomed), store)
    store.apply(put_code(doomed.id, make_code("c-1")))
    attempt = AttemptVerificationCode(doomed.id, "code-c-1", "nonce-c-1", "sign_in", T0, consume=True, max_attempts=1)
    assert store.apply(attempt).outcome is CodeOutcome.OK
    assert store.apply(LoadUser(doomed.id, "user-1")) is None
    # and so is the membership sequence: memberships of the new project start afresh, in creation order
    store.apply(add_user(doomed.id, make_user("user-2")))
    create_team(store, doomed.id, Team("team-2", "Team 2", T0))
    added = add_membership(store, doomed.id, Membership("team-2", "user-2", T0))
    assert store.apply(ListMemberships(doomed.id)) == (added,)


def test_delete_of_a_project_without_record_still_removes_its_data(store: Store) -> None:
    _fill(store, "p-recordless")  # data without a project record, as an interrupted delete leaves it

    assert store.apply(DeleteProject("p-recordless")) is False

    assert store.apply(LoadUser("p-recordless", "user-1")) is None
    assert store.apply(ListOutbox("p-recordless")) == ()


def test_drivers_run_performs_a_flow_against_the_store(store: Store) -> None:
    project = make_project(17)
    run(create_project(project), store)

    assert run(effects.load_project(project.id), store) == project
    assert run(effects.load_project("no-such-project"), store) is None


# --------------------------------------------------------------------------------------------------------------
# Redis specifics: the documented key layout, dangling index entries, older records


def _namespace_keys(store: RedisStore) -> set[bytes]:
    return set(store.client.scan_iter(match=f"{store.keys.namespace}*"))


def test_redis_key_layout_is_as_documented(redis_store: RedisStore) -> None:
    project = make_project(18, name="Layout")
    ns = redis_store.keys.namespace
    record_key = f"{ns}{{p:{project.id}}}:project"
    index_key = f"{ns}{{projects}}:index"
    assert redis_store.keys.project(project.id) == record_key
    assert redis_store.keys.index == index_key
    # the hash tags: a project's keys share one Redis Cluster slot; the index has its own
    assert key_slot(record_key.encode()) == key_slot(f"{{p:{project.id}}}".encode())
    assert key_slot(index_key.encode()) == key_slot(b"projects")

    run(create_project(project), redis_store)
    run(update_project(project.id, config=(("domains", (TrustedDomain("https://a.example.com"),)),)), redis_store)

    client = redis_store.client
    assert _namespace_keys(redis_store) == {record_key.encode(), index_key.encode()}
    assert client.type(record_key) == b"hash"
    assert client.smembers(index_key) == {project.id.encode()}
    assert client.hget(record_key, "display_name") == b"Layout"
    assert client.hget(record_key, "created_at_millis") == str(NOW_MS).encode()
    assert client.hget(record_key, "config.sign_up_enabled") == b"true"
    domains_json = b'[{"domain":"https://a.example.com","handler_path":"/handler"}]'
    assert client.hget(record_key, "config.domains") == domains_json
    fields = {field.decode() for field in client.hkeys(record_key) if isinstance(field, bytes)}
    config_fields = {f"config.{f.name}" for f in dataclasses.fields(ProjectConfig)}
    assert fields == {"id", "display_name", "created_at_millis", "signing_key", "keys"} | config_fields

    assert redis_store.apply(DeleteProject(project.id)) is True
    assert _namespace_keys(redis_store) == set()


def test_redis_delete_removes_every_key_of_the_project_and_no_other(redis_store: RedisStore) -> None:
    doomed = make_project(24, project_id="p-doomed")
    kept = make_project(25, project_id="p-kept")
    for project in (doomed, kept):
        run(create_project(project), redis_store)
        _fill(redis_store, project.id)
    for i in range(2_500):  # several SCAN pages
        redis_store.client.set(f"{redis_store.keys.prefix(doomed.id)}extra:{i}", "x")
    before = _namespace_keys(redis_store)
    prefix = redis_store.keys.prefix(doomed.id).encode()

    assert redis_store.apply(DeleteProject(doomed.id)) is True

    assert _namespace_keys(redis_store) == {key for key in before if not key.startswith(prefix)}
    assert any(key.startswith(redis_store.keys.prefix(kept.id).encode()) for key in before)
    _assert_filled(redis_store, kept.id)


def test_redis_delete_escapes_glob_characters_of_the_project_id(redis_store: RedisStore) -> None:
    for project_id in ("p*", "p?", "p[x]", "px", "p\\x", "p]"):
        run(create_project(make_project(26, project_id=project_id)), redis_store)
        _fill(redis_store, project_id)

    for project_id in ("p*", "p?", "p[x]"):
        assert redis_store.apply(DeleteProject(project_id)) is True

    left = {key.split(b"}")[0] for key in _namespace_keys(redis_store) if b"{p:" in key}
    assert left == {f"{redis_store.keys.namespace}{{p:{pid}".encode() for pid in ("px", "p\\x", "p]")}
    for project_id in ("px", "p\\x", "p]"):
        _assert_filled(redis_store, project_id)


def test_redis_list_skips_a_dangling_index_entry(redis_store: RedisStore) -> None:
    project = make_project(19)
    run(create_project(project), redis_store)
    redis_store.client.sadd(redis_store.keys.index, "ghost-without-record")

    assert redis_store.apply(ListProjects()) == (project,)
    assert redis_store.apply(LoadProject("ghost-without-record")) is None
    # deleting it removes the index entry and says it did not exist
    assert redis_store.apply(DeleteProject("ghost-without-record")) is False
    assert redis_store.client.smembers(redis_store.keys.index) == {project.id.encode()}


def test_redis_create_and_ensure_repair_a_missing_index_entry(redis_store: RedisStore) -> None:
    project = make_project(20)
    run(create_project(project), redis_store)
    redis_store.client.srem(redis_store.keys.index, project.id)  # as if a crash came between record and index
    assert redis_store.apply(ListProjects()) == ()

    assert run(create_project(project), redis_store) is False  # a retried create: the id is taken...
    assert redis_store.apply(ListProjects()) == (project,)  # ...but the index entry is back

    redis_store.client.srem(redis_store.keys.index, project.id)
    assert run(ensure_project(project), redis_store) == project
    assert redis_store.apply(ListProjects()) == (project,)


def test_redis_record_missing_a_config_field_reads_its_default(redis_store: RedisStore) -> None:
    project = make_project(21, config=ProjectConfig(require_publishable_client_key=True, sign_up_enabled=False))
    run(create_project(project), redis_store)
    redis_store.client.hdel(redis_store.keys.project(project.id), "config.require_publishable_client_key")

    loaded = redis_store.apply(LoadProject(project.id))

    assert loaded is not None
    assert loaded.config.require_publishable_client_key is False  # the default
    assert loaded.config.sign_up_enabled is False  # the stored value


def test_redis_namespace_must_not_contain_hash_tag_braces() -> None:
    with pytest.raises(ValueError, match="namespace"):
        RedisStore.from_url("redis://127.0.0.1:1/0", namespace="a{b}:")


# --------------------------------------------------------------------------------------------------------------
# Completeness


def storage_effect_types() -> set[type[Any]]:
    """Every concrete StorageEffect defined in identity_proto.effects."""
    return {
        obj
        for obj in vars(effects).values()
        if inspect.isclass(obj)
        and issubclass(obj, StorageEffect)
        and obj is not StorageEffect
        and obj.__module__.startswith(f"{effects.__name__}.")  # its resource module in the package
    }


#: The effects this suite (this module, test_codes_, test_users_sessions_, test_user_index_, test_teams_ and
#: test_outbox_contract.py) covers.
CONTRACT_TESTED: set[type[Any]] = {
    LoadProject,
    ListProjects,
    DeleteProject,
    AttemptVerificationCode,
    LoadUser,
    FindUserByIndex,
    UseRefreshToken,
    LoadSession,
    ListSessions,
    ListOutbox,
    ListUsers,
    LoadTeam,
    ListTeams,
    LoadMembership,
    ListMemberships,
    LoadClockOverride,
    SetClockOverride,
    ResetProjectData,
    HitRateLimits,
    LoadUserWithTeam,
    Together,
    Commit,  # test_commit_contract.py
    # --- permissions: test_permissions_contract.py ---
    ListProjectPermissions,
    # --- end permissions ---
    # API keys: test_api_keys_contract.py
    LoadApiKey,
    FindApiKeyByHash,
    ListApiKeys,
    # --- team invitations: test_team_invitations_contract.py ---
    LoadTeamInvitation,
    ListTeamInvitations,
    # passwords: test_passwords_contract.py
    FindAuthAddressHolder,
    # --- contact channels: test_contact_channels_contract.py ---
    ListContactChannels,
    ListProjectContactChannels,
    # --- OAuth storage (the mock provider's too): test_oauth_store.py, test_mock_oauth_contract.py ---
    effects.PutShortLived,
    effects.TakeShortLived,
    effects.LoadProviderTokens,
    # --- end OAuth storage ---
    # --- webhooks: test_webhook_store.py ---
    effects.LoadWebhookEndpoint,
    effects.ListWebhookEndpoints,
    effects.ListEvents,
    effects.AddTestEvent,
    effects.ListWebhookProjects,
    effects.FanOutEvents,
    effects.ClaimDeliveries,
    effects.RecordAttempt,
    effects.ListDeliveries,
    effects.LoadDelivery,
    effects.TrimWebhookData,
    effects.CountPendingDeliveries,
    # --- end webhooks ---
    effects.Admit,  # test_admit_contract.py
}


def test_the_storage_effects_are_the_ones_this_suite_knows() -> None:
    assert storage_effect_types() == CONTRACT_TESTED, "a new StorageEffect needs contract tests here"


def test_the_memory_store_performs_every_storage_effect() -> None:
    assert set(MemoryStore.performs) == storage_effect_types()


@pytest.mark.parametrize("backend", [RedisStore, AsyncRedisStore], ids=lambda b: b.__name__)
def test_the_redis_stores_perform_every_storage_effect(backend: Any) -> None:
    assert set(backend.performs) == storage_effect_types()


def test_the_async_memory_store_performs_what_the_memory_store_does() -> None:
    assert set(AsyncMemoryStore().sync.performs) == storage_effect_types()


@dataclasses.dataclass(frozen=True, slots=True)
class _UnknownEffect(StorageEffect[int]):
    """An effect no backend knows (defined here, so not part of the contract)."""


def test_an_unknown_effect_is_a_type_error(store: Store) -> None:
    with pytest.raises(TypeError, match="_UnknownEffect"):
        store.apply(_UnknownEffect())


# --------------------------------------------------------------------------------------------------------------
# Faults: an unreachable or silent Redis is StorageUnavailable, quickly, without the URL's password


def _closed_port_url() -> str:
    return f"redis://:hunter2@127.0.0.1:{free_port()}/0"


@contextmanager
def _silent_server() -> Iterator[str]:
    """A loopback socket that accepts connections (the kernel does) but never answers."""
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield f"redis://:hunter2@127.0.0.1:{listener.getsockname()[1]}/0"


def _assert_unavailable(info: pytest.ExceptionInfo[StorageUnavailable], started: float, limit_s: float) -> None:
    elapsed = time.monotonic() - started
    assert elapsed < limit_s, f"took {elapsed:.2f} s"
    assert "LoadProject" in str(info.value)
    assert "hunter2" not in str(info.value)


def test_sync_unreachable_redis_is_storage_unavailable_within_3_seconds() -> None:
    store = RedisStore.from_url(_closed_port_url())
    try:
        started = time.monotonic()
        with pytest.raises(StorageUnavailable) as info:
            store.apply(LoadProject("any"))
        _assert_unavailable(info, started, 3.0)
        # through the driver too: the failure is thrown into the flow, which does not catch it
        with pytest.raises(StorageUnavailable):
            run(effects.load_project("any"), store)
    finally:
        store.close()


@pytest.mark.parametrize(
    "effect",
    [
        AttemptVerificationCode("p", "code", "nonce", "sign_in", T0, consume=True),  # a script
        add_user("p", make_user("u", "a@example.com")),  # a script with a derived key
        ListOutbox("p"),  # a command
        DeleteProject("p"),  # commands and SCAN
    ],
    ids=lambda effect: type(effect).__name__,
)
def test_sync_unreachable_redis_is_storage_unavailable_for_every_kind_of_plan(effect: StorageEffect[Any]) -> None:
    store = RedisStore.from_url(_closed_port_url())
    try:
        with pytest.raises(StorageUnavailable) as info:
            store.apply(effect)
        assert type(effect).__name__ in str(info.value)
        assert "hunter2" not in str(info.value)
    finally:
        store.close()


def test_async_unreachable_redis_is_storage_unavailable_within_3_seconds() -> None:
    async def scenario() -> None:
        store = AsyncRedisStore.from_url(_closed_port_url())
        try:
            started = time.monotonic()
            with pytest.raises(StorageUnavailable) as info:
                await arun(effects.load_project("any"), store)
            _assert_unavailable(info, started, 3.0)
        finally:
            await store.aclose()

    asyncio.run(scenario())


def test_sync_silent_redis_times_out_as_storage_unavailable() -> None:
    with _silent_server() as url:
        store = RedisStore.from_url(url, socket_timeout=0.3)
        try:
            started = time.monotonic()
            with pytest.raises(StorageUnavailable) as info:
                store.apply(LoadProject("any"))
            _assert_unavailable(info, started, 2.0)
        finally:
            store.close()


def test_async_silent_redis_times_out_as_storage_unavailable() -> None:
    async def scenario(url: str) -> None:
        store = AsyncRedisStore.from_url(url, socket_timeout=0.3)
        try:
            started = time.monotonic()
            with pytest.raises(StorageUnavailable) as info:
                await store.apply(LoadProject("any"))
            _assert_unavailable(info, started, 2.0)
        finally:
            await store.aclose()

    with _silent_server() as url:
        asyncio.run(scenario(url))


# --------------------------------------------------------------------------------------------------------------
# The same behaviours through the async driver


def test_async_lifecycle_through_arun(async_store: AsyncBackend) -> None:
    older = make_project(30, now_ms=1_000)
    newer = rich_project()  # created later: 1_650_000_000_999
    missing = "22222222-2222-4222-8222-222222222222"

    async def scenario(store: Any) -> None:
        assert await arun(effects.load_project(missing), store) is None
        assert await arun(effects.create_project(newer), store) is True
        assert await arun(effects.create_project(older), store) is True
        assert await arun(effects.create_project(dataclasses.replace(older, display_name="dup")), store) is False
        assert await arun(effects.load_project(newer.id), store) == newer
        assert await arun(effects.list_projects(), store) == (older, newer)
        assert await arun(effects.update_project(missing, display_name="x"), store) is None
        renamed = await arun(effects.update_project(older.id, display_name="Renamed"), store)
        assert renamed == dataclasses.replace(older, display_name="Renamed")
        assert await arun(effects.delete_project(older.id), store) is True
        assert await arun(effects.delete_project(older.id), store) is False
        assert await arun(effects.list_projects(), store) == (newer,)

    async_store.run(scenario)


def test_async_ensure_keeps_config_and_signing_key(async_store: AsyncBackend) -> None:
    original = make_project(31)
    configured = dataclasses.replace(make_project(32, name="Configured"), id=original.id)

    async def scenario(store: Any) -> Project:
        assert await arun(effects.ensure_project(original), store) == original
        await arun(effects.update_project(original.id, config=(("create_team_on_sign_up", True),)), store)
        return await arun(effects.ensure_project(configured), store)

    result = async_store.run(scenario)

    assert result == dataclasses.replace(
        original, config=dataclasses.replace(original.config, create_team_on_sign_up=True), keys=configured.keys
    )
    # a second event loop sees what the first one stored
    assert async_store.run(lambda store: arun(effects.load_project(original.id), store)) == result


def test_async_concurrent_updates_of_different_config_fields_both_survive(async_store: AsyncBackend) -> None:
    project = make_project(33)

    async def writer(store: Any, field: str, value: Callable[[int], Any]) -> None:
        for i in range(50):
            await arun(effects.update_project(project.id, config=((field, value(i)),)), store)

    async def scenario(store: Any) -> Project | None:
        await arun(effects.create_project(project), store)
        await asyncio.gather(
            writer(store, "team_member_default_permissions", lambda i: (f"member-{i}",)),
            writer(store, "sign_up_enabled", lambda i: i % 2 == 0),
        )
        return await arun(effects.load_project(project.id), store)

    final = async_store.run(scenario)

    assert final is not None
    assert final.config.team_member_default_permissions == ("member-49",)
    assert final.config.sign_up_enabled is False  # 49 is odd
    assert final.config.magic_link_enabled is True


def test_async_redis_list_skips_a_dangling_index_entry(async_redis_store: AsyncBackend) -> None:
    project = make_project(34)

    async def scenario(store: Any) -> tuple[Project, ...]:
        assert isinstance(store, AsyncRedisStore)
        await arun(effects.create_project(project), store)
        await store.client.sadd(store.keys.index, "ghost-without-record")
        return await arun(effects.list_projects(), store)

    assert async_redis_store.run(scenario) == (project,)
