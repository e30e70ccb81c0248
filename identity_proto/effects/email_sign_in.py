"""Signing in with a code sent to an e-mail address: each request one atomic step (reference §2.2)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from identity_proto.effects.base import StorageEffect
from identity_proto.records import CodePurpose, Membership, Session, Team, User, VerificationCode


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
    """What `SignInByEmail` did."""

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
    """The result of `SignInByEmail`: the outcome, and the user as stored after it (None when nothing was found
    or created)."""

    outcome: EmailSignInOutcome
    user: User | None = None


@dataclass(frozen=True, slots=True)
class SignInByEmail(StorageEffect[EmailSignIn]):
    """Sign in whoever holds the auth e-mail `email`, or sign them up, as one atomic step (the end of a code
    sign-in, whose code the caller has consumed):

    - a user holds the address: UNVERIFIED (nothing written) unless their e-mail is verified; else mark
      `otp_auth_enabled` (signing in by code adds the method); then MFA_REQUIRED when they have a TOTP secret;
      else raise `last_active_at_millis` to `now_ms` if it is earlier, store `session` as theirs (its `user_id`
      replaced by theirs), SIGNED_IN;
    - nobody does: SIGN_UP_DISABLED (nothing written) unless `sign_up_enabled`; else store `new_user` (whose auth
      e-mail is `email`) with its e-mail index entry, and `personal_team` with its creator's membership when given
      (the caller has set `new_user.selected_team_id` to it), and `session`: SIGNED_UP.
    """

    project_id: str
    email: str
    now_ms: int
    sign_up_enabled: bool
    new_user: User
    session: Session
    personal_team: tuple[Team, Membership] | None = None

    def __post_init__(self) -> None:
        if self.new_user.auth_email != self.email:
            raise ValueError("the user signing up holds the address as their auth e-mail")
        if self.personal_team is not None and self.new_user.selected_team_id != self.personal_team[0].id:
            raise ValueError("a new user has their personal team selected")
