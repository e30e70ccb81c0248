"""The memory store: anonymous users (each one step under the lock, made of the handlers of users, teams and
sessions)."""

from __future__ import annotations

from backends.memory.oauth import upgrade_claiming_account
from backends.memory.store import MemoryStore, _performs
from backends.memory.users import _update_user, record_user_updated
from identity_proto.effects import (
    ANONYMOUS_PERSONAL_TEAM_NAME,
    UpdateUser,
    UpgradeAnonymousUser,
    UpgradeRefusal,
    UserWrite,
)
from identity_proto.records import User, replaced


@_performs(UpgradeAnonymousUser)
def _upgrade_anonymous_user(store: MemoryStore, effect: UpgradeAnonymousUser) -> User | UpgradeRefusal:
    tenant = store.tenant(effect.project_id)
    stored = tenant.users.get(effect.user_id)
    if stored is None:
        return UpgradeRefusal.NOT_FOUND
    if not stored.is_anonymous:
        return UpgradeRefusal.NOT_ANONYMOUS
    if effect.oauth_account is not None:  # OAuth: the account is claimed in the same step
        claimed = upgrade_claiming_account(store, effect)
        if not isinstance(claimed, User):
            return claimed
        updated = claimed
    else:
        written = _update_user(store, UpdateUser(effect.project_id, effect.user_id, effect.changes))
        if not isinstance(written, User):  # EMAIL_TAKEN, checked before anything is written
            assert written is UserWrite.EMAIL_TAKEN
            return UpgradeRefusal.EMAIL_TAKEN
        updated = written
    for team_id, user_id in tenant.memberships:
        team = tenant.teams.get(team_id)
        if user_id == updated.id and team is not None and team.display_name == ANONYMOUS_PERSONAL_TEAM_NAME:
            tenant.teams[team_id] = replaced(team, {"display_name": effect.personal_team_name})
    record_user_updated(tenant, updated)  # webhooks: an upgrade announces the user
    return updated
