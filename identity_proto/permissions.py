"""Permission rules (reference part 2 §6): the system permissions, the definitions a project has per scope, and
what a set of direct grants amounts to.

Rules:
- A project defines permissions in its config (`ProjectConfig.permission_definitions`), each of one scope, `team`
  or `project`; ids are unique across both scopes.
- The six system permissions (`$...`) are team permissions no project defines: they exist in every project, with
  the descriptions below and nothing contained. A team definition may contain them; a project definition may not.
- A grant is *direct*: a membership (team scope) or a user (project scope) holds permission ids. What a holder has
  is its direct ids that still have a definition in that scope, and, recursively, what their definitions contain
  (ids without a definition are skipped: a definition deleted meanwhile grants nothing).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from identity_proto.records import PermissionDefinition, ProjectConfig

__all__ = [
    "PERMISSION_ID",
    "SCOPES",
    "SYSTEM_PERMISSIONS",
    "definitions_by_id",
    "held_permissions",
    "listed_definitions",
]

#: The two scopes a definition has.
SCOPES = ("team", "project")

#: The system permissions and their descriptions (the original's `teamSystemPermissionMap`).
SYSTEM_PERMISSIONS: Mapping[str, str] = {
    "$update_team": "Update the team information",
    "$delete_team": "Delete the team",
    "$read_members": "Read and list the other members of the team",
    "$remove_members": "Remove other members from the team",
    "$invite_members": "Invite other users to the team",
    "$manage_api_keys": "Create and manage API keys for the team",
}

#: A permission id as paths, filters and contained lists name it: a custom id, or `$` and a system id's name.
PERMISSION_ID = re.compile(r"^\$?[a-z0-9_:]+$")


def definitions_by_id(config: ProjectConfig, scope: str) -> dict[str, PermissionDefinition]:
    """The definitions of `scope` by id: the project's own, and for `team` the system permissions too."""
    found = {d.id: d for d in config.permission_definitions if d.scope == scope}
    if scope == "team":
        for permission_id, description in SYSTEM_PERMISSIONS.items():
            found.setdefault(permission_id, PermissionDefinition(permission_id, "team", description))
    return found


def listed_definitions(config: ProjectConfig, scope: str) -> list[PermissionDefinition]:
    """What GET /<scope>-permission-definitions lists: `definitions_by_id`, sorted by id (plain string order, so
    the `$` ids come first)."""
    return sorted(definitions_by_id(config, scope).values(), key=lambda d: d.id)


def held_permissions(
    direct: Iterable[str], definitions: Mapping[str, PermissionDefinition], *, recursive: bool
) -> frozenset[str]:
    """What a holder of the `direct` ids has: those that have a definition, and with `recursive` everything their
    definitions contain, transitively (cycles end where an id was seen)."""
    held: set[str] = set()
    pending = list(direct)
    while pending:
        current = definitions.get(pending.pop())
        if current is None or current.id in held:
            continue
        held.add(current.id)
        if recursive:
            pending.extend(current.contained_permission_ids)
    return frozenset(held)
