"""The Redis store: every storage effect as one *command plan*, run by a sync or an asyncio runner.

Each effect's Redis logic is written once, as a small generator (a command plan) that yields redis operations
(`Call`, `Batch`, `Script`) and is sent their replies; it returns the effect's result. Two tiny runners perform
those operations with redis-py: `RedisStore` over `redis.Redis` and `AsyncRedisStore` over `redis.asyncio.Redis`.
This is what `identity_proto.drivers` does for the core's flows, one level down; no business logic is written
twice, and the Redis protocol is never hand-rolled (commands go through `execute_command`, pipelines and
`register_script` Script objects).

Layout of this package (see backends/README.md for finding an effect's plan and script):

- `keys`: the key layout (`KeySpace`, its table, TTLs and grace periods);
- `codecs`: records to and from Redis hashes;
- `plan`: what a plan yields (`Call`, `Batch`, `Script`, `Scan`) and the registries of plans and Lua scripts;
- `lua`: Lua functions several scripts share;
- one module per resource, each holding its plans with their Lua scripts right above them: `projects`, `codes`
  (one-time codes, TOTP acceptance), `email_sign_in`, `users`, `sessions`, `outbox`, `teams` (and memberships),
  `rate_limits`, `testing` (clock override, project reset);
  `team_invitations`, `rate_limits`, `testing` (clock override, project reset);
- `runner`: what both runners share (error translation, script loading, `Together`, cluster scans); `store_async`
  (`AsyncRedisStore`, asyncio) and `store` (`RedisStore`, sync, generated from `store_async` by
  `scripts/generate_sync`).

Atomicity (identity_proto.effects: every effect is atomic). Each write to a project's data (DeleteProject aside, see
below) is one Lua script on keys of that project's slot: CreateProject (write if absent), EnsureProject (write if
absent, else replace only the ``keys`` field; returns the stored record), UpdateProject (only if present, HSET just
the given fields, so two concurrent updates of different config keys both survive; returns the record);
CreateVerificationCode (code, its counter and their TTLs), AttemptVerificationCode (INCR the counter, look up, judge
in the contract's order, mark used on OK when consuming: of concurrent attempts exactly one gets OK),
ConsumeVerificationCode (used only if it was unused), AcceptTotp (the attempt code marked used and the step
stored in the user's ``totp_last_step``, only if the code was unused and the step is later than the stored one:
a TOTP signs in once), CreateSignInCode (the e-mail index and the holder's
``primary_email_verified`` read, then the code stored as by CreateVerificationCode, or nothing); CreateUser (refused
if the index holds its auth e-mail; record, index entry and order entry together), UpdateUser (HSET only the changed
fields, so concurrent updates of different fields both survive; the script reads the stored ``primary_email`` and
``primary_email_auth_enabled``, applies the changes, and moves the index entry, or refuses EMAIL_TAKEN before
writing anything; re-scores the order entry when ``signed_up_at_millis`` changes: internal writes; a PATCH of a
user is a Commit decided in the core), DeleteUser (record, its e-mail index entry if it points at the user, every
session with its token entry and the user's set, every membership with its place in the three membership indexes,
the order entry); UseRefreshToken (token -> session -> user, then the session's ``last_used_at_millis`` and, if
later, the user's ``last_active_at_millis``); sessions are stored and ended by `Commit` (`sessions.py` translates
PutSession, DropSession, EndSession and SessionExists); AppendOutbox (LPUSH + LTRIM); teams and memberships are
written by `Commit` (the core decides; `teams.py` translates their guards and writes: a membership's record is
found by its seq, the ZSCORE of its user in the team's member index); GrantProjectPermissions (refused before
writing anything if the user is missing; the user's set and the set of holders), RevokeProjectPermission,
ChangePermissionDefinitions (compare each expected config field's stored JSON, a missing field comparing as its
default, then HSET the new ones, then rename or strip the id in every project grant and every membership: O(holders
+ memberships), a rare admin write), and DeleteUser takes the user's project grants too. Reads of one key are one
command (LoadUser, LoadSession,
concurrent grants of different permissions all survive); CreateTeamInvitation (refused if the team is missing; the
code as by CreateVerificationCode, its id entry and its two index entries, with their TTLs), RevokeTeamInvitation
(only if the invitation is the team's: the code, its id entry and index entries), AcceptTeamInvitation (judges the
code, checks the user and the team, marks it used and adds the membership as AddMembership does, or writes nothing:
of concurrent accepts exactly one succeeds). Reads of one key are one command (LoadUser, LoadSession,
concurrent grants of different permissions all survive); the password flows' writes: StorePasswordResetCode (the
e-mail index read, then, only for an address that signs a user in, may reset (verified, or the account's only way
in) and whose user's password hash is the one read before, the code stored as by CreateVerificationCode with that
user's id and the mail pushed as by AppendOutbox), ResetPassword (the code judged, its address and password checked
again, the code marked used, then the user's ``password_hash`` set, the address verified and their sessions
removed), ChangePassword (the hash replaced only if it is still the
one the old password was checked against; every session of the user removed but the one whose refresh token is
named), SetPassword (only if the user has none). Reads of one key are one command (LoadUser, LoadSession,
LoadTeam, ...); reads that follow a pointer (FindUserByAuthEmail, ListUsers, ListSessions, ListOutbox with ``to``,
ListTeams, LoadMembership, ListMemberships) are one script too, so none observes half of a write. Scripts that walk
a whole team or user (DeleteTeam, DeleteUser, ListTeams, ListMemberships) are O(its memberships), and ListUsers with
no limit is O(users): they block the server for that long, like any script.

Anonymous users are signed up and upgraded by `Commit` (the core decides: `identity_proto.flows.anonymous`).
API keys: created and changed by a commit (the record, its hash index entry and its owner index entry together,
guarded on the owner's user or team existing; a change guarded on the key's changeable fields as read),
FindApiKeyByHash and ListApiKeys (pointer-following reads); DeleteUser and DeleteTeam remove the owner's keys in
their own script. Contact channels: written by a commit (the user's channel hash guarded as read, entry by entry
and by its length); ListContactChannels reads the user, their channels and the index entries of their addresses in
one script.

OAuth (one script each): SaveOAuthState and SaveOuterCode (the record's JSON with its TTL), TakeOAuthState and
ConsumeOuterCode (read and delete: of concurrent takes exactly one gets it), ChangeOAuthAccounts (compares the
stored ``oauth_accounts`` text with the expected list encoded as the codec writes it, refuses ACCOUNT_TAKEN before
writing anything, then moves the OAuth index entries, drops the tokens of rows gone and sets the field),
SignUpWithOAuth (the user as by CreateUser, its OAuth index entries, its personal team as by CreateTeam),
SaveProviderTokens (only for a row the user has); an anonymous upgrade links its account by `Commit` (SetOAuthAccounts)
and DeleteUser takes the user's index entries and tokens in its own.

Scripts that follow a pointer (token -> session -> user, index -> user, set -> sessions, user order -> users, team
index -> teams, membership index -> seq -> membership, member index -> users' selections) build the pointed-to
key names in Lua from a key prefix passed in ARGV, as they cannot be known beforehand. Those keys carry the project's
hash tag, so they are in the slot of the script's declared KEYS; Redis Cluster runs such scripts, although the
Redis documentation asks for every key to be declared.

Redis Cluster: ``from_url(url, cluster=True)`` (either store) reaches a cluster through any one of its nodes, with
`redis.cluster.RedisCluster` / `redis.asyncio.cluster.RedisCluster`; both constructors also take such a client. The
plans are the same. Every script declares keys of one slot only, and the keys it builds from ARGV prefixes carry the
same hash tag (tests/redis_ops/test_cluster.py checks both for every script, on a real cluster). What spans slots is
never in a script: the project index ``{projects}`` and the clock override ``{clock}`` are single-key commands that
redis-py routes to their node; ListProjects' and HitRateLimits' pipelines are split per node by redis-py;
DeleteProject and ResetProjectData SCAN every primary in turn (the `Scan` cursor names the node and its own cursor),
and each page's UNLINK holds keys of the project's slot only. A cluster's pipelines refuse scripts, so there
`Together` sends its plans' first operations each on its own (concurrently, with the asyncio store) rather than in
one pipeline. The client `from_url` makes refreshes its map of the cluster and retries once on a connection error,
CLUSTERDOWN or a slot no node serves, never on a timeout; CLUSTERDOWN, MASTERDOWN, TRYAGAIN and a slot no node
serves are `StorageUnavailable`, like a lost connection, and so is a cluster no node of which answers (redis-py's
`RedisClusterException` saying so; any other is a misuse, and propagates). The sync client reads the cluster's map
as it is made, so ``RedisStore.from_url(..., cluster=True)`` itself raises `StorageUnavailable` then; the asyncio
client connects on first use. A project's keys live on one primary: while it is down that project's requests get 503
and others go on, until the cluster declares itself down (after ``cluster-node-timeout``, with the default
``cluster-require-full-coverage yes``) or a replica takes over.
"""

from __future__ import annotations

# The resource modules register their plans and scripts as they are imported.
from backends.redis import (  # noqa: F401
    api_keys,
    codes,
    commit,  # the one generic write: guards, writes, events, one script
    contact_channels,
    email_sign_in,
    mock_oauth,  # mock OAuth provider (dev/test mode only)
    oauth,  # OAuth: states, outer codes, linked accounts and their index, provider tokens
    outbox,
    passwords,  # passwords: reset codes, resetting, changing and setting a password
    permissions,
    projects,
    rate_limits,
    sessions,
    team_invitations,
    teams,
    testing,
    users,
    webhooks,  # webhooks: endpoints, deliveries, fan-out, retention
)
from backends.redis.keys import DEFAULT_NAMESPACE, GRACE_MS, ORPHAN_NONCE_TTL_MS, KeySpace
from backends.redis.plan import SCRIPTS, Batch, Call, Op, Plan, Scan, Script
from backends.redis.store import RedisStore
from backends.redis.store_async import AsyncRedisStore

__all__ = [
    "DEFAULT_NAMESPACE",
    "GRACE_MS",
    "ORPHAN_NONCE_TTL_MS",
    "SCRIPTS",
    "AsyncRedisStore",
    "Batch",
    "Call",
    "KeySpace",
    "Op",
    "Plan",
    "RedisStore",
    "Scan",
    "Script",
]
