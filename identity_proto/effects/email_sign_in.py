"""Signing in with a code sent to an e-mail address (reference §2.2): storing the code, and what signing in did."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from identity_proto.effects.base import StorageEffect
from identity_proto.records import CodePurpose, User, VerificationCode


class EmailRefusal(Enum):
    """Why an address cannot sign in with a code (reference §2.2 step 2)."""

    #: The address is the auth e-mail of a user whose e-mail is not verified.
    UNVERIFIED = "unverified"
    #: Nobody holds the address and the project does not allow sign-up.
    SIGN_UP_DISABLED = "sign_up_disabled"


@dataclass(frozen=True, slots=True)
class CreateSignInCode(StorageEffect["EmailRefusal | None"]):
    """Store the sign-in `code` for the address `code.email`, unless that address cannot sign in with it: the
    refusal (and nothing written) when the user holding it as their auth e-mail is unverified, or when nobody
    holds it and `sign_up_enabled` is False. None when stored. (Sending a code is this one step.)"""

    project_id: str
    code: VerificationCode
    sign_up_enabled: bool

    def __post_init__(self) -> None:
        if self.code.email is None:
            raise ValueError("a sign-in code names the address it was sent to")
        if self.code.purpose != CodePurpose.SIGN_IN:
            raise ValueError(f"a sign-in code has the sign-in purpose, not {self.code.purpose!r}")


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
