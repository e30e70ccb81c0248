"""What the password flows read and commit (the core decides: `identity_proto.flows.passwords`): the holder of an
address with their channels, in one read; a one-time code stored (the code with its TTL, its nonce counter created
once) and a mail appended to the outbox (LPUSH, LTRIM)."""

from __future__ import annotations

from backends.redis.codecs import _email_json, _json_fields
from backends.redis.commit import Ops, writes
from backends.redis.contact_channels import channel_steps, user_channels
from backends.redis.keys import GRACE_MS, KeySpace
from backends.redis.plan import Plan, _plans
from backends.redis.read import call, cat, key, read, ref
from identity_proto.effects import FindAuthAddressHolder, PutCode, PutMail, UserChannels


@_plans(FindAuthAddressHolder)
def _find_auth_address_holder(keys: KeySpace, effect: FindAuthAddressHolder) -> Plan[UserChannels | None]:
    # The user the index gives the address to, with their channels (None: nobody, or a user who is gone).
    p, holder = effect.project_id, ref(1)
    user, channels = cat(keys.user(p, ""), holder), cat(keys.user_channels(p, ""), holder)
    steps = [call("HGET", key(1), effect.email, need=1), *channel_steps(user, channels, key(1), [effect.email], 1)]
    return user_channels((yield read((keys.users_by_email(p),), steps)))


@writes(PutCode)
def _put_code(ops: Ops, write: PutCode) -> None:
    # TTLs collect garbage only: `GRACE_MS` past the code's expiry (`keys.py`), the nonce counter's at least that.
    space, p, code = ops.space, ops.project_id, write.code
    expires = str(code.expires_at_millis + GRACE_MS)
    code_key = ops.key(space.code(p, code.code_hash))
    nonce_key = ops.key(space.nonce(p, code.nonce_hash))
    ops.put(code_key, _json_fields(code))
    ops.writes.append(["pexpireat", code_key, expires])
    ops.writes += [["set", nonce_key, "0", "NX"], ["extend", nonce_key, expires]]


@writes(PutMail)
def _put_mail(ops: Ops, write: PutMail) -> None:
    outbox = ops.key(ops.space.outbox(ops.project_id))
    if write.keep <= 0:
        ops.writes.append(["del", outbox])
        return
    ops.writes += [["lpush", outbox, _email_json(write.mail)], ["ltrim", outbox, "0", str(write.keep - 1)]]
