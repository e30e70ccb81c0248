"""Export and import of a project's users, teams and memberships as JSON (password hashes as hashes, never
plaintext; sessions, codes and mail are not exported)."""

from __future__ import annotations

import dataclasses
from typing import Any

from identity_proto.effects import (
    CommitConflict,
    Flow,
    ListMemberships,
    ListTeams,
    ListUsers,
    LoadProject,
    TeamWrite,
    perform,
)
from identity_proto.effects.commit import (
    Announce,
    CommitGuard,
    CommitWrite,
    IndexIs,
    IndexName,
    IsAbsent,
    PutUser,
    RecordKind,
    SetIndex,
    commit,
)
from identity_proto.errors import ErrorCode, KnownError
from identity_proto.flows.teams import add_member, store_team
from identity_proto.records import Membership, Team, User, config_to_json, user_from_json, user_to_json
from identity_proto.users import checked_email, email_taken

__all__ = ["EXPORT_FORMAT", "export_project_data", "import_project_data"]

EXPORT_FORMAT = "identity-service/project-data"


def export_project_data(project_id: str, now_ms: int) -> Flow[dict[str, Any]]:
    """Everything a test suite seeds: users (with password hashes and TOTP secrets), teams, memberships."""
    project = yield from perform(LoadProject(project_id))
    if project is None:
        raise KnownError(ErrorCode.PROJECT_NOT_FOUND, details={"project_id": project_id})
    users = yield from perform(ListUsers(project_id))
    teams = yield from perform(ListTeams(project_id))
    memberships = yield from perform(ListMemberships(project_id))
    return {
        "format": EXPORT_FORMAT,
        "version": 1,
        "exported_at_millis": now_ms,
        "project": {"id": project.id, "display_name": project.display_name, "config": config_to_json(project.config)},
        "users": [user_to_json(user) for user in users],
        "teams": [dataclasses.asdict(team) for team in teams],
        "memberships": [{**dataclasses.asdict(m), "permissions": list(m.permissions)} for m in memberships],
    }


def import_project_data(project_id: str, data: dict[str, Any]) -> Flow[dict[str, int]]:
    """Add the users, teams and memberships of an export to a project (which keeps its own id, keys and config).
    Stops at the first conflict: a user id or auth e-mail that exists already is 409."""
    if data.get("format") != EXPORT_FORMAT or data.get("version") != 1:
        raise KnownError(ErrorCode.SCHEMA_ERROR, details={"message": f"not a {EXPORT_FORMAT} version 1 document"})
    try:
        users = [user_from_json(item) for item in data.get("users", [])]
        users = [  # the rule every e-mail input follows (a ValueError names the problem)
            dataclasses.replace(user, primary_email=checked_email(user.primary_email))
            if user.primary_email is not None
            else user
            for user in users
        ]
        teams = [Team(**item) for item in data.get("teams", [])]
        memberships = [
            Membership(**{**item, "permissions": tuple(sorted(item.get("permissions", ())))})
            for item in data.get("memberships", [])
        ]
    except (TypeError, KeyError, ValueError) as exc:
        raise KnownError(ErrorCode.SCHEMA_ERROR, details={"message": f"invalid export document: {exc}"}) from None
    for user in users:
        yield from _import_user(project_id, user)
    for team in teams:
        yield from store_team(project_id, team)
    for membership in memberships:
        added = yield from add_member(project_id, membership)
        if isinstance(added, TeamWrite):
            raise KnownError(
                ErrorCode.TEAM_MEMBERSHIP_ALREADY_EXISTS, message=f"Membership not imported: {added.value}"
            )
    return {"users": len(users), "teams": len(teams), "memberships": len(memberships)}


def _import_user(project_id: str, user: User) -> Flow[None]:
    """One commit per user: the user with its auth e-mail's index entry and `user.created`, only while its id and
    its address are free (a conflict is the answer here, not a race to re-run: the import stops, 409)."""
    id_free = IsAbsent(RecordKind.USER, user.id)
    guards: list[CommitGuard] = [id_free]
    writes: list[CommitWrite] = [PutUser(user)]
    if user.auth_email is not None:
        guards.append(IndexIs(IndexName.EMAIL, user.auth_email, None))
        writes.append(SetIndex(IndexName.EMAIL, user.auth_email, user.id))
    try:
        yield from commit(
            project_id, tuple(guards), tuple(writes), (Announce("user.created", (RecordKind.USER, user.id)),)
        )
    except CommitConflict as conflict:
        if conflict.guard is id_free:
            raise KnownError(ErrorCode.USER_EMAIL_ALREADY_EXISTS, message=f"User {user.id} exists already.") from None
        raise email_taken(user.primary_email or "") from None
