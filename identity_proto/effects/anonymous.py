"""Anonymous users (reference part 2, §4): upgrading one in place when it signs up for real, one atomic step.
(Signing one up is the core's new-user commit: `identity_proto.flows.anonymous.store_anonymous_user`.)"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from identity_proto.changes import UserChanges
from identity_proto.effects.base import StorageEffect
from identity_proto.records import OAuthAccount, User

#: The name of the personal team an anonymous user gets (reference §4, e2e): the one an upgrade renames.
ANONYMOUS_PERSONAL_TEAM_NAME = "Personal Team"


class UpgradeRefusal(Enum):
    """Why `UpgradeAnonymousUser` wrote nothing."""

    #: No user with that id (deleted since the token was issued).
    NOT_FOUND = "not_found"
    #: The user is not anonymous (any more): its token is ignored, as a non-anonymous token on a sign-up is.
    NOT_ANONYMOUS = "not_anonymous"
    #: The new auth e-mail is another user's.
    EMAIL_TAKEN = "email_taken"
    #: The provider account the upgrade links (`oauth_account`) is another user's sign-in account.
    ACCOUNT_TAKEN = "account_taken"


@dataclass(frozen=True, slots=True)
class UpgradeAnonymousUser(StorageEffect[User | UpgradeRefusal]):
    """Make the anonymous user `user_id` a signed-up one in place, as one atomic step: only while it exists and is
    still anonymous (NOT_FOUND / NOT_ANONYMOUS otherwise), and only if its new auth e-mail is nobody else's
    (EMAIL_TAKEN): then set `changes` (which make it non-anonymous and give it its address) keeping the e-mail
    index in step, and rename every team it is a member of that is still called "Personal Team" to
    `personal_team_name`. Returns the upgraded user; a refusal writes nothing."""

    project_id: str
    user_id: str
    changes: UserChanges
    personal_team_name: str
    #: An OAuth sign-up's upgrade links this provider account in the same step (appended to the user's accounts,
    #: its OAuth index entry claimed when it signs in: ACCOUNT_TAKEN if another user holds it).
    oauth_account: OAuthAccount | None = None

    def __post_init__(self) -> None:
        # Loose (field, value) pairs are accepted and validated here, once (stores never check names again).
        object.__setattr__(self, "changes", UserChanges.of(self.changes))
        if self.changes.as_dict().get("is_anonymous", True) is not False:
            raise ValueError("an upgrade makes the user non-anonymous")
