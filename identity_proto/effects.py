"""The effect vocabulary: every operation a flow needs from the outside world, as a frozen value.

A flow is a generator that *yields* effects and is resumed with their results (`Flow[R]` returns `R`). Drivers
(`identity_proto.drivers`) perform the effects:

- `StorageEffect`: performed by a store (backends/). Each one is **atomic by contract**: a backend performs it
  all or not at all, and no other effect observes it half done. Two writes that must happen together are one
  effect. Backends raise only `StorageUnavailable`; domain outcomes are return values.
- `ComputeEffect`: CPU-heavy pure work (password hashing). `compute()` runs it; the async driver runs it in a
  worker thread so the event loop never stalls.
- `MailEffect`: hand an e-mail to the host's mailer (SMTP, console). Mail kept in the outbox is a storage effect.

Secrets in effects (a password to hash) are excluded from `repr`, so an effect in a log line or a traceback never
shows one.

Each effect's docstring is its contract; each backend implements it once. The typed helpers at the bottom are what
flows call: `project = yield from load_project(project_id)`.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Generic, TypeVar, cast

from identity_proto.changes import MembershipChanges, ProjectConfigChanges, TeamChanges, UserChanges
from identity_proto.records import (
    ClockOverride,
    CodePurpose,
    Email,
    Membership,
    Project,
    Session,
    Team,
    User,
    VerificationCode,
)

__all__ = [
    "ComputeEffect",
    "CreateProject",
    "DeleteProject",
    "Effect",
    "EnsureProject",
    "Flow",
    "ListProjects",
    "LoadProject",
    "StorageEffect",
    "UpdateProject",
    "create_project",
    "delete_project",
    "ensure_project",
    "list_projects",
    "load_project",
    "perform",
    "update_project",
]

R = TypeVar("R", covariant=True)
T = TypeVar("T")


class Effect(Generic[R]):
    """Something a flow needs done; `R` is the type of its result."""

    __slots__ = ()


class StorageEffect(Effect[R]):
    """An atomic storage operation, performed by a store."""

    __slots__ = ()


class MailEffect(Effect[R]):
    """Delivery of an e-mail, performed by the host's mailer."""

    __slots__ = ()


class ComputeEffect(Effect[R]):
    """CPU-heavy pure work, performed by the driver (in a thread under the async driver)."""

    __slots__ = ()

    def compute(self) -> R:
        """Do the work and return its result."""
        raise NotImplementedError


#: A generator flow: yields effects, is sent their results, returns `T`.
Flow = Generator[Effect[Any], Any, T]


def perform(effect: Effect[T]) -> Flow[T]:
    """Yield one effect and return its result, typed."""
    result = yield effect
    return cast(T, result)


# --------------------------------------------------------------------------------------------------------------
# Projects


@dataclass(frozen=True, slots=True)
class LoadProject(StorageEffect["Project | None"]):
    """The project with this id, or None."""

    project_id: str


@dataclass(frozen=True, slots=True)
class CreateProject(StorageEffect[bool]):
    """Store a new project. False (and nothing changes) when a project with its id exists."""

    project: Project


@dataclass(frozen=True, slots=True)
class EnsureProject(StorageEffect[Project]):
    """Store `project` if its id is free; otherwise keep the stored record but replace its key hashes with
    `project.keys` (keys configured at start-up are authoritative; config edits made since are kept).
    Returns the record as stored afterwards."""

    project: Project


@dataclass(frozen=True, slots=True)
class UpdateProject(StorageEffect["Project | None"]):
    """Field-level update: set `display_name` if not None, and each (config field, value) of `config`, leaving
    every other field as stored (so two concurrent updates of different fields both survive).
    Returns the updated project, or None when it does not exist."""

    project_id: str
    display_name: str | None = None
    config: ProjectConfigChanges = field(default_factory=ProjectConfigChanges)

    def __post_init__(self) -> None:
        # Loose (field, value) pairs are accepted and validated here, once (stores never check names again).
        object.__setattr__(self, "config", ProjectConfigChanges.of(self.config))


@dataclass(frozen=True, slots=True)
class ListProjects(StorageEffect[tuple[Project, ...]]):
    """Every project, oldest first (ties by id)."""


@dataclass(frozen=True, slots=True)
class DeleteProject(StorageEffect[bool]):
    """Remove a project and all of its data. False when it did not exist."""

    project_id: str


def load_project(project_id: str) -> Flow[Project | None]:
    """Implements `LoadProject`."""
    return (yield from perform(LoadProject(project_id)))


def create_project(project: Project) -> Flow[bool]:
    """Implements `CreateProject`."""
    return (yield from perform(CreateProject(project)))


def ensure_project(project: Project) -> Flow[Project]:
    """Implements `EnsureProject`."""
    return (yield from perform(EnsureProject(project)))


def update_project(
    project_id: str, *, display_name: str | None = None, config: ProjectConfigChanges | None = None
) -> Flow[Project | None]:
    """Implements `UpdateProject`."""
    return (yield from perform(UpdateProject(project_id, display_name, config or ProjectConfigChanges())))


def list_projects() -> Flow[tuple[Project, ...]]:
    """Implements `ListProjects`."""
    return (yield from perform(ListProjects()))


def delete_project(project_id: str) -> Flow[bool]:
    """Implements `DeleteProject`."""
    return (yield from perform(DeleteProject(project_id)))


# --------------------------------------------------------------------------------------------------------------
# One-time codes


class CodeOutcome(Enum):
    """The result of presenting a one-time code, in the order the checks run (reference §2.1)."""

    #: The code is valid (and was consumed, if asked).
    OK = "ok"
    #: No code with this hash and purpose exists.
    NOT_FOUND = "not_found"
    #: The code's lifetime is over.
    EXPIRED = "expired"
    #: The code was consumed before.
    ALREADY_USED = "already_used"
    #: Its nonce had already seen the maximum number of attempts before this one.
    MAX_ATTEMPTS_REACHED = "max_attempts_reached"


@dataclass(frozen=True, slots=True)
class CodeAttempt:
    """What `AttemptVerificationCode` found: the outcome and, when the code exists, the code as it was."""

    outcome: CodeOutcome
    code: VerificationCode | None = None


@dataclass(frozen=True, slots=True)
class CreateVerificationCode(StorageEffect[None]):
    """Store a new one-time code (its hashes never collide: 224 random bits)."""

    project_id: str
    code: VerificationCode


@dataclass(frozen=True, slots=True)
class AttemptVerificationCode(StorageEffect[CodeAttempt]):
    """Present a code, atomically:

    1. count one attempt on the nonce (`nonce_hash`), remembering the count from before;
    2. look the code up by `code_hash`; a code of another purpose counts as not found;
    3. outcome, first match wins: NOT_FOUND, EXPIRED (`now_ms >= expires_at_millis`), ALREADY_USED,
       MAX_ATTEMPTS_REACHED (count before >= `max_attempts`), else OK;
    4. on OK with `consume`, mark the code used: of concurrent attempts exactly one gets OK.
    """

    project_id: str
    code_hash: str
    nonce_hash: str
    purpose: CodePurpose
    now_ms: int
    consume: bool
    max_attempts: int = 20


@dataclass(frozen=True, slots=True)
class ConsumeVerificationCode(StorageEffect[bool]):
    """Mark a code used. True only for the one caller that found it unused."""

    project_id: str
    code_hash: str


# --------------------------------------------------------------------------------------------------------------
# Users


class UserWrite(Enum):
    """Why a user write did not happen."""

    #: No user with that id.
    NOT_FOUND = "not_found"
    #: The user's auth e-mail would equal another user's auth e-mail in the project.
    EMAIL_TAKEN = "email_taken"
    #: A user with this id exists already (CreateUser never replaces one).
    ID_TAKEN = "id_taken"
    #: The write's `SessionGuard` failed: its session is gone (nothing written).
    SESSION_GONE = "session_gone"


@dataclass(frozen=True, slots=True)
class SessionGuard:
    """A write made only while a session lives: it exists, belongs to `user_id` and has not expired at `now_ms`.
    How a request whose first step writes has its access token's session checked in that same atomic step
    (`identity_proto.preconditions`: no separate trip to the store)."""

    session_id: str
    user_id: str
    now_ms: int


@dataclass(frozen=True, slots=True)
class LoadUser(StorageEffect["User | None"]):
    """The user with this id, or None."""

    project_id: str
    user_id: str


@dataclass(frozen=True, slots=True)
class LoadUserWithTeam(StorageEffect["tuple[User, Team | None] | None"]):
    """The user with this id and the team they have selected (None when none is, or it is gone), read together;
    None when there is no such user. (What rendering a user needs, in one read.)"""

    project_id: str
    user_id: str


@dataclass(frozen=True, slots=True)
class FindUserByAuthEmail(StorageEffect["User | None"]):
    """The user whose auth-enabled primary e-mail is exactly `email` (already normalised), or None."""

    project_id: str
    email: str


@dataclass(frozen=True, slots=True)
class CreateUser(StorageEffect["User | UserWrite"]):
    """Store a new user together with its e-mail index entry; ID_TAKEN or EMAIL_TAKEN (and nothing written) when
    its id exists or its auth e-mail is another user's."""

    project_id: str
    user: User


@dataclass(frozen=True, slots=True)
class UpdateUser(StorageEffect["User | UserWrite"]):
    """Set the given fields of one user, leaving every other field as stored, and keep the e-mail
    index in step with `primary_email`/`primary_email_auth_enabled`. Returns the updated user, NOT_FOUND, or
    EMAIL_TAKEN (nothing written), or with a `session_guard` that fails, SESSION_GONE (nothing written)."""

    project_id: str
    user_id: str
    changes: UserChanges
    #: Also remove every session of the user, in the same atomic step (a password change: no old session may
    #: survive it, even if the process dies right after the write).
    revoke_sessions: bool = False
    #: Write only while this session lives; SESSION_GONE (nothing written) otherwise, before any other check.
    session_guard: SessionGuard | None = None

    def __post_init__(self) -> None:
        # Loose (field, value) pairs are accepted and validated here, once (stores never check names again).
        object.__setattr__(self, "changes", UserChanges.of(self.changes))


@dataclass(frozen=True, slots=True)
class UpdateUserWithTeam(StorageEffect["tuple[User, Team | None] | UserWrite"]):
    """`update`, answering with the user and the team they have selected afterwards (None when none is, or it is
    gone), read in the same atomic step: what a PATCH renders, without a second read."""

    update: UpdateUser


@dataclass(frozen=True, slots=True)
class DeleteUser(StorageEffect[bool]):
    """Remove a user with everything that points at them (sessions, e-mail index entry; team memberships once
    teams exist), at once. False when there was no such user."""

    project_id: str
    user_id: str


@dataclass(frozen=True, slots=True)
class ListUsers(StorageEffect[tuple[User, ...]]):
    """Users ordered by (signed_up_at_millis, id), ascending or descending, starting at `cursor` (inclusive: the
    user with that id comes first) when given, at most `limit` of them (None: all). Filtering by text or team is
    the caller's; this is the ordered walk."""

    project_id: str
    limit: int | None = None
    cursor: str | None = None
    descending: bool = False


# --------------------------------------------------------------------------------------------------------------
# Sessions


@dataclass(frozen=True, slots=True)
class CreateSession(StorageEffect[None]):
    """Store a new session."""

    project_id: str
    session: Session


@dataclass(frozen=True, slots=True)
class UseRefreshToken(StorageEffect["tuple[Session, User] | None"]):
    """The session whose refresh token hashes to `refresh_token_hash`, with its user, recording `now_ms` as the
    session's last use and (if later) the user's last activity; None when there is no such session or its user is
    gone. Expiry is the caller's to judge."""

    project_id: str
    refresh_token_hash: str
    now_ms: int


@dataclass(frozen=True, slots=True)
class LoadSession(StorageEffect["Session | None"]):
    """The session with this id, or None."""

    project_id: str
    session_id: str


@dataclass(frozen=True, slots=True)
class ListSessions(StorageEffect[tuple[Session, ...]]):
    """Every session of one user, newest first (ties by id)."""

    project_id: str
    user_id: str


@dataclass(frozen=True, slots=True)
class DeleteSession(StorageEffect[bool]):
    """Remove one session; False when it did not exist."""

    project_id: str
    session_id: str


@dataclass(frozen=True, slots=True)
class RevokeUserSessions(StorageEffect[int]):
    """Remove every session of one user at once; returns how many there were."""

    project_id: str
    user_id: str


# --------------------------------------------------------------------------------------------------------------
# E-mail


@dataclass(frozen=True, slots=True)
class AppendOutbox(StorageEffect[None]):
    """Keep a sent e-mail in the project's outbox (the oldest go once a project holds `keep` of them)."""

    project_id: str
    email: Email
    keep: int = 1000


@dataclass(frozen=True, slots=True)
class ListOutbox(StorageEffect[tuple[Email, ...]]):
    """The project's outbox, newest first, only mail to `to` when given, at most `limit` items."""

    project_id: str
    to: str | None = None
    limit: int = 100


@dataclass(frozen=True, slots=True)
class SendEmail(MailEffect[None]):
    """Deliver an e-mail through the host's mailer; a failure raises (the flow turns it into an error)."""

    email: Email = field(repr=False)


# --------------------------------------------------------------------------------------------------------------
# Passwords (CPU-heavy: performed in a worker thread under the async driver)


@dataclass(frozen=True, slots=True)
class HashPassword(ComputeEffect[str]):
    """bcrypt hash of `password` with 2**`rounds` iterations, in Modular Crypt Format."""

    password: str = field(repr=False)
    rounds: int = 10

    def compute(self) -> str:
        """Hash with libpass (bcrypt)."""
        from passlib.hash import bcrypt

        return str(bcrypt.using(rounds=self.rounds).hash(self.password))


@dataclass(frozen=True, slots=True)
class VerifyPassword(ComputeEffect[bool]):
    """Whether `password` matches `password_hash` (bcrypt or argon2, Modular Crypt Format)."""

    password: str = field(repr=False)
    password_hash: str = field(repr=False)

    def compute(self) -> bool:
        """Verify with libpass; an unknown or malformed hash never matches."""
        from identity_proto.passwords import PASSWORD_CONTEXT

        try:
            return bool(PASSWORD_CONTEXT.verify(self.password, self.password_hash))
        except (ValueError, TypeError):
            return False


# --------------------------------------------------------------------------------------------------------------
# Teams and memberships


class TeamWrite(Enum):
    """Why a team or membership write did not happen (checked in this order)."""

    USER_NOT_FOUND = "user_not_found"
    TEAM_NOT_FOUND = "team_not_found"
    MEMBERSHIP_EXISTS = "membership_exists"
    MEMBERSHIP_NOT_FOUND = "membership_not_found"


@dataclass(frozen=True, slots=True)
class CreateTeam(StorageEffect["Team | TeamWrite"]):
    """Store a new team and, when given, its creator's membership, at once; USER_NOT_FOUND (nothing written) when
    the creator's user does not exist."""

    project_id: str
    team: Team
    creator: Membership | None = None


@dataclass(frozen=True, slots=True)
class LoadTeam(StorageEffect["Team | None"]):
    """The team with this id, or None."""

    project_id: str
    team_id: str


@dataclass(frozen=True, slots=True)
class ListTeams(StorageEffect[tuple[Team, ...]]):
    """Teams oldest first (ties by id): all of them, or those `user_id` is a member of."""

    project_id: str
    user_id: str | None = None


@dataclass(frozen=True, slots=True)
class UpdateTeam(StorageEffect["Team | None"]):
    """Set the given fields of a team; None when it does not exist."""

    project_id: str
    team_id: str
    changes: TeamChanges

    def __post_init__(self) -> None:
        # Loose (field, value) pairs are accepted and validated here, once (stores never check names again).
        object.__setattr__(self, "changes", TeamChanges.of(self.changes))


@dataclass(frozen=True, slots=True)
class DeleteTeam(StorageEffect[bool]):
    """Remove a team with all its memberships, deselecting it for every user who had it selected, at once."""

    project_id: str
    team_id: str


@dataclass(frozen=True, slots=True)
class AddMembership(StorageEffect["Membership | TeamWrite"]):
    """Add a membership: USER_NOT_FOUND, TEAM_NOT_FOUND, MEMBERSHIP_EXISTS (in that order; nothing written), or
    the stored membership. A membership therefore never points at a missing team or user."""

    project_id: str
    membership: Membership


@dataclass(frozen=True, slots=True)
class LoadMembership(StorageEffect["Membership | None"]):
    """The membership of `user_id` in `team_id`, or None."""

    project_id: str
    team_id: str
    user_id: str


@dataclass(frozen=True, slots=True)
class ListMemberships(StorageEffect[tuple[Membership, ...]]):
    """Memberships in the order they were created (not by timestamp: two created in one millisecond keep their
    order), filtered by team and/or user when given."""

    project_id: str
    team_id: str | None = None
    user_id: str | None = None


@dataclass(frozen=True, slots=True)
class RemoveMembership(StorageEffect[bool]):
    """Remove a membership (with its profile and permissions) and clear the user's selection of that team, at
    once. False when there was none."""

    project_id: str
    team_id: str
    user_id: str


@dataclass(frozen=True, slots=True)
class UpdateMembership(StorageEffect["Membership | None"]):
    """Set the given (field, value) pairs of a membership (profile fields, or `permissions` as a sorted tuple);
    None when there is no such membership."""

    project_id: str
    team_id: str
    user_id: str
    changes: MembershipChanges

    def __post_init__(self) -> None:
        # Loose (field, value) pairs are accepted and validated here, once (stores never check names again).
        object.__setattr__(self, "changes", MembershipChanges.of(self.changes))


@dataclass(frozen=True, slots=True)
class ChangePermission(StorageEffect["Membership | None"]):
    """Grant (`granted`) or revoke one permission id of a membership, atomically (concurrent grants of different
    permissions all survive). None when there is no such membership."""

    project_id: str
    team_id: str
    user_id: str
    permission_id: str
    granted: bool


# --------------------------------------------------------------------------------------------------------------
# Dev/test mode


@dataclass(frozen=True, slots=True)
class LoadClockOverride(StorageEffect["ClockOverride | None"]):
    """The stored clock override (dev/test mode), or None when the service runs on the host's clock."""


@dataclass(frozen=True, slots=True)
class SetClockOverride(StorageEffect[None]):
    """Store a clock override, or remove it (None)."""

    override: ClockOverride | None


@dataclass(frozen=True, slots=True)
class ResetProjectData(StorageEffect[bool]):
    """Remove every user, team, membership, session, code and e-mail of a project, keeping the project itself
    (id, keys, config, signing key). False when there is no such project. A test-only operation: the memory store
    does it at once; Redis scans the project's keys, so a write racing the reset may survive it."""

    project_id: str


# --------------------------------------------------------------------------------------------------------------
# Rate limits


@dataclass(frozen=True, slots=True)
class RateLimitHit:
    """One request counted in one fixed window: the counter `key` (window start included) lives until
    `expires_at_millis`. `amount` 0 reads the counter without counting (a failure limit looks before it acts)."""

    key: str
    expires_at_millis: int
    amount: int = 1


@dataclass(frozen=True, slots=True)
class HitRateLimits(StorageEffect[tuple[int, ...]]):
    """Add each hit's `amount` to its counter, and return each counter's value afterwards (in order). Each increment
    is atomic (concurrent requests never lose a count); the counters need not be one transaction. Counters whose
    window ended before `now_ms` may be forgotten."""

    hits: tuple[RateLimitHit, ...]
    now_ms: int


# --------------------------------------------------------------------------------------------------------------
# Signing in with a code sent to an e-mail address: each request one atomic step (reference §2.2)


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


# --------------------------------------------------------------------------------------------------------------
# Signing in with the second factor (reference §2.5)


class TotpAcceptance(Enum):
    """What `AcceptTotp` did, in the order it checks."""

    #: The attempt code was consumed and the step recorded: the sign-in may go on.
    ACCEPTED = "accepted"
    #: The attempt code is missing or was consumed before; nothing written.
    CODE_USED = "code_used"
    #: No user with that id; nothing written.
    USER_NOT_FOUND = "user_not_found"
    #: The user has had a TOTP of this time step or a later one accepted (a replay); nothing written.
    STEP_USED = "step_used"


@dataclass(frozen=True, slots=True)
class AcceptTotp(StorageEffect[TotpAcceptance]):
    """Accept a right TOTP, once: consume the MFA attempt code `code_hash` and record `step` (the TOTP's time
    step) as the user's `totp_last_step`, together, only if the code is unused and `step` is later than the
    user's `totp_last_step`. Of concurrent calls with one code, or with one step for one user, exactly one is
    ACCEPTED: a TOTP signs in once, however many sign-ins present it."""

    project_id: str
    code_hash: str
    user_id: str
    step: int


# --------------------------------------------------------------------------------------------------------------
# Several effects in one trip


@dataclass(frozen=True, slots=True)
class Together(StorageEffect[tuple[Any, ...]]):
    """Perform `effects` in one trip to the store where the store can (Redis: one pipeline), and return their
    results in order. Each keeps its own atomicity; together they are not one transaction. (The service sends a
    request's rate-limit counters together with the flow's first read.)"""

    effects: tuple[StorageEffect[Any], ...]


#: Effects that only read: a request's rate-limit counters may ride along with one of these (if the request turns
#: out to be over its limit, nothing was written).
READ_EFFECTS: frozenset[type[StorageEffect[Any]]] = frozenset(
    {
        LoadProject,
        ListProjects,
        LoadUser,
        LoadUserWithTeam,
        FindUserByAuthEmail,
        ListUsers,
        LoadSession,
        ListSessions,
        LoadTeam,
        ListTeams,
        LoadMembership,
        ListMemberships,
        ListOutbox,
        LoadClockOverride,
    }
)
