"""OAuth storage: states (taken once), outer codes (consumed once), linked accounts (the user's ``oauth_accounts``
field, one JSON array) with the project's OAuth index, and provider tokens.

Each Lua script sits right above the plan that runs it (`Script("<name>", ...)`); `script` registers it in
`SCRIPTS` under that name. Shared Lua functions are in `backends.redis.lua`; key names in `backends.redis.keys`.

No script re-encodes JSON: the compare-and-set of ChangeOAuthAccounts compares the stored field's text with the
text of the expected list encoded here exactly as the user codec writes it (`accounts_json`), and the new list is
encoded here too; the anonymous upgrade appends the account's JSON object to the stored array's text.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any, TypeVar

import orjson

from backends.redis.codecs import _field_names, _flat, _json, _json_fields, _required, _text, _user
from backends.redis.commit import Ops, writes
from backends.redis.keys import OAUTH_GRACE_MS, KeySpace
from backends.redis.lua import _CREATE_TEAM, _EMIT_EVENT, _EMIT_TEAM_EVENT, _EMIT_USER_EVENT, _RECORD_JSON, _SEQ
from backends.redis.plan import Arg, Call, Plan, Script, _plans, script
from backends.redis.read import by_index, first
from backends.redis.teams import personal_team_parts
from identity_proto.effects import (
    AccountsWrite,
    ChangeOAuthAccounts,
    ConsumeOuterCode,
    FindUserByOAuthAccount,
    LoadProviderTokens,
    OAuthState,
    OuterCode,
    SaveOAuthState,
    SaveOuterCode,
    SaveProviderTokens,
    SignUpWithOAuth,
    SignUpWithOAuthRefusal,
    TakeOAuthState,
    oauth_index_key,
)
from identity_proto.effects.oauth import DropProviderTokens, SetOAuthAccounts
from identity_proto.records import OAuthAccount, User, user_to_json

_Short = TypeVar("_Short", OAuthState, OuterCode)


def accounts_json(accounts: Iterable[OAuthAccount]) -> str:
    """The text of a user's ``oauth_accounts`` field as the user codec writes it (`user_to_json`, then `_json`)."""
    return _json([dataclasses.asdict(account) for account in accounts])


def sign_in_keys(accounts: Iterable[OAuthAccount]) -> list[str]:
    """The OAuth index keys of the sign-in accounts among `accounts`, each once, in order."""
    keys = (oauth_index_key(a.provider_config_id, a.account_id) for a in accounts if a.allow_sign_in)
    return list(dict.fromkeys(keys))


def _short_lived(cls: type[_Short], reply: Any) -> _Short | None:
    if not reply:
        return None
    data = orjson.loads(reply)
    known = _field_names(cls)
    try:
        return cls(**{name: value for name, value in data.items() if name in known})
    except TypeError:  # kept by an older version in another shape: as good as none (the flow starts again)
        return None


# KEYS: the record. ARGV: its JSON, when Redis may drop it (ms since the epoch). The key is replaced.
script(
    "save_short_lived",
    """
redis.call('SET', KEYS[1], ARGV[1])
redis.call('PEXPIREAT', KEYS[1], ARGV[2])
return 1
""",
)

# KEYS: the record. Returns its JSON (deleting it), or false.
script(
    "take_short_lived",
    """
local value = redis.call('GET', KEYS[1])
if value then redis.call('DEL', KEYS[1]) end
return value
""",
)


@_plans(SaveOAuthState)
def _save_oauth_state(keys: KeySpace, effect: SaveOAuthState) -> Plan[None]:
    state = effect.state
    yield Script(
        "save_short_lived",
        (keys.oauth_state(effect.state_hash),),
        (_json(dataclasses.asdict(state)), state.expires_at_millis + OAUTH_GRACE_MS),
    )


@_plans(TakeOAuthState)
def _take_oauth_state(keys: KeySpace, effect: TakeOAuthState) -> Plan[OAuthState | None]:
    return _short_lived(OAuthState, (yield Script("take_short_lived", (keys.oauth_state(effect.state_hash),))))


@_plans(SaveOuterCode)
def _save_outer_code(keys: KeySpace, effect: SaveOuterCode) -> Plan[None]:
    code = effect.code
    yield Script(
        "save_short_lived",
        (keys.outer_code(code.project_id, effect.code_hash),),
        (_json(dataclasses.asdict(code)), code.expires_at_millis + OAUTH_GRACE_MS),
    )


@_plans(ConsumeOuterCode)
def _consume_outer_code(keys: KeySpace, effect: ConsumeOuterCode) -> Plan[OuterCode | None]:
    key = keys.outer_code(effect.project_id, effect.code_hash)
    return _short_lived(OuterCode, (yield Script("take_short_lived", (key,))))


@_plans(FindUserByOAuthAccount)
def _find_user_by_oauth_account(keys: KeySpace, effect: FindUserByOAuthAccount) -> Plan[User | None]:
    p = effect.project_id
    key = oauth_index_key(effect.provider_config_id, effect.account_id)
    return _user(first((yield by_index(keys.oauth_index(p), key, keys.user(p), "r"))))


#: Lua: whether one of the OAuth index keys `list` (from `first` to `last`) is held by an existing user other than
#: `uid` (an entry pointing at nobody is free).
_HELD_BY_ANOTHER = """
local function held_by_another(index_key, user_prefix, uid, list, first, last)
  for i = first, last do
    local holder = redis.call('HGET', index_key, list[i])
    if holder and holder ~= uid and redis.call('EXISTS', user_prefix .. holder) == 1 then return true end
  end
  return false
end
"""

# KEYS: user, OAuth index, provider tokens. ARGV: user id, the expected accounts' JSON (as the codec writes it), the
# new accounts' JSON, user key prefix, then the counts nr, na and nr index keys to remove, na index keys to set, and
# the rest: the account row ids whose tokens go. Returns {'done', record as JSON} or {outcome} (nothing written).
script(
    "change_oauth_accounts",
    _RECORD_JSON
    + _HELD_BY_ANOTHER
    + """
local stored = redis.call('HGET', KEYS[1], 'oauth_accounts')
if not stored then
  if redis.call('EXISTS', KEYS[1]) == 0 then return {'user_not_found'} end
  stored = '[]'
end
if stored ~= ARGV[2] then return {'conflict'} end
local nr, na = tonumber(ARGV[5]), tonumber(ARGV[6])
if held_by_another(KEYS[2], ARGV[4], ARGV[1], ARGV, 7 + nr, 6 + nr + na) then return {'account_taken'} end
for i = 7, 6 + nr do
  if redis.call('HGET', KEYS[2], ARGV[i]) == ARGV[1] then redis.call('HDEL', KEYS[2], ARGV[i]) end
end
for i = 7 + nr, 6 + nr + na do redis.call('HSET', KEYS[2], ARGV[i], ARGV[1]) end
for i = 7 + nr + na, #ARGV do redis.call('HDEL', KEYS[3], ARGV[i]) end
redis.call('HSET', KEYS[1], 'oauth_accounts', ARGV[3])
return {'done', record_json(redis.call('HGETALL', KEYS[1]))}
""",
)


@_plans(ChangeOAuthAccounts)
def _change_oauth_accounts(keys: KeySpace, effect: ChangeOAuthAccounts) -> Plan[tuple[AccountsWrite, User | None]]:
    p, user_id = effect.project_id, effect.user_id
    # The script goes on only while the stored list is `expected`: the diff is computed from it here.
    old_keys, new_keys = sign_in_keys(effect.expected), sign_in_keys(effect.accounts)
    removed = [key for key in old_keys if key not in new_keys]
    kept_rows = {account.id for account in effect.accounts}
    gone_rows = list(dict.fromkeys(a.id for a in effect.expected if a.id not in kept_rows))
    reply = yield Script(
        "change_oauth_accounts",
        (keys.user(p, user_id), keys.oauth_index(p), keys.provider_tokens(p)),
        (
            user_id,
            accounts_json(effect.expected),
            accounts_json(effect.accounts),
            keys.user(p),
            len(removed),
            len(new_keys),
            *removed,
            *new_keys,
            *gone_rows,
        ),
    )
    outcome = AccountsWrite(_text(reply[0]))
    return outcome, _required(_user(reply[1])) if outcome is AccountsWrite.DONE else None


# KEYS: user, provider tokens. ARGV: account row id, sealed tokens. Returns 1 if stored, 0 if the user has no such
# row (nothing written). The user's accounts are only read (decoded), never written back.
script(
    "save_provider_tokens",
    """
local stored = redis.call('HGET', KEYS[1], 'oauth_accounts')
if not stored then return 0 end
for _, account in ipairs(cjson.decode(stored)) do
  if account.id == ARGV[1] then
    redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
    return 1
  end
end
return 0
""",
)


@_plans(SaveProviderTokens)
def _save_provider_tokens(keys: KeySpace, effect: SaveProviderTokens) -> Plan[bool]:
    p = effect.project_id
    stored = yield Script(
        "save_provider_tokens",
        (keys.user(p, effect.user_id), keys.provider_tokens(p)),
        (effect.account_row_id, effect.sealed),
    )
    return bool(stored)


@_plans(LoadProviderTokens)
def _load_provider_tokens(keys: KeySpace, effect: LoadProviderTokens) -> Plan[str | None]:
    reply = yield Call("HGET", keys.provider_tokens(effect.project_id), effect.account_row_id)
    return None if reply is None else _text(reply)


# KEYS: user, e-mail index, user order, OAuth index, the events stream, and with a personal team: team, team order,
# the team's member index, the new user's team index, membership order, membership sequence.
# ARGV: user id, has an auth e-mail (1/0), the auth e-mail, signed_up_at_millis, user key prefix, membership key
# prefix, team id, team created_at_millis, then the counts nk, nu, nt, and nk OAuth index keys, nu items field,
# value, ... of the user, nt of the team, and the rest: the creator's membership.
# Returns 'ok', or 'id_taken' / 'email_taken' / 'account_taken' (checked in that order; nothing written).
script(
    "sign_up_with_oauth",
    _SEQ
    + _CREATE_TEAM
    + _HELD_BY_ANOTHER
    + _RECORD_JSON
    + _EMIT_EVENT
    + _EMIT_TEAM_EVENT
    + _EMIT_USER_EVENT
    + """
if redis.call('EXISTS', KEYS[1]) == 1 then return 'id_taken' end
if ARGV[2] == '1' then
  local holder = redis.call('HGET', KEYS[2], ARGV[3])
  if holder and redis.call('EXISTS', ARGV[5] .. holder) == 1 then return 'email_taken' end
end
local nk, nu, nt = tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11])
if held_by_another(KEYS[4], ARGV[5], ARGV[1], ARGV, 12, 11 + nk) then return 'account_taken' end
redis.call('HSET', KEYS[1], unpack(ARGV, 12 + nk, 11 + nk + nu))
if ARGV[2] == '1' then redis.call('HSET', KEYS[2], ARGV[3], ARGV[1]) end
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[1])
for i = 12, 11 + nk do redis.call('HSET', KEYS[4], ARGV[i], ARGV[1]) end
emit_user_event(KEYS[5], 'user.created', KEYS[1], '', true)
if #KEYS > 5 then
  create_team(KEYS[6], KEYS[7], ARGV[7], ARGV[8], {unpack(ARGV, 12 + nk + nu, 11 + nk + nu + nt)})
  add_creator(KEYS[8], KEYS[9], KEYS[10], KEYS[11], ARGV[6], ARGV[7], ARGV[1], {unpack(ARGV, 12 + nk + nu + nt)})
  emit_team_event(KEYS[5], 'team.created', KEYS[6])
end
return 'ok'
""",
)


@_plans(SignUpWithOAuth)
def _sign_up_with_oauth(keys: KeySpace, effect: SignUpWithOAuth) -> Plan[User | SignUpWithOAuthRefusal]:
    p, user = effect.project_id, effect.new_user
    email = user.auth_email
    index_keys = sign_in_keys(user.oauth_accounts)
    user_items = _flat(_json_fields(user_to_json(user)))
    team_id, team_created_at, team_items, membership_items, team_keys = personal_team_parts(
        keys, p, user.id, effect.personal_team
    )
    args: list[Arg] = [
        user.id,
        0 if email is None else 1,
        email or "",
        user.signed_up_at_millis,
        keys.user(p),
        keys.membership(p),
        team_id,
        team_created_at,
        len(index_keys),
        len(user_items),
        len(team_items),
        *index_keys,
        *user_items,
        *team_items,
        *membership_items,
    ]
    reply = yield Script(
        "sign_up_with_oauth",
        (
            keys.user(p, user.id),
            keys.users_by_email(p),
            keys.user_order(p),
            keys.oauth_index(p),
            keys.events(p),
            *team_keys,
        ),
        tuple(args),
    )
    outcome = _text(reply)
    return user if outcome == "ok" else SignUpWithOAuthRefusal(outcome)


@writes(DropProviderTokens)
def _drop_provider_tokens(ops: Ops, write: DropProviderTokens) -> None:
    ops.writes.append(["hdel", ops.key(ops.space.provider_tokens(ops.project_id)), write.account_row_id])


@writes(SetOAuthAccounts)
def _set_oauth_accounts(ops: Ops, write: SetOAuthAccounts) -> None:
    # The list's JSON as a whole user's fields hold it (`FieldsAre` compares this text).
    accounts = _json([dataclasses.asdict(account) for account in write.accounts])
    ops.writes.append(["hset", ops.key(ops.space.user(ops.project_id, write.user_id)), "oauth_accounts", accounts])
