"""User and team API keys (reference part 2 §5)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from identity_proto.effects.base import StorageEffect
from identity_proto.records import ApiKey, ApiKeyType


class ApiKeyWrite(Enum):
    """Why an API key was not created."""

    #: The key's user (a user key) or team (a team key) does not exist; nothing written.
    OWNER_NOT_FOUND = "owner_not_found"


@dataclass(frozen=True, slots=True)
class CreateApiKey(StorageEffect["ApiKey | ApiKeyWrite"]):
    """Store a new API key, indexed by its owner and by its hash, only if its owner (the user or team `key.owner_id`
    names, by `key.type`) exists: OWNER_NOT_FOUND otherwise. A key therefore never points at a missing owner, and
    deleting the owner (DeleteUser, DeleteTeam) deletes its keys in the same step. (Hashes never collide: a key
    holds 225 random bits.)"""

    project_id: str
    key: ApiKey


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
class UpdateApiKey(StorageEffect["ApiKey | None"]):
    """Set a key's `description` (when not None) and, with `revoke_at_millis`, its `manually_revoked_at_millis`
    unless it is set already (a key is revoked once: a second revocation keeps the first time). Returns the
    stored key, or None when there is no key with this id."""

    project_id: str
    key_id: str
    description: str | None = None
    revoke_at_millis: int | None = None
