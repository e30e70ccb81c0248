"""Anonymous users (reference part 2, §4): what an upgrade in place may answer. (Signing one up and upgrading it are
the core's commits: `identity_proto.flows.anonymous`.)"""

from __future__ import annotations

from enum import Enum

#: The name of the personal team an anonymous user gets (reference §4, e2e): the one an upgrade renames.
ANONYMOUS_PERSONAL_TEAM_NAME = "Personal Team"


class UpgradeRefusal(Enum):
    """Why an upgrade (`flows.anonymous.commit_upgrade`) wrote nothing."""

    #: No user with that id (deleted since the token was issued).
    NOT_FOUND = "not_found"
    #: The user is not anonymous (any more): its token is ignored, as a non-anonymous token on a sign-up is.
    NOT_ANONYMOUS = "not_anonymous"
    #: The new auth e-mail is another user's.
    EMAIL_TAKEN = "email_taken"
    #: The provider account the upgrade links (`oauth_account`) is another user's sign-in account.
    ACCOUNT_TAKEN = "account_taken"
