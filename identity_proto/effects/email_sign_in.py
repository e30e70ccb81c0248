"""Signing in with a code sent to an e-mail address (reference §2.2): why an address may not, and what signing in
did (the decisions: `identity_proto.flows.otp`)."""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING

from identity_proto.records import User

if TYPE_CHECKING:
    from dataclasses import dataclass
else:
    from identity_proto.quickinit import dataclass  # methods written on first use


class EmailRefusal(Enum):
    """Why an address cannot sign in with a code (reference §2.2 step 2)."""

    #: The address is the auth e-mail of a user whose e-mail is not verified.
    UNVERIFIED = "unverified"
    #: Nobody holds the address and the project does not allow sign-up.
    SIGN_UP_DISABLED = "sign_up_disabled"


class EmailSignInOutcome(Enum):
    """What the end of a code sign-in did (`identity_proto.flows.otp.sign_in_by_email`)."""

    #: An existing user was signed in: a session was created for them.
    SIGNED_IN = "signed_in"
    #: Nobody held the address: `new_user` (and its personal team, if given) was created and signed in.
    SIGNED_UP = "signed_up"
    #: The user has a second factor: no session was created (the caller asks for it).
    MFA_REQUIRED = "mfa_required"
    #: `EmailRefusal.UNVERIFIED`: nothing written.
    UNVERIFIED = "unverified"
    #: `EmailRefusal.SIGN_UP_DISABLED`: nothing written.
    SIGN_UP_DISABLED = "sign_up_disabled"
    #: A user with `new_user.id` exists already (its ids are random: practically never); nothing written.
    ID_TAKEN = "id_taken"


@dataclass(frozen=True, slots=True)
class EmailSignIn:
    """The result of `sign_in_by_email`: the outcome, and the user as stored after it (None when nothing was found
    or created)."""

    outcome: EmailSignInOutcome
    user: User | None = None
