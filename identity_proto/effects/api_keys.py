"""User and team API keys (reference part 2 §5).

Reads are effects; writes are a `Commit` built by the core (`identity_proto.flows.api_keys`): a new key (`PutApiKey`)
guarded on its owner existing (`ApiKeyOwnerExists`: a key never points at a missing owner, and deleting the owner
(`flows.users.drop_user`, `flows.teams.drop_team`) deletes its keys in the same commit), a change (`PatchApiKey`)
guarded on the key's changeable fields as read (`ApiKeyIs`). (Hashes never collide: a key holds 225 random bits.)"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Any

from identity_proto.effects.base import StorageEffect
from identity_proto.effects.commit import CommitGuard, CommitWrite
from identity_proto.records import ApiKey, ApiKeyType

if TYPE_CHECKING:
    from dataclasses import dataclass
else:
    from identity_proto.quickinit import dataclass  # methods written on first use


#: The fields of a stored key that change (`PatchApiKey`); the others are fixed when it is made.
API_KEY_CHANGEABLE = ("description", "manually_revoked_at_millis")


class ApiKeyWrite(Enum):
    """Why an API key was not created."""

    #: The key's user (a user key) or team (a team key) does not exist; nothing written.
    OWNER_NOT_FOUND = "owner_not_found"


@dataclass(frozen=True, slots=True)
class ApiKeyOwnerExists(CommitGuard):
    """The user (a user key) or team (a team key) `owner_id` exists."""

    type: ApiKeyType
    owner_id: str


@dataclass(frozen=True, slots=True)
class ApiKeyIs(CommitGuard):
    """The key exists, and its fields `names` hold what they held in `key` when the flow read it."""

    key: ApiKey
    names: tuple[str, ...] = API_KEY_CHANGEABLE


@dataclass(frozen=True, slots=True)
class PutApiKey(CommitWrite):
    """Store a new API key, indexed by its owner and by its hash (guard its owner with `ApiKeyOwnerExists`)."""

    key: ApiKey


@dataclass(frozen=True, slots=True)
class PatchApiKey(CommitWrite):
    """Set changeable fields (`API_KEY_CHANGEABLE`) of an existing key, and only those."""

    key_id: str
    changes: tuple[tuple[str, Any], ...]

    def __post_init__(self) -> None:
        if any(name not in API_KEY_CHANGEABLE for name, _value in self.changes):
            raise TypeError(f"PatchApiKey sets only {API_KEY_CHANGEABLE}")


@dataclass(frozen=True, slots=True)
class LoadApiKey(StorageEffect["ApiKey | None"]):
    """The API key with this id (of either type), or None."""

    project_id: str
    key_id: str


@dataclass(frozen=True, slots=True)
class FindApiKeyByHash(StorageEffect["ApiKey | None"]):
    """The API key whose text hashes to `key_hash` (of either type), or None."""

    project_id: str
    key_hash: str


@dataclass(frozen=True, slots=True)
class ListApiKeys(StorageEffect[tuple[ApiKey, ...]]):
    """The keys of one owner (revoked and expired ones included), newest first: by `created_at_millis`
    descending, ties by id descending."""

    project_id: str
    type: ApiKeyType
    owner_id: str


@dataclass(frozen=True, slots=True)
class UserApiKeysAre(CommitGuard):
    """The API keys of user `user_id` are exactly `key_ids` (a user's deletion decided on them)."""

    user_id: str
    key_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DropApiKey(CommitWrite):
    """Remove a stored key (as the flow read it): its record, its hash's entry and its place among its owner's."""

    key: ApiKey
