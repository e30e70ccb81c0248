"""Stored records: what the store keeps, as frozen dataclasses.

Records hold exactly what is stored, secrets included in hashed form (key hashes, the token signing key);
what a caller may *see* of them is decided in one place, `identity_proto.render`. Backends import this module
to (de)serialise records; `to_json`/`from_json` here are the one mapping between records and JSON.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "INTERNAL_PROJECT_ID",
    "Project",
    "ProjectConfig",
    "ProjectKeys",
    "TrustedDomain",
    "config_from_json",
    "config_to_json",
    "project_from_json",
    "project_to_json",
]

#: The project that manages the others (reference §1.1: the literal project id `internal`).
INTERNAL_PROJECT_ID = "internal"


@dataclass(frozen=True, slots=True)
class TrustedDomain:
    """A callback base URL the project trusts (reference §2.2 step 4), e.g. https://app.example.com."""

    domain: str
    handler_path: str = "/handler"


@dataclass(frozen=True, slots=True)
class ProjectConfig:
    """A project's configuration. Defaults suit a service developers run locally with code sign-in first."""

    sign_up_enabled: bool = True
    magic_link_enabled: bool = True
    credential_enabled: bool = True
    allow_localhost: bool = True
    domains: tuple[TrustedDomain, ...] = ()
    client_team_creation_enabled: bool = False
    client_user_deletion_enabled: bool = False
    create_team_on_sign_up: bool = False
    require_email_verification: bool = False
    #: Reference §1.2 step 7: when true, client requests without a publishable key are refused.
    require_publishable_client_key: bool = False
    team_creator_default_permissions: tuple[str, ...] = ("team_admin",)
    team_member_default_permissions: tuple[str, ...] = ("team_member",)


@dataclass(frozen=True, slots=True)
class ProjectKeys:
    """SHA-256 hex digests of the project's API keys; None where the project has no such key."""

    publishable_client_key_hash: str | None = None
    secret_server_key_hash: str | None = None
    super_secret_admin_key_hash: str | None = None


@dataclass(frozen=True, slots=True)
class Project:
    """A project (tenant): every user, team and session belongs to exactly one."""

    id: str
    display_name: str
    created_at_millis: int
    #: The private scalar of the project's ES256 signing key, hex. Every worker sharing a store reads it from
    #: there, so tokens issued by one worker verify on any other.
    signing_key: str
    config: ProjectConfig = field(default_factory=ProjectConfig)
    keys: ProjectKeys = field(default_factory=ProjectKeys)


def config_to_json(config: ProjectConfig) -> dict[str, Any]:
    """The config as a JSON-ready dict (tuples as lists, domains as objects)."""
    return {name: _plain(getattr(config, name)) for name in (f.name for f in dataclasses.fields(ProjectConfig))}


def config_from_json(data: dict[str, Any]) -> ProjectConfig:
    """Inverse of `config_to_json`; keys missing from `data` take their defaults (records written by older
    versions stay readable)."""
    known = {f.name for f in dataclasses.fields(ProjectConfig)}
    values: dict[str, Any] = {}
    for name, value in data.items():
        if name not in known:
            continue
        if name == "domains":
            values[name] = tuple(TrustedDomain(**item) for item in value)
        elif isinstance(value, list):
            values[name] = tuple(value)
        else:
            values[name] = value
    return ProjectConfig(**values)


def project_to_json(project: Project) -> dict[str, Any]:
    """The whole record (hashes and signing key included) as JSON for a store; never for a response."""
    return {
        "id": project.id,
        "display_name": project.display_name,
        "created_at_millis": project.created_at_millis,
        "signing_key": project.signing_key,
        "config": config_to_json(project.config),
        "keys": dataclasses.asdict(project.keys),
    }


def project_from_json(data: dict[str, Any]) -> Project:
    """Inverse of `project_to_json`."""
    return Project(
        id=data["id"],
        display_name=data["display_name"],
        created_at_millis=data["created_at_millis"],
        signing_key=data["signing_key"],
        config=config_from_json(data.get("config", {})),
        keys=ProjectKeys(**data.get("keys", {})),
    )


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(item) for item in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value
