"""The Redis store on a real three-node Redis Cluster (three redis-server processes this module starts, joined with
``redis-cli --cluster create``, stopped by their handles at the end).

- the store contract, in representative part, through `RedisStore.from_url(..., cluster=True)`, while checking that
  every script declares keys of one slot only and that the key prefixes it gets in ARGV carry the same hash tag;
  every script of `backends.redis.SCRIPTS` must have run by the end;
- what spans slots: projects spread over the nodes (the `{projects}` index, ListProjects' pipeline), DeleteProject
  and ResetProjectData (SCAN on every primary), the `{clock}` override, rate-limit counters with `Together`;
- the asyncio store on the cluster;
- sign-in over HTTP against Hypercorn serving the service on the cluster (IDENTITY_REDIS_CLUSTER=1);
- a node killed: its projects fail fast with StorageUnavailable, the others go on, and the same store serves the
  node's slots again once it is back (last: it empties that node).
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import redis
import redis.cluster
from redis.crc import key_slot

from backends.redis import SCRIPTS, AsyncRedisStore, Op, RedisStore, Script
from identity_proto.drivers import arun, run
from identity_proto.effects import (
    ApiKeyWrite,
    AttemptVerificationCode,
    CodeOutcome,
    Committed,
    Conflict,
    DeleteProject,
    EmailRefusal,
    EmailSignInOutcome,
    FindApiKeyByHash,
    HitRateLimits,
    InvitationAcceptance,
    ListApiKeys,
    ListContactChannels,
    ListMemberships,
    ListOutbox,
    ListProjectContactChannels,
    ListProjectPermissions,
    ListProjects,
    ListSessions,
    ListTeamInvitations,
    ListTeams,
    ListUsers,
    LoadApiKey,
    LoadClockOverride,
    LoadMembership,
    LoadProject,
    LoadProviderTokens,
    LoadSession,
    LoadTeamInvitation,
    LoadUser,
    LoadUserWithTeam,
    OAuthState,
    OuterCode,
    PasswordWrite,
    RateLimitHit,
    ResetProjectData,
    SetClockOverride,
    StorageEffect,
    TeamWrite,
    Together,
    UserChannels,
    UseRefreshToken,
    append_outbox,
    create_project,
    ensure_project,
    find_user_by_email,
    find_user_by_oauth_account,
    password_fingerprint,
    reset_primary,
    update_project,
)
from identity_proto.effects.mock_oauth import MockSigningKeys, MockToken
from identity_proto.effects.oauth import ShortLived, put_record, take_record
from identity_proto.errors import ErrorCode, StorageUnavailable
from identity_proto.flows.api_keys import change_api_key, store_api_key
from identity_proto.flows.contact_channels import create_channel, delete_channel, update_channel, verify_with_code
from identity_proto.flows.mock_oauth import MockFailure, signing_keys, take_failure
from identity_proto.flows.oauth import store_oauth_user
from identity_proto.flows.oauth_accounts import commit_accounts, save_provider_tokens
from identity_proto.flows.otp import store_sign_in_code
from identity_proto.flows.permissions import change_definitions
from identity_proto.flows.signin import NewUser, commit_new_user
from identity_proto.records import (
    ApiKey,
    ApiKeyType,
    ClockOverride,
    CodePurpose,
    ContactChannel,
    Membership,
    OAuthAccount,
    PermissionDefinition,
    Project,
    ProjectKeys,
    Team,
    User,
)
from tests.contract.factories import (
    EMAIL_TAKEN,
    ID_TAKEN,
    T0,
    accept_invitation,
    add_membership,
    add_user,
    change_password,
    change_permission,
    create_invitation,
    create_team,
    delete_team,
    delete_user,
    end_session,
    grant_project_permissions,
    make_code,
    make_email,
    make_membership,
    make_session,
    make_team,
    make_user,
    patched_user,
    put_code,
    put_session,
    remove_membership,
    reset_password,
    revoke_invitation,
    revoke_project_permission,
    revoke_sessions,
    run_flow,
    set_password,
    sign_in_by_email,
    sign_up_anonymously,
    store_reset_code,
    update_membership,
    update_team,
    upgrade_anonymous,
    use_code,
)
from tests.e2e.conftest import start_hypercorn, stop_server
from tests.processes import free_port
from tests.redis_ops.servers import RedisProcess, start_redis
from tests.support import client_headers, server_headers

pytestmark = [pytest.mark.redis, pytest.mark.slow]

#: The bus port is set (Redis >= 7): the default, port + 10000, is out of range for most free ports.
CLUSTER_ARGS = ("--cluster-enabled", "yes", "--cluster-port", "{bus_port}", "--save", "", "--appendonly", "no")
READY_TIMEOUT_S = 20.0


def cluster_state(node: RedisProcess) -> str:
    client = redis.Redis(host="127.0.0.1", port=node.port, socket_timeout=1, decode_responses=True)
    try:
        info = client.execute_command("CLUSTER", "INFO")
    except redis.exceptions.RedisError:
        return "unreachable"
    finally:
        client.close()
    found = re.search(r"cluster_state:(\w+)", str(info))
    return found.group(1) if found else "unknown"


def wait_until_ok(nodes: list[RedisProcess]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while {cluster_state(node) for node in nodes} != {"ok"}:
        assert time.monotonic() < deadline, f"cluster not ok: {[cluster_state(node) for node in nodes]}"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[RedisProcess]]:
    """Three redis-server processes in cluster mode, joined into one cluster (no replicas)."""
    cli = shutil.which("redis-cli")
    if cli is None:
        pytest.fail("redis-cli is not on PATH (apt-get install redis-server): these tests never skip", pytrace=False)
    workdir: Path = tmp_path_factory.mktemp("redis-cluster")
    nodes: list[RedisProcess] = []
    try:
        for _ in range(3):
            config = str(workdir / "nodes-{port}.conf")
            nodes.append(start_redis(workdir, "--cluster-config-file", config, *CLUSTER_ARGS))
        addresses = [f"127.0.0.1:{node.port}" for node in nodes]
        created = subprocess.run(
            [cli, "--cluster", "create", *addresses, "--cluster-replicas", "0", "--cluster-yes"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert created.returncode == 0, created.stdout + created.stderr
        wait_until_ok(nodes)
        yield nodes
    finally:
        for node in nodes:
            node.stop()


def url(cluster: list[RedisProcess]) -> str:
    return f"redis://127.0.0.1:{cluster[0].port}/0"


def _strings(value: Any) -> Iterator[str]:
    """Every string in a JSON document (the op list of `commit` and `read`: the key prefixes it builds keys from)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, (list, dict)):
        for item in value.values() if isinstance(value, dict) else value:
            yield from _strings(item)


class SlotCheckedStore(RedisStore):
    """A RedisStore that, before running a script, checks that every key it declares is in one slot and every key
    prefix it passes in ARGV, or in an op list there (what it builds pointed-to keys from), hashes to that slot
    too; it notes which ran."""

    def __init__(self, client: redis.cluster.RedisCluster, *, namespace: str) -> None:
        super().__init__(client, namespace=namespace)
        self.ran: set[str] = set()

    def _execute(self, op: Op) -> Any:
        if isinstance(op, Script):
            declared = {key_slot(key.encode()) for key in op.keys}
            assert len(declared) == 1, f"script {op.name} declares keys of {len(declared)} slots: {op.keys}"
            texts = [arg for arg in op.args if isinstance(arg, str)]
            texts += [t for arg in texts if arg[:1] in ("[", "{") for t in _strings(orjson.loads(arg))]  # an op list
            prefixes = [text for text in texts if text.startswith(self.keys.namespace)]
            built = {key_slot(prefix.encode()) for prefix in prefixes}
            assert built <= declared, f"script {op.name} builds keys in another slot from {prefixes}"
            self.ran.add(op.name)
        return super()._execute(op)


@pytest.fixture(scope="module")
def checked(cluster: list[RedisProcess]) -> Iterator[SlotCheckedStore]:
    client = redis.cluster.RedisCluster.from_url(url(cluster), socket_timeout=2)
    store = SlotCheckedStore(client, namespace=f"cluster-{uuid.uuid4().hex[:8]}:")
    yield store
    store.close()


@pytest.fixture
def store(cluster: list[RedisProcess]) -> Iterator[RedisStore]:
    opened = RedisStore.from_url(url(cluster), cluster=True, namespace=f"cluster-{uuid.uuid4().hex[:8]}:")
    yield opened
    opened.close()


def project_record(project_id: str, name: str = "Project") -> Project:
    return Project(
        id=project_id,
        display_name=name,
        created_at_millis=T0,
        signing_key="ab" * 32,
        keys=ProjectKeys(secret_server_key_hash="hash-of-ssk"),
    )


def node_of(store: RedisStore, key: str) -> str:
    client = store.client
    assert isinstance(client, redis.cluster.RedisCluster)
    return str(client.get_node_from_key(key).name)


def keys_of_project(store: RedisStore, project_id: str) -> list[str]:
    """Every key of the project, from every primary."""
    client = store.client
    assert isinstance(client, redis.cluster.RedisCluster)
    pattern = store.keys.project_pattern(project_id)
    return sorted(key.decode() for key in client.scan_iter(match=pattern, count=1000))


# --------------------------------------------------------------------------------------------------------------
# The contract, in representative part


def _users_and_their_email_index(store: RedisStore, p: str) -> None:
    ada, bob = make_user("ada", "ada@example.com"), make_user("bob", "bob@example.com")
    quiet = dataclasses.replace(make_user("quiet", "ada@example.com", auth=False), signed_up_at_millis=T0 + 1)
    for user in (ada, bob, quiet):
        assert store.apply(add_user(p, user)) == Committed((user,))
    assert store.apply(add_user(p, make_user("eve", "ada@example.com"))) == EMAIL_TAKEN
    assert store.apply(add_user(p, make_user("ada", "new@example.com"))) == ID_TAKEN
    assert store.apply(find_user_by_email(p, "ada@example.com")) == ada
    # Moving an e-mail: refused while another user holds it, then free once its holder moved away.
    taken = patched_user(store, p, "bob", (("primary_email", "ada@example.com"),))
    assert taken is ErrorCode.USER_EMAIL_ALREADY_EXISTS
    moved, _team = patched_user(store, p, "ada", (("primary_email", "ada@work.example"),))
    assert isinstance(moved, User)
    assert moved.primary_email == "ada@work.example"
    assert store.apply(find_user_by_email(p, "ada@example.com")) is None
    assert store.apply(find_user_by_email(p, "ada@work.example")) == moved
    bob_moved, _team = patched_user(store, p, "bob", (("primary_email", "ada@example.com"),))
    assert isinstance(bob_moved, User)
    assert store.apply(find_user_by_email(p, "ada@example.com")) == bob_moved
    # One read for a user and their selected team.
    assert store.apply(LoadUserWithTeam(p, "ada")) == (moved, None)
    # ListUsers: (signed_up_at_millis, id), the cursor inclusive, both directions.
    assert [u.id for u in store.apply(ListUsers(p))] == ["ada", "bob", "quiet"]
    assert [u.id for u in store.apply(ListUsers(p, limit=2, cursor="bob"))] == ["bob", "quiet"]
    assert [u.id for u in store.apply(ListUsers(p, limit=2, descending=True))] == ["quiet", "bob"]
    assert [u.id for u in store.apply(ListUsers(p, cursor="bob", descending=True))] == ["bob", "ada"]
    assert delete_user(store, p, "quiet") is True
    assert delete_user(store, p, "quiet") is False
    assert store.apply(LoadUser(p, "quiet")) is None
    assert [u.id for u in store.apply(ListUsers(p))] == ["ada", "bob"]


def _codes(store: RedisStore, p: str) -> None:
    code = make_code("c1", email="ada@example.com")
    store.apply(put_code(p, code))

    def attempt(code_hash: str, nonce: str, *, now: int = T0, consume: bool = True, **kw: Any) -> CodeOutcome:
        effect = AttemptVerificationCode(p, code_hash, nonce, CodePurpose.SIGN_IN, now, consume, **kw)
        return store.apply(effect).outcome

    assert attempt("code-c1", "nonce-c1", consume=False) is CodeOutcome.OK
    assert store.apply(AttemptVerificationCode(p, "code-c1", "nonce-c1", CodePurpose.MFA, T0, True)).outcome is (
        CodeOutcome.NOT_FOUND
    )
    found = store.apply(AttemptVerificationCode(p, "code-c1", "nonce-c1", CodePurpose.SIGN_IN, T0, True))
    assert (found.outcome, found.code) == (CodeOutcome.OK, code)
    assert attempt("code-c1", "nonce-c1") is CodeOutcome.ALREADY_USED
    store.apply(put_code(p, make_code("c2")))
    assert attempt("code-c2", "nonce-c2", now=T0 + 600_000) is CodeOutcome.EXPIRED
    store.apply(put_code(p, make_code("c3")))
    assert [attempt("code-wrong", "nonce-c3", max_attempts=2) for _ in range(2)] == [CodeOutcome.NOT_FOUND] * 2
    assert attempt("code-c3", "nonce-c3", max_attempts=2) is CodeOutcome.MAX_ATTEMPTS_REACHED
    store.apply(put_code(p, make_code("c4")))
    assert store.apply(use_code(p, "code-c4")) == Committed()
    assert store.apply(use_code(p, "code-c4")) == Conflict(0)


def _sessions(store: RedisStore, p: str) -> None:
    store.apply(add_user(p, make_user("sam", "sam@example.com")))
    first, second = make_session("s1", "sam"), make_session("s2", "sam", created_at=T0 + 1)
    for session in (first, second):
        put_session(store, p, session)
    assert store.apply(ListSessions(p, "sam")) == (second, first)
    used = store.apply(UseRefreshToken(p, "token-s1", T0 + 5))
    assert used is not None
    assert (used[0].last_used_at_millis, used[1].last_active_at_millis) == (T0 + 5, T0 + 5)
    assert end_session(store, p, "s1") is True
    assert store.apply(LoadSession(p, "s1")) is None
    assert store.apply(UseRefreshToken(p, "token-s1", T0 + 6)) is None
    assert revoke_sessions(store, p, "sam") == 1
    assert store.apply(ListSessions(p, "sam")) == ()
    put_session(store, p, make_session("s3", "sam"))
    changed, _team = patched_user(store, p, "sam", (("password_hash", "$2b$04$x"),), revoke_sessions=True)
    assert isinstance(changed, User)
    assert store.apply(ListSessions(p, "sam")) == ()
    assert store.apply(UseRefreshToken(p, "token-s3", T0)) is None


def _teams_and_memberships(store: RedisStore, p: str) -> None:
    for user_id in ("m1", "m2"):
        store.apply(add_user(p, make_user(user_id)))
    team = make_team("t1")
    creator = make_membership("t1", "m1", permissions=("team_admin",))
    assert create_team(store, p, team, creator) == team
    assert create_team(store, p, make_team("t-none"), make_membership("t-none", "nobody")) is (TeamWrite.USER_NOT_FOUND)
    member = make_membership("t1", "m2", created_at=T0 + 1)
    assert add_membership(store, p, member) == member
    assert add_membership(store, p, member) is TeamWrite.MEMBERSHIP_EXISTS
    assert add_membership(store, p, make_membership("t-gone", "m2")) is TeamWrite.TEAM_NOT_FOUND
    granted = change_permission(store, p, "t1", "m2", "$read_members", True)
    assert granted is not None
    assert granted.permissions == ("$read_members",)
    profiled = update_membership(store, p, "t1", "m2", (("display_name", "Member two"),))
    assert profiled == Membership("t1", "m2", T0 + 1, display_name="Member two", permissions=("$read_members",))
    assert store.apply(LoadMembership(p, "t1", "m2")) == profiled
    assert [m.user_id for m in store.apply(ListMemberships(p, team_id="t1"))] == ["m1", "m2"]
    assert store.apply(ListTeams(p, user_id="m2")) == (team,)
    renamed = update_team(store, p, "t1", (("display_name", "Team one"),))
    assert renamed is not None
    assert renamed.display_name == "Team one"
    patched_user(store, p, "m2", (("selected_team_id", "t1"),))
    assert store.apply(LoadUserWithTeam(p, "m2")) == (store.apply(LoadUser(p, "m2")), renamed)
    assert remove_membership(store, p, "t1", "m2") is True
    assert store.apply(LoadUser(p, "m2")) == make_user("m2")  # deselected: as created
    patched_user(store, p, "m1", (("selected_team_id", "t1"),))
    assert delete_team(store, p, "t1") is True
    assert store.apply(LoadUser(p, "m1")) == make_user("m1")  # deselected: as created
    assert store.apply(ListMemberships(p)) == ()
    assert store.apply(ListTeams(p)) == ()


# --- team invitations ---
def _team_invitations(store: RedisStore, p: str) -> None:
    store.apply(add_user(p, make_user("invitee")))
    assert create_team(store, p, make_team("t-inv")) == make_team("t-inv")

    def invitation(name: str) -> Any:
        fields = {"id": f"inv-{name}", "team_id": "t-inv", "email": "invitee@example.com"}
        return make_code(name, purpose=CodePurpose.TEAM_INVITATION, **fields)

    kept, revoked = invitation("kept"), invitation("revoked")
    assert create_invitation(store, p, kept) is True
    assert create_invitation(store, p, revoked) is True
    assert store.apply(LoadTeamInvitation(p, "inv-kept")) == kept
    assert store.apply(ListTeamInvitations(p, team_id="t-inv")) == (kept, revoked)
    assert store.apply(ListTeamInvitations(p, emails=("invitee@example.com",))) == (kept, revoked)
    assert revoke_invitation(store, p, "inv-revoked", "t-inv") is True
    membership = make_membership("t-inv", "invitee", created_at=T0 + 1)
    assert accept_invitation(store, p, kept, T0 + 1, membership) is InvitationAcceptance.ACCEPTED
    assert store.apply(LoadMembership(p, "t-inv", "invitee")) == membership


def _signing_in_by_email(store: RedisStore, p: str) -> None:
    code = make_code("c-email", email="new@example.com")
    assert run(store_sign_in_code(p, code, sign_up_enabled=False), store) is EmailRefusal.SIGN_UP_DISABLED
    assert run(store_sign_in_code(p, code, sign_up_enabled=True), store) is None
    team = make_team("t-personal")
    newcomer = dataclasses.replace(
        make_user("newcomer", "new@example.com", primary_email_verified=True), selected_team_id=team.id
    )

    def sign_in(session_id: str) -> Any:
        session = make_session(session_id, "")
        personal = (team, make_membership(team.id, newcomer.id))
        return run(sign_in_by_email(p, "new@example.com", T0, True, newcomer, session, personal), store)

    signed_up = sign_in("s-up")
    assert (signed_up.outcome, signed_up.user) == (EmailSignInOutcome.SIGNED_UP, newcomer)
    assert store.apply(LoadUserWithTeam(p, newcomer.id)) == (newcomer, team)
    signed_in = sign_in("s-in")
    assert signed_in.outcome is EmailSignInOutcome.SIGNED_IN
    assert {s.id for s in store.apply(ListSessions(p, newcomer.id))} == {"s-up", "s-in"}


def _anonymous_users(store: RedisStore, p: str) -> None:
    team = Team(id="t-anon", display_name="Personal Team", created_at_millis=T0)
    anonymous = dataclasses.replace(make_user("anon"), is_anonymous=True, selected_team_id=team.id)
    session = make_session("s-anon", anonymous.id)
    signed_up = run(sign_up_anonymously(p, anonymous, session, (team, make_membership(team.id, anonymous.id))), store)
    assert signed_up == anonymous
    changes = (("primary_email", "anon@example.com"), ("primary_email_auth_enabled", True), ("is_anonymous", False))
    upgraded = upgrade_anonymous(store, p, anonymous.id, changes, "anon@example.com's Team")
    assert isinstance(upgraded, User)
    assert store.apply(find_user_by_email(p, "anon@example.com")) == upgraded
    assert store.apply(LoadUserWithTeam(p, anonymous.id)) == (
        upgraded,
        dataclasses.replace(team, display_name="anon@example.com's Team"),
    )


def _outbox(store: RedisStore, p: str) -> None:
    mails = [make_email(n, "ada@example.com" if n % 2 else "bob@example.com") for n in range(1, 5)]
    for mail in mails:
        run(append_outbox(p, mail, keep=3), store)
    assert store.apply(ListOutbox(p)) == (mails[3], mails[2], mails[1])
    assert store.apply(ListOutbox(p, to="ada@example.com")) == (mails[2],)


# --- permissions ---
def _permissions(store: RedisStore, p: str) -> None:
    store.apply(add_user(p, make_user("g1")))
    assert grant_project_permissions(store, p, "g1", ("read", "write")) is True
    assert store.apply(ListProjectPermissions(p)) == (("g1", ("read", "write")),)
    assert revoke_project_permission(store, p, "g1", "write") is True
    project = store.apply(LoadProject(p))
    assert project is not None
    definitions = (*project.config.permission_definitions, PermissionDefinition("reader", "project"))
    expected = (("permission_definitions", project.config.permission_definitions),)
    changed = run(
        change_definitions(p, expected, (("permission_definitions", definitions),), ("read", "reader")), store
    )
    assert isinstance(changed, Project)
    assert store.apply(ListProjectPermissions(p, "g1")) == (("g1", ("reader",)),)
    assert delete_user(store, p, "g1") is True
    assert store.apply(ListProjectPermissions(p)) == ()


# --- end permissions ---


def _commit(store: RedisStore, p: str) -> None:
    """The generic write (`effects.commit`): a sign-up's every record in one script, a conflict, a patch."""
    from identity_proto.changes import UserChanges
    from identity_proto.effects.commit import (
        Announce,
        Commit,
        Committed,
        Conflict,
        FieldsAre,
        GrantPermissions,
        IndexIs,
        IndexName,
        IsAbsent,
        PatchUser,
        PutMembership,
        PutTeam,
        PutUser,
        RecordKind,
        SetIndex,
    )

    user, team = make_user("c1", "commit@example.com"), make_team("ct1")
    sign_up = Commit(
        p,
        (IsAbsent(RecordKind.USER, "c1"), IndexIs(IndexName.EMAIL, "commit@example.com", None)),
        (
            PutUser(user),
            SetIndex(IndexName.EMAIL, "commit@example.com", "c1"),
            PutTeam(team),
            PutMembership(Membership("ct1", "c1", T0)),
            GrantPermissions("c1", ("member",)),
        ),
        (Announce("user.created", (RecordKind.USER, "c1"), unselected=True),),
    )
    assert store.apply(sign_up) == Committed()
    assert store.apply(sign_up) == Conflict(0)
    assert store.apply(LoadMembership(p, "ct1", "c1")) == Membership("ct1", "c1", T0)
    patch = Commit(p, (FieldsAre(user, ("display_name",)),), (PatchUser("c1", UserChanges.of(display_name="C")),))
    assert store.apply(patch) == Committed()
    assert store.apply(patch) == Conflict(0)
    assert delete_user(store, p, "c1") is True


def _api_keys(store: RedisStore, p: str) -> None:
    store.apply(add_user(p, make_user("key-owner")))
    create_team(store, p, make_team("key-team"))
    user_key = ApiKey("k-user", ApiKeyType.USER, "key-owner", "d", False, T0, "hash-user", "abcd")
    team_key = ApiKey("k-team", ApiKeyType.TEAM, "key-team", "d", True, T0, "hash-team", "efgh")
    assert run_flow(store, lambda: store_api_key(p, user_key)) == user_key
    assert run_flow(store, lambda: store_api_key(p, team_key)) == team_key
    assert run_flow(store, lambda: store_api_key(p, dataclasses.replace(user_key, id="k-x", owner_id="nobody"))) is (
        ApiKeyWrite.OWNER_NOT_FOUND
    )
    assert store.apply(FindApiKeyByHash(p, "hash-user")) == user_key
    assert store.apply(ListApiKeys(p, ApiKeyType.USER, "key-owner")) == (user_key,)
    revoked = run_flow(store, lambda: change_api_key(p, "k-user", description="e", revoke_at_millis=T0 + 1))
    assert revoked == dataclasses.replace(user_key, description="e", manually_revoked_at_millis=T0 + 1)
    assert delete_user(store, p, "key-owner") is True
    assert delete_team(store, p, "key-team") is True
    assert store.apply(FindApiKeyByHash(p, "hash-user")) is None
    assert store.apply(LoadApiKey(p, "k-team")) is None


# passwords: the password flows' scripts
def _passwords(store: RedisStore, p: str) -> None:
    old, new = "$2b$04$" + "o" * 53, "$2b$04$" + "n" * 53
    store.apply(add_user(p, make_user("pw", "pw@example.com")))
    put_session(store, p, make_session("s-pw-1", "pw"))
    put_session(store, p, make_session("s-pw-2", "pw"))
    assert set_password(store, p, "pw", old) is PasswordWrite.DONE
    assert change_password(store, p, "pw", old, new, "token-s-pw-1") is PasswordWrite.DONE
    assert [s.id for s in store.apply(ListSessions(p, "pw"))] == ["s-pw-1"]
    fingerprint = password_fingerprint(new)
    code = make_code(
        "c-reset", purpose=CodePurpose.PASSWORD_RESET, email="pw@example.com", password_fingerprint=fingerprint
    )
    assert store_reset_code(store, p, code, make_email(9, "pw@example.com")) == "pw"
    theirs = dataclasses.replace(code, user_id="pw", primary_channel_id=reset_primary(store.apply(LoadUser(p, "pw"))))
    assert reset_password(store, p, theirs, old) is PasswordWrite.DONE
    assert store.apply(ListSessions(p, "pw")) == ()
    verified = make_user("pw", "pw@example.com", password_hash=old, primary_email_verified=True)
    assert store.apply(LoadUser(p, "pw")) == verified


def _contact_channels(store: RedisStore, p: str) -> None:
    store.apply(add_user(p, make_user("chan", "chan@example.com")))
    work = ContactChannel("c-work", "chan", "work@example.com", False, True, T0 + 1)
    created = run_flow(store, lambda: create_channel(p, work, make_primary=True, next_primary_id="next"))
    assert isinstance(created, UserChannels)
    assert created.user.primary_email == "work@example.com"
    assert store.apply(find_user_by_email(p, "chan@example.com")) == created.user
    updated = run_flow(store, lambda: update_channel(p, "chan", "c-work", "next", is_primary=False))
    assert isinstance(updated, UserChannels)
    assert updated.user.primary_email is None
    purpose = CodePurpose.CONTACT_CHANNEL_VERIFICATION
    store.apply(put_code(p, make_code("c-verify", purpose=purpose, user_id="chan", email="work@example.com")))
    attempt = AttemptVerificationCode(p, "code-c-verify", "nonce-c-verify", purpose, T0, consume=False)
    verified = run_flow(store, lambda: verify_with_code(p, attempt))
    assert verified.channel_found is True
    assert verified.attempt.outcome.value == "ok"
    found = store.apply(ListContactChannels(p, "chan"))
    assert found is not None
    assert [c.is_verified for c in found.stored if c.id == "c-work"] == [True]
    assert [c.id for c in store.apply(ListProjectContactChannels(p)) if c.user_id == "chan"] == [
        found.channels[0].id,
        "c-work",
    ]
    assert isinstance(run_flow(store, lambda: delete_channel(p, "chan", "c-work", "next")), UserChannels)
    assert store.apply(find_user_by_email(p, "work@example.com")) is None


# --- OAuth storage ---
def _oauth(store: RedisStore, p: str) -> None:
    github = OAuthAccount("row-gh", "github", "gh-1", "o@example.com", created_at_millis=T0)
    google = OAuthAccount("row-g", "google", "g-1", None, created_at_millis=T0)
    state = OAuthState(
        p, None, "github", "authenticate", "http://x/cb", "outer", "ch", "S256", "verifier", "nonce", None, None,
        None, None, "redirect", T0, T0 + 600_000,
    )  # fmt: skip
    # its own hash tag: another slot than the project's
    assert run(put_record(ShortLived.OAUTH_STATE, "state-hash", state, T0), store) is True
    assert run(take_record(OAuthState, ShortLived.OAUTH_STATE, "state-hash"), store) == state
    assert run(take_record(OAuthState, ShortLived.OAUTH_STATE, "state-hash"), store) is None
    code = OuterCode(p, "o", "http://x/cb", "ch", "plain", "link", None, T0 + 300_000, "github", "gh-1")
    assert run(put_record(ShortLived.OUTER_CODE, "code-hash", code, T0, project_id=p), store) is True
    assert run(take_record(OuterCode, ShortLived.OUTER_CODE, "code-hash", project_id=p), store) == code
    team = make_team("o-team")
    user = dataclasses.replace(make_user("o", "o@example.com"), oauth_accounts=(github,), selected_team_id=team.id)
    assert run(store_oauth_user(p, NewUser(user, (team, Membership(team.id, "o", T0)))), store) == user
    assert store.apply(find_user_by_oauth_account(p, "github", "gh-1")) == user
    assert run(save_provider_tokens(p, user, "row-gh", "sealed"), store) is True
    assert store.apply(LoadProviderTokens(p, "row-gh")) == "sealed"
    changed = run(commit_accounts(p, user, (github, google)), store)
    assert changed == dataclasses.replace(user, oauth_accounts=(github, google))
    anonymous = dataclasses.replace(make_user("o-anon"), is_anonymous=True)
    run(sign_up_anonymously(p, anonymous, make_session("s-oa", "o-anon")), store)
    changes = (("primary_email", "oa@example.com"), ("primary_email_auth_enabled", True), ("is_anonymous", False))
    claim = OAuthAccount("row-gl", "gitlab", "gl-1", created_at_millis=T0)
    upgraded = upgrade_anonymous(store, p, "o-anon", changes, "Team", oauth_account=claim)
    assert isinstance(upgraded, User)
    assert upgraded.oauth_accounts == (claim,)
    assert store.apply(find_user_by_oauth_account(p, "gitlab", "gl-1")) == upgraded
    assert delete_user(store, p, "o") is True
    assert store.apply(find_user_by_oauth_account(p, "github", "gh-1")) is None
    assert store.apply(LoadProviderTokens(p, "row-gh")) is None


# --- end OAuth storage ---


# --- passkeys (on the user record, with the project's passkey index) ---
def _passkeys(store: RedisStore, p: str) -> None:
    from identity_proto.effects import find_user_by_passkey
    from identity_proto.effects.commit import FieldsAre, commit
    from identity_proto.effects.passkeys import SetPasskeys
    from identity_proto.flows.passkeys import _store_passkey
    from identity_proto.records import Passkey

    user = make_user("pk", "pk@example.com")
    assert run(commit_new_user(p, NewUser(user)), store) == user
    key = Passkey("cred-pk", "cose", 0, ("internal",), "00000000-0000-0000-0000-000000000000", T0, "localhost")
    run(_store_passkey(p, "pk", key), store)
    found = store.apply(find_user_by_passkey(p, "cred-pk"))
    assert found is not None
    assert found.passkeys == (key,)
    counted = (dataclasses.replace(key, sign_count=1),)
    run(commit(p, (FieldsAre(found, ("passkeys",)),), (SetPasskeys("pk", counted),)), store)
    assert store.apply(LoadUser(p, "pk")).passkeys == counted
    assert delete_user(store, p, "pk") is True
    assert store.apply(find_user_by_passkey(p, "cred-pk")) is None


# --- end passkeys ---


# --- mock OAuth provider (dev/test mode; its keys under the hash tag {mock-oauth}) ---
def _mock_oauth(store: RedisStore) -> None:
    keys = MockSigningKeys(es256='{"kty": "EC"}', rs256='{"kty": "RSA"}')
    assert run(put_record(ShortLived.MOCK_KEYS, "", keys, T0, only_if_absent=True), store) is True
    assert run(put_record(ShortLived.MOCK_KEYS, "", MockSigningKeys("o", "o"), T0, only_if_absent=True), store) is False
    assert run(signing_keys(), store) == keys
    token = MockToken("access", "github", "openid", "m@example.com", None, "ES256", T0 + 3_600_000)
    assert run(put_record(ShortLived.MOCK_TOKEN, "token-hash", token, T0), store) is True
    assert run(take_record(MockToken, ShortLived.MOCK_TOKEN, "token-hash", keep=True), store) == token
    failure = MockFailure("invalid_grant", T0 + 600_000)
    assert run(put_record(ShortLived.MOCK_FAILURE, "github", failure, T0), store) is True
    assert run(take_failure("github", T0), store) == "invalid_grant"
    assert run(take_failure("github", T0), store) is None


# --- end mock OAuth provider ---


# --- webhooks (the set of projects with endpoints under the hash tag {webhooks}) ---
def _webhooks(store: RedisStore, p: str) -> None:
    from identity_proto import effects as wh
    from identity_proto.flows.webhook_delivery import claim_deliveries, fan_out_events
    from identity_proto.flows.webhooks import (
        add_webhook_endpoint,
        drop_webhook_endpoint,
        replace_webhook_endpoint,
        replay_delivery,
    )

    endpoint = wh.WebhookEndpoint("ep-1", "https://hooks.example.com/h", "whsec_c2VjcmV0", created_at_millis=T0)
    run(add_webhook_endpoint(p, endpoint), store)
    assert store.apply(wh.ListWebhookProjects()) == (p,)
    assert run(replace_webhook_endpoint(p, endpoint), store) == endpoint
    event = store.apply(wh.AddTestEvent(p, "ep-1", '{"n":1}', T0))
    assert store.apply(wh.ListEvents(p)) == (event,)
    assert run(fan_out_events(p, T0), store) == 1
    (claimed,) = run(claim_deliveries(p, T0, 1_000, 1, ("token",)), store)
    failed = wh.DeliveryAttempt(T0, 500, 3, "HTTP 500")
    assert store.apply(wh.RecordAttempt.after(p, claimed, failed)) is True
    assert run(replay_delivery(p, "ep-1", event.id, T0 + 1), store) is not None
    assert [d.attempts for d in store.apply(wh.ListDeliveries(p, "ep-1"))] == [(failed,)]
    store.apply(wh.TrimWebhookData(p, 0, 10))
    assert claimed.event == event
    run(add_webhook_endpoint(p, wh.WebhookEndpoint("ep-2", "https://h.example.com", "whsec_eA==")), store)
    assert run(drop_webhook_endpoint(p, "ep-2"), store) is True
    assert run(drop_webhook_endpoint(p, "ep-1"), store) is True
    assert store.apply(wh.ListWebhookProjects()) == ()


# --- end webhooks ---


def test_the_store_contract_on_a_cluster_with_every_script_on_one_slot(checked: SlotCheckedStore) -> None:
    p = "contract"
    assert run(create_project(project_record(p)), checked) is True
    assert run(create_project(project_record(p, "again")), checked) is False
    _users_and_their_email_index(checked, p)
    _codes(checked, p)
    _sessions(checked, p)
    _teams_and_memberships(checked, p)
    _signing_in_by_email(checked, p)
    _anonymous_users(checked, p)
    _team_invitations(checked, p)  # team invitations
    _outbox(checked, p)
    _permissions(checked, p)
    _commit(checked, p)  # the generic write
    _api_keys(checked, p)
    _passwords(checked, p)
    _contact_channels(checked, p)
    _oauth(checked, p)  # OAuth storage
    _passkeys(checked, p)  # passkeys
    _mock_oauth(checked)  # the mock OAuth provider
    # webhooks: in a project of their own (the writes above recorded events of theirs in `p`)
    assert run(create_project(project_record("webhooks")), checked) is True
    _webhooks(checked, "webhooks")
    # Project record scripts, then ResetProjectData and DeleteProject.
    updated = run(update_project(p, "Renamed", (("sign_up_enabled", False),)), checked)
    assert updated is not None
    assert (updated.display_name, updated.config.sign_up_enabled) == ("Renamed", False)
    ensured = run(ensure_project(project_record(p, "ignored")), checked)
    assert (ensured.display_name, ensured.keys) == ("Renamed", ProjectKeys(secret_server_key_hash="hash-of-ssk"))
    assert checked.apply(ResetProjectData(p)) is True
    assert keys_of_project(checked, p) == [checked.keys.project(p)]
    assert checked.apply(ListUsers(p)) == ()
    assert checked.apply(LoadProject(p)) == updated
    assert checked.apply(DeleteProject(p)) is True
    assert keys_of_project(checked, p) == []
    assert checked.apply(DeleteProject(p)) is False
    missing = sorted(set(SCRIPTS) - checked.ran)
    assert not missing, f"scripts never run on the cluster (add them to this scenario): {missing}"


# --------------------------------------------------------------------------------------------------------------
# Across slots


def test_projects_spread_over_the_nodes_are_listed_reset_and_deleted_one_by_one(store: RedisStore) -> None:
    ids = [f"spread-{n:02d}" for n in range(12)]
    for n, project_id in enumerate(ids):
        assert run(create_project(dataclasses.replace(project_record(project_id), created_at_millis=T0 + n)), store)
        store.apply(add_user(project_id, make_user("u", f"u@{project_id}.example")))
        run(append_outbox(project_id, make_email(n, "u@example.com")), store)
    nodes = {node_of(store, store.keys.project(project_id)) for project_id in ids}
    assert len(nodes) >= 2, "the projects should live on several nodes"
    assert [project.id for project in store.apply(ListProjects())] == ids  # the {projects} index, then a pipeline

    doomed, reset = ids[3], ids[7]
    assert store.apply(ResetProjectData(reset)) is True
    assert keys_of_project(store, reset) == [store.keys.project(reset)]
    assert store.apply(DeleteProject(doomed)) is True
    assert keys_of_project(store, doomed) == []
    assert [project.id for project in store.apply(ListProjects())] == [i for i in ids if i != doomed]
    for project_id in ids:
        if project_id not in {doomed, reset}:
            assert [u.id for u in store.apply(ListUsers(project_id))] == ["u"]
            assert len(keys_of_project(store, project_id)) >= 4


def test_the_clock_override_and_rate_limits_together_with_a_read(store: RedisStore) -> None:
    assert store.apply(LoadClockOverride()) is None
    store.apply(SetClockOverride(ClockOverride(frozen_ms=T0)))
    assert store.apply(LoadClockOverride()) == ClockOverride(frozen_ms=T0)
    store.apply(SetClockOverride(None))
    assert store.apply(LoadClockOverride()) is None

    store.apply(add_user("rl", make_user("ada", "ada@example.com")))
    hits = tuple(RateLimitHit(f"rule-{n}:window", T0) for n in range(6))  # each counter its own slot
    first = store.apply(Together((HitRateLimits(hits, T0 - 1), find_user_by_email("rl", "ada@example.com"))))
    assert first[0] == (1,) * 6
    assert first[1] == make_user("ada", "ada@example.com")
    second = store.apply(Together((HitRateLimits(hits[:2], T0 - 1), ListUsers("rl", limit=1))))
    assert second == ((2, 2), (make_user("ada", "ada@example.com"),))


def test_the_asyncio_store_on_a_cluster(cluster: list[RedisProcess]) -> None:
    async def scenario() -> None:
        store = AsyncRedisStore.from_url(url(cluster), cluster=True, namespace=f"cluster-{uuid.uuid4().hex[:8]}:")
        try:
            ids = [f"async-{n}" for n in range(6)]
            for project_id in ids:
                assert await arun(create_project(project_record(project_id)), store) is True
                await store.apply(add_user(project_id, make_user("u", "u@example.com")))
            assert sorted(p.id for p in await store.apply(ListProjects())) == ids
            hits = (RateLimitHit("a:1", T0), RateLimitHit("b:1", T0))
            together = await store.apply(Together((HitRateLimits(hits, T0 - 1), LoadUser(ids[0], "u"))))
            assert together == ((1, 1), make_user("u", "u@example.com"))
            assert await store.apply(ResetProjectData(ids[1])) is True
            assert await store.apply(ListUsers(ids[1])) == ()
            assert await store.apply(DeleteProject(ids[2])) is True
            assert await store.apply(LoadProject(ids[2])) is None
            assert await store.apply(LoadUser(ids[2], "u")) is None
            assert sorted(p.id for p in await store.apply(ListProjects())) == [i for i in ids if i != ids[2]]
            await store.apply(SetClockOverride(ClockOverride(offset_ms=7)))
            assert await store.apply(LoadClockOverride()) == ClockOverride(offset_ms=7)
            await store.apply(SetClockOverride(None))
        finally:
            await store.aclose()

    asyncio.run(scenario())


# --------------------------------------------------------------------------------------------------------------
# Over HTTP


@pytest.mark.e2e
def test_sign_in_over_http_with_the_service_on_the_cluster(cluster: list[RedisProcess]) -> None:
    env = {
        "IDENTITY_BACKEND": "redis",
        "IDENTITY_REDIS_URL": url(cluster),
        "IDENTITY_REDIS_CLUSTER": "1",
        "IDENTITY_RATE_LIMITS": "on",  # rate-limited reads: counters and the read in one trip (cluster-safe)
    }
    service = start_hypercorn(env)
    try:
        with httpx.Client(base_url=service.base_url, timeout=10) as http:
            email = f"cluster-{uuid.uuid4().hex[:8]}@example.com"
            sent = http.post(
                "/api/v1/auth/otp/send-sign-in-code",
                headers=client_headers(),
                json={"email": email, "callback_url": "http://localhost:3000/handler/magic-link-callback"},
            )
            assert sent.status_code == 200, sent.text
            outbox = http.get("/api/v1/emails/outbox", headers=server_headers(), params={"to": email}).json()
            otp = re.search(r"Your code is ([0-9A-Z]{6})$", outbox["items"][0]["subject"])
            assert otp is not None
            code = otp.group(1) + sent.json()["nonce"]

            statuses: list[int] = []
            barrier = threading.Barrier(8)

            def sign_in() -> None:
                with httpx.Client(base_url=service.base_url, timeout=10) as own:
                    barrier.wait(timeout=10)
                    response = own.post("/api/v1/auth/otp/sign-in", headers=client_headers(), json={"code": code})
                    statuses.append(response.status_code)
                    if response.status_code == 200:
                        tokens.update(response.json())

            tokens: dict[str, Any] = {}
            threads = [threading.Thread(target=sign_in) for _ in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=30)
            assert sorted(statuses) == [200] + [409] * 7
            user_id = tokens["user_id"]
            signed_in = client_headers(**{"x-service-access-token": tokens["access_token"]})
            me = http.get("/api/v1/users/me", headers=signed_in)
            assert (me.status_code, me.json()["primary_email"], me.json()["id"]) == (200, email, user_id)
            refreshed = http.post(
                "/api/v1/auth/sessions/current/refresh",
                headers=client_headers(**{"x-service-refresh-token": tokens["refresh_token"]}),
            )
            assert refreshed.status_code == 200, refreshed.text
            sessions = http.get("/api/v1/auth/sessions", headers=server_headers(), params={"user_id": user_id})
            assert len(sessions.json()["items"]) == 1
            team = http.post(
                "/api/v1/teams",
                headers=server_headers(),
                json={"display_name": "On a cluster", "creator_user_id": user_id},
            )
            assert team.status_code == 201, team.text
            teams = http.get("/api/v1/teams", headers=server_headers(), params={"user_id": user_id}).json()
            assert [t["display_name"] for t in teams["items"]] == ["On a cluster"]
    finally:
        stop_server(service)


# --------------------------------------------------------------------------------------------------------------
# Faults


def test_no_node_answering_is_storage_unavailable_not_an_internal_error() -> None:
    """redis-py says "Redis Cluster cannot be connected" with a RedisClusterException, not a ConnectionError."""
    nowhere = f"redis://127.0.0.1:{free_port()}/0"
    with pytest.raises(StorageUnavailable) as made:  # the sync client reads the cluster's map as it is made
        RedisStore.from_url(nowhere, cluster=True)
    assert "127.0.0.1" not in str(made.value)

    async def first_use() -> str:
        store = AsyncRedisStore.from_url(nowhere, cluster=True)
        try:
            with pytest.raises(StorageUnavailable) as used:
                await store.apply(LoadProject("any"))
            return str(used.value)
        finally:
            await store.aclose()

    assert asyncio.run(first_use()) == "Redis unavailable during LoadProject (RedisClusterException)"


# A node down (last: the restarted node comes back empty)


def _call(store: RedisStore, effect: StorageEffect[Any]) -> tuple[str, Any, float]:
    started = time.monotonic()
    try:
        return "ok", store.apply(effect), time.monotonic() - started
    except StorageUnavailable as exc:
        return "unavailable", str(exc), time.monotonic() - started


def test_a_node_down_fails_its_projects_fast_and_the_store_serves_them_again(
    cluster: list[RedisProcess], store: RedisStore
) -> None:
    by_node: dict[str, str] = {}
    for n in range(64):  # one project on each node
        project_id = f"fault-{n}"
        by_node.setdefault(node_of(store, store.keys.project(project_id)), project_id)
    assert len(by_node) == 3
    for project_id in by_node.values():
        assert run(create_project(project_record(project_id)), store) is True
    victim = next(node for node in cluster if f"127.0.0.1:{node.port}" in by_node)
    down, up = by_node[f"127.0.0.1:{victim.port}"], [p for n, p in by_node.items() if n != f"127.0.0.1:{victim.port}"]

    victim.kill()
    try:
        for effect in (LoadProject(down), add_user(down, make_user("u")), ListUsers(down)):
            outcome, detail, elapsed = _call(store, effect)
            assert outcome == "unavailable", (effect, detail)
            assert f"during {type(effect).__name__}" in detail
            assert str(victim.port) not in detail
            assert elapsed < 5.0
        for project_id in up:  # the other nodes' projects go on (the cluster has not declared itself down)
            assert store.apply(add_user(project_id, make_user("u"))) == Committed((make_user("u"),))
    finally:
        victim.restart()  # same port and nodes-<port>.conf: it rejoins with its slots, empty
    wait_until_ok(cluster)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while _call(store, LoadProject(down))[0] != "ok":  # the same store, never rebuilt
        assert time.monotonic() < deadline, "the store did not reach the restarted node"
        time.sleep(0.05)
    assert store.apply(LoadProject(down)) is None  # no persistence on these nodes
    assert run(create_project(project_record(down)), store) is True
    assert store.apply(add_user(down, make_user("u"))) == Committed((make_user("u"),))
    assert [u.id for u in store.apply(ListUsers(down))] == ["u"]
