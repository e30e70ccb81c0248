"""The API key contract (creating and changing keys: the core's `store_api_key` and `change_api_key`, one commit
each; LoadApiKey, FindApiKeyByHash, ListApiKeys; and the keys'
deletion with their user or team) over every store."""

from __future__ import annotations

import dataclasses
from typing import Any

from redis.crc import key_slot

from backends.redis import RedisStore
from identity_proto.drivers import Store, arun, run
from identity_proto.effects import (
    ApiKeyWrite,
    FindApiKeyByHash,
    ListApiKeys,
    LoadApiKey,
    ResetProjectData,
    create_project,
    perform,
)
from identity_proto.effects.commit import Committed
from identity_proto.flows.api_keys import change_api_key, store_api_key
from identity_proto.flows.projects import new_project
from identity_proto.records import ApiKey, ApiKeyType
from identity_proto.tokens import SeededEntropy
from tests.contract.conftest import AsyncBackend
from tests.contract.factories import (
    OTHER_PROJECT,
    PROJECT,
    T0,
    add_user,
    create_team,
    delete_team,
    delete_user,
    in_threads,
    make_team,
    make_user,
    run_flow,
)


def create_key(store: Store, project_id: str, key: ApiKey) -> Any:
    """What creating a key does to a store: the core's `store_api_key` (one commit, guarded on the owner)."""
    return run_flow(store, lambda: store_api_key(project_id, key))


def update_key(store: Store, project_id: str, key_id: str, **changes: Any) -> Any:
    """What changing a key does to a store: the core's `change_api_key` (a read, then one commit)."""
    return run_flow(store, lambda: change_api_key(project_id, key_id, **changes))


def make_key(key_id: str, owner_id: str = "u1", *, type: ApiKeyType = ApiKeyType.USER, **fields: Any) -> ApiKey:
    values: dict[str, Any] = {
        "id": key_id,
        "type": type,
        "owner_id": owner_id,
        "description": f"key {key_id}",
        "is_public": False,
        "created_at_millis": T0,
        "key_hash": f"hash-of-{key_id}",
        "last_four": key_id[-4:].rjust(4, "0"),
    }
    values.update(fields)
    return ApiKey(**values)


def _owners(store: Store, project_id: str = PROJECT) -> None:
    for user_id in ("u1", "u2"):
        assert store.apply(add_user(project_id, make_user(user_id))) == Committed((make_user(user_id),))
    assert create_team(store, project_id, make_team("t1")) == make_team("t1")


# --------------------------------------------------------------------------------------------------------------
# Creating (store_api_key), LoadApiKey, FindApiKeyByHash


def test_a_created_key_round_trips_every_field_by_id_and_by_hash(store: Store) -> None:
    _owners(store)
    key = make_key(
        "k1", is_public=True, expires_at_millis=T0 + 5, manually_revoked_at_millis=T0 + 1, description="ünï 🔑"
    )

    assert create_key(store, PROJECT, key) == key

    assert store.apply(LoadApiKey(PROJECT, "k1")) == key
    assert store.apply(FindApiKeyByHash(PROJECT, "hash-of-k1")) == key
    loaded = store.apply(LoadApiKey(PROJECT, "k1"))
    assert loaded is not None
    assert loaded.type is ApiKeyType.USER


def test_unknown_ids_and_hashes_find_nothing(store: Store) -> None:
    assert store.apply(LoadApiKey(PROJECT, "nope")) is None
    assert store.apply(FindApiKeyByHash(PROJECT, "nope")) is None


def test_a_key_for_a_missing_owner_is_refused_and_nothing_is_written(store: Store) -> None:
    _owners(store)
    for key in (make_key("k1", "ghost"), make_key("k2", "ghost", type=ApiKeyType.TEAM), make_key("k3", "t1")):
        # k3: a user key whose owner id is a team's: the owner is looked up among users only
        assert create_key(store, PROJECT, key) is ApiKeyWrite.OWNER_NOT_FOUND
        assert store.apply(LoadApiKey(PROJECT, key.id)) is None
        assert store.apply(FindApiKeyByHash(PROJECT, key.key_hash)) is None
    assert store.apply(ListApiKeys(PROJECT, ApiKeyType.USER, "ghost")) == ()


def test_keys_of_one_project_are_invisible_to_another(store: Store) -> None:
    _owners(store)
    _owners(store, OTHER_PROJECT)
    create_key(store, PROJECT, make_key("k1"))

    assert store.apply(LoadApiKey(OTHER_PROJECT, "k1")) is None
    assert store.apply(FindApiKeyByHash(OTHER_PROJECT, "hash-of-k1")) is None
    assert store.apply(ListApiKeys(OTHER_PROJECT, ApiKeyType.USER, "u1")) == ()


# --------------------------------------------------------------------------------------------------------------
# ListApiKeys


def test_list_is_one_owners_keys_newest_first_ties_by_id_descending(store: Store) -> None:
    _owners(store)
    keys = [
        make_key("k-a", created_at_millis=T0 + 10),
        make_key("k-b", created_at_millis=T0 + 30),
        make_key("k-c", created_at_millis=T0 + 30),
        make_key("k-d", created_at_millis=T0 + 20, manually_revoked_at_millis=T0),
        make_key("k-e", "u2"),
        make_key("k-f", "t1", type=ApiKeyType.TEAM),
    ]
    for key in keys:
        assert create_key(store, PROJECT, key) == key

    listed = store.apply(ListApiKeys(PROJECT, ApiKeyType.USER, "u1"))

    assert [k.id for k in listed] == ["k-c", "k-b", "k-d", "k-a"]
    assert store.apply(ListApiKeys(PROJECT, ApiKeyType.TEAM, "t1")) == (keys[5],)
    assert store.apply(ListApiKeys(PROJECT, ApiKeyType.TEAM, "u1")) == ()


# --------------------------------------------------------------------------------------------------------------
# Changing (change_api_key)


def test_update_sets_the_description_and_revokes_once(store: Store) -> None:
    _owners(store)
    key = make_key("k1")
    create_key(store, PROJECT, key)

    described = update_key(store, PROJECT, "k1", description="renamed")
    revoked = update_key(store, PROJECT, "k1", revoke_at_millis=T0 + 100)
    again = update_key(store, PROJECT, "k1", description="again", revoke_at_millis=T0 + 200)

    assert described == dataclasses.replace(key, description="renamed")
    assert revoked == dataclasses.replace(key, description="renamed", manually_revoked_at_millis=T0 + 100)
    assert again == dataclasses.replace(key, description="again", manually_revoked_at_millis=T0 + 100)
    assert store.apply(LoadApiKey(PROJECT, "k1")) == again
    assert store.apply(FindApiKeyByHash(PROJECT, "hash-of-k1")) == again


def test_an_update_with_nothing_to_change_returns_the_key_as_stored(store: Store) -> None:
    _owners(store)
    key = make_key("k1")
    create_key(store, PROJECT, key)

    assert update_key(store, PROJECT, "k1") == key


def test_update_of_a_missing_key_is_none_and_creates_nothing(store: Store) -> None:
    assert update_key(store, PROJECT, "nope", description="x", revoke_at_millis=T0) is None
    assert store.apply(LoadApiKey(PROJECT, "nope")) is None


def test_concurrent_revocations_all_see_the_one_time_that_was_stored(store: Store) -> None:
    _owners(store)
    create_key(store, PROJECT, make_key("k1"))

    results = in_threads(*(lambda n=n: update_key(store, PROJECT, "k1", revoke_at_millis=T0 + n) for n in range(8)))

    times = {r.manually_revoked_at_millis for r in results}
    assert len(times) == 1
    stored = store.apply(LoadApiKey(PROJECT, "k1"))
    assert stored is not None
    assert {stored.manually_revoked_at_millis} == times


# --------------------------------------------------------------------------------------------------------------
# Deleted with their user or team


def test_deleting_a_user_deletes_its_keys_and_no_other(store: Store) -> None:
    _owners(store)
    for key in (make_key("k1"), make_key("k2"), make_key("k3", "u2"), make_key("k4", "t1", type=ApiKeyType.TEAM)):
        create_key(store, PROJECT, key)

    assert delete_user(store, PROJECT, "u1") is True

    for gone in ("k1", "k2"):
        assert store.apply(LoadApiKey(PROJECT, gone)) is None
        assert store.apply(FindApiKeyByHash(PROJECT, f"hash-of-{gone}")) is None
    assert store.apply(ListApiKeys(PROJECT, ApiKeyType.USER, "u1")) == ()
    assert store.apply(LoadApiKey(PROJECT, "k3")) == make_key("k3", "u2")
    assert store.apply(FindApiKeyByHash(PROJECT, "hash-of-k4")) == make_key("k4", "t1", type=ApiKeyType.TEAM)


def test_deleting_a_team_deletes_its_keys_and_no_other(store: Store) -> None:
    _owners(store)
    team_key = make_key("k1", "t1", type=ApiKeyType.TEAM)
    create_key(store, PROJECT, team_key)
    create_key(store, PROJECT, make_key("k2"))

    assert delete_team(store, PROJECT, "t1") is True

    assert store.apply(LoadApiKey(PROJECT, "k1")) is None
    assert store.apply(FindApiKeyByHash(PROJECT, "hash-of-k1")) is None
    assert store.apply(ListApiKeys(PROJECT, ApiKeyType.TEAM, "t1")) == ()
    assert store.apply(LoadApiKey(PROJECT, "k2")) == make_key("k2")


def test_a_recreated_owner_with_the_same_id_has_no_keys(store: Store) -> None:
    _owners(store)
    create_key(store, PROJECT, make_key("k1"))
    delete_user(store, PROJECT, "u1")
    store.apply(add_user(PROJECT, make_user("u1")))

    assert store.apply(ListApiKeys(PROJECT, ApiKeyType.USER, "u1")) == ()
    assert store.apply(FindApiKeyByHash(PROJECT, "hash-of-k1")) is None


def test_resetting_the_project_removes_its_keys(store: Store) -> None:
    project, _ = new_project(SeededEntropy(1), T0, "P")
    assert run(create_project(project), store)
    _owners(store, project.id)
    create_key(store, project.id, make_key("k1"))

    assert store.apply(ResetProjectData(project.id)) is True

    assert store.apply(LoadApiKey(project.id, "k1")) is None
    assert store.apply(FindApiKeyByHash(project.id, "hash-of-k1")) is None
    assert store.apply(ListApiKeys(project.id, ApiKeyType.USER, "u1")) == ()


def test_creating_a_key_races_with_deleting_its_owner_and_never_leaves_an_orphan(store: Store) -> None:
    for round_ in range(5):
        user_id = f"racer-{round_}"
        store.apply(add_user(PROJECT, make_user(user_id)))
        key = make_key(f"k-{round_}", user_id)
        created, _deleted = in_threads(
            lambda key=key: create_key(store, PROJECT, key),
            lambda user_id=user_id: delete_user(store, PROJECT, user_id),
        )
        # Whichever ran first, no key is left pointing at the deleted user.
        assert created in (key, ApiKeyWrite.OWNER_NOT_FOUND)
        assert store.apply(LoadApiKey(PROJECT, key.id)) is None
        assert store.apply(FindApiKeyByHash(PROJECT, key.key_hash)) is None


# --------------------------------------------------------------------------------------------------------------
# Redis specifics, and the asyncio stores


def test_redis_stores_only_the_hash_and_every_key_in_the_projects_slot(redis_store: RedisStore) -> None:
    _owners(redis_store)
    create_key(redis_store, PROJECT, make_key("k1"))
    create_key(redis_store, PROJECT, make_key("k2", "t1", type=ApiKeyType.TEAM))
    keys = redis_store.keys
    names = [
        keys.api_key(PROJECT, "k1"),
        keys.api_key_by_hash(PROJECT),
        keys.owner_api_keys(PROJECT, "user", "u1"),
        keys.owner_api_keys(PROJECT, "team", "t1"),
    ]
    client: Any = redis_store.client
    assert all(client.exists(name) for name in names)
    assert {key_slot(name.encode()) for name in names} == {key_slot(keys.project(PROJECT).encode())}
    assert client.hget(keys.api_key_by_hash(PROJECT), "hash-of-k1") == b"k1"


def test_the_asyncio_stores_perform_every_api_key_effect(async_store: AsyncBackend) -> None:
    async def scenario(store: Any) -> None:
        await arun(perform(add_user(PROJECT, make_user("u1"))), store)
        key = make_key("k1")
        assert await arun(store_api_key(PROJECT, key), store) == key
        assert await arun(perform(LoadApiKey(PROJECT, "k1")), store) == key
        assert await arun(perform(FindApiKeyByHash(PROJECT, "hash-of-k1")), store) == key
        assert await arun(perform(ListApiKeys(PROJECT, ApiKeyType.USER, "u1")), store) == (key,)
        revoked = await arun(change_api_key(PROJECT, "k1", revoke_at_millis=T0 + 1), store)
        assert revoked == dataclasses.replace(key, manually_revoked_at_millis=T0 + 1)

    async_store.run(scenario)
