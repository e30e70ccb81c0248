"""OAuth storage: short-lived values (OAuth states, outer codes, the mock provider's records: plain SET and GETDEL),
linked accounts (the user's ``oauth_accounts`` field, one JSON array) and provider tokens,
written by commits (`backends.redis.commit`).

The accounts' JSON is written here exactly as the user codec writes it, so `FieldsAre` compares the same text."""

from __future__ import annotations

import dataclasses

from backends.redis.codecs import _json, _text
from backends.redis.commit import Ops, writes
from backends.redis.keys import OAUTH_GRACE_MS, KeySpace
from backends.redis.plan import Arg, Call, Plan, _plans
from identity_proto.effects import (
    LoadProviderTokens,
    PutShortLived,
    ShortLived,
    TakeShortLived,
)
from identity_proto.effects.oauth import DropProviderTokens, PutProviderTokens, SetOAuthAccounts

#: The mock provider's keys (`KeySpace.mock_oauth`), by kind.
_MOCK = {
    ShortLived.MOCK_KEYS: "keys",
    ShortLived.MOCK_CODE: "code:",
    ShortLived.MOCK_TOKEN: "token:",
    ShortLived.MOCK_FAILURE: "fail:",
}


def _short_lived_key(keys: KeySpace, kind: ShortLived, project_id: str | None, key: str) -> str:
    if kind is ShortLived.OAUTH_STATE:
        return keys.oauth_state(key)
    if kind is ShortLived.OUTER_CODE:
        assert project_id is not None, "an outer code is a project's"
        return keys.outer_code(project_id, key)
    return keys.mock_oauth(_MOCK[kind] + key)


@_plans(PutShortLived)
def _put_short_lived(keys: KeySpace, effect: PutShortLived) -> Plan[bool]:
    # A relative TTL (the lifetime by the core's clock, plus a grace), so a dev clock far from Redis's drops nothing.
    args: list[Arg] = [_short_lived_key(keys, effect.kind, effect.project_id, effect.key), effect.value]
    if effect.expires_at_millis is not None:
        if effect.expires_at_millis <= effect.now_ms:
            return False
        args += ["PX", effect.expires_at_millis - effect.now_ms + OAUTH_GRACE_MS]
    reply = yield Call("SET", *args, *(("NX",) if effect.only_if_absent else ()))
    return reply is not None


@_plans(TakeShortLived)
def _take_short_lived(keys: KeySpace, effect: TakeShortLived) -> Plan[str | None]:
    key = _short_lived_key(keys, effect.kind, effect.project_id, effect.key)
    reply = yield Call("GET" if effect.keep else "GETDEL", key)
    return None if reply is None else _text(reply)


@_plans(LoadProviderTokens)
def _load_provider_tokens(keys: KeySpace, effect: LoadProviderTokens) -> Plan[str | None]:
    reply = yield Call("HGET", keys.provider_tokens(effect.project_id), effect.account_row_id)
    return None if reply is None else _text(reply)


@writes(PutProviderTokens)
def _put_provider_tokens(ops: Ops, write: PutProviderTokens) -> None:
    key = ops.key(ops.space.provider_tokens(ops.project_id))
    ops.writes.append(["hset", key, write.account_row_id, write.sealed])


@writes(DropProviderTokens)
def _drop_provider_tokens(ops: Ops, write: DropProviderTokens) -> None:
    ops.writes.append(["hdel", ops.key(ops.space.provider_tokens(ops.project_id)), write.account_row_id])


@writes(SetOAuthAccounts)
def _set_oauth_accounts(ops: Ops, write: SetOAuthAccounts) -> None:
    # The list's JSON as a whole user's fields hold it (`FieldsAre` compares this text).
    accounts = _json([dataclasses.asdict(account) for account in write.accounts])
    ops.writes.append(["hset", ops.key(ops.space.user(ops.project_id, write.user_id)), "oauth_accounts", accounts])
