"""Project permission grants (a set per user, and the set of users holding any: reads, and how a `Commit`'s guard
and write of them become the commit script's ops; the grant itself is the commit's `GrantPermissions`) and
permission definition changes (the definitions live in the project record's ``config.permission_definitions``
field).

Each Lua script sits right above the plan that runs it (`Script("<name>", ...)`); `script` registers it in
`SCRIPTS` under that name. Shared Lua functions are in `backends.redis.lua`; key names in `backends.redis.keys`.
"""

from __future__ import annotations

from backends.redis.codecs import _config_fields, _flat, _project, _text
from backends.redis.commit import Ops, guards, writes
from backends.redis.keys import KeySpace
from backends.redis.lua import _BYTE_LESS, _SEQ
from backends.redis.plan import Arg, Call, Plan, Script, _plans, script
from backends.redis.read import MEMBER, call, cat, each, key, read
from identity_proto.changes import ProjectConfigChanges
from identity_proto.effects import (
    ChangePermissionDefinitions,
    DefinitionsWrite,
    ListProjectPermissions,
    ProjectGrantIs,
    RevokePermission,
)
from identity_proto.effects.permissions import DropProjectGrants
from identity_proto.records import Project, ProjectConfig


@guards(ProjectGrantIs)
def _project_grant_is(ops: Ops, position: int, guard: ProjectGrantIs) -> None:
    grants = ops.key(ops.space.user_permissions(ops.project_id, guard.user_id))
    ops.guards.append([position, "sismember", grants, guard.permission_id, True])
    ops.guards.append([position, "scard", grants, guard.held])


@writes(RevokePermission)
def _revoke_permission(ops: Ops, write: RevokePermission) -> None:
    space, p = ops.space, ops.project_id
    ops.writes.append(["srem", ops.key(space.user_permissions(p, write.user_id)), write.permission_id])
    if write.last:
        ops.writes.append(["srem", ops.key(space.permission_users(p)), write.user_id])


@_plans(ListProjectPermissions)
def _list_project_permissions(
    keys: KeySpace, effect: ListProjectPermissions
) -> Plan[tuple[tuple[str, tuple[str, ...]], ...]]:
    project_id, user_id = effect.project_id, effect.user_id
    if user_id is not None:
        held = yield Call("SMEMBERS", keys.user_permissions(project_id, user_id))
        return ((user_id, tuple(sorted(map(_text, held)))),) if held else ()
    # {user id, their permission ids} per user holding any.
    held = call("SMEMBERS", cat(keys.user_permissions(project_id), MEMBER), need=1, out=1)
    reply = yield read(
        (keys.permission_users(project_id),), [each("SMEMBERS", key(1), do=[{"v": MEMBER, "out": 1}, held], out=1)]
    )
    items = iter(reply[0])
    found = [(_text(uid), tuple(sorted(map(_text, held)))) for uid, held in zip(items, items, strict=True)]
    return tuple(sorted(found))


# KEYS: project, membership order, permission users.
# ARGV: n (expected fields), then n triples field, expected JSON, the field's default JSON (what a record without
# the field holds); m, then m pairs field, JSON to set; then the id to rename or remove ('' for neither), the new
# id ('' to remove), the membership key prefix, the users' permission-set prefix.
# Returns 'missing', 'conflict', or the project record (with every grant of the id renamed or removed).
#: Lua: a string as JSON text exactly as the stores' codec writes it (orjson: `"` and `\` escaped, control characters
#: below 0x20 as \b \f \n \r \t or \u00xx, everything else as it is). Not cjson.encode, which also escapes "/" and
#: DEL: the text would decode alike but differ, and a commit's guard compares a field's stored text with the
#: codec's (`MembershipFieldsAre` on `permissions`), so every later grant would conflict.
_JSON_STRING = r"""
local json_escapes = {['"'] = '\\"', ['\\'] = '\\\\', ['\b'] = '\\b', ['\f'] = '\\f', ['\n'] = '\\n',
  ['\r'] = '\\r', ['\t'] = '\\t'}
local function json_string(s)
  local escaped = string.gsub(s, '[%z\1-\31"\\]', function(c)
    return json_escapes[c] or string.format('\\u%04x', string.byte(c))
  end)
  return '"' .. escaped .. '"'
end
"""

script(
    "change_permission_definitions",
    _SEQ
    + _BYTE_LESS
    + _JSON_STRING
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return 'missing' end
local n = tonumber(ARGV[1])
for i = 0, n - 1 do
  local at = 2 + 3 * i
  local stored = redis.call('HGET', KEYS[1], ARGV[at])
  if not stored then stored = ARGV[at + 2] end
  if stored ~= ARGV[at + 1] then return 'conflict' end
end
local m_at = 2 + 3 * n
local m = tonumber(ARGV[m_at])
for i = 0, m - 1 do
  redis.call('HSET', KEYS[1], ARGV[m_at + 1 + 2 * i], ARGV[m_at + 2 + 2 * i])
end
local rest = m_at + 1 + 2 * m
local old, new, membership_prefix, grants_prefix = ARGV[rest], ARGV[rest + 1], ARGV[rest + 2], ARGV[rest + 3]
if old ~= '' then
  for _, uid in ipairs(redis.call('SMEMBERS', KEYS[3])) do
    local set = grants_prefix .. uid
    if redis.call('SREM', set, old) == 1 then
      if new ~= '' then redis.call('SADD', set, new) end
      if redis.call('EXISTS', set) == 0 then redis.call('SREM', KEYS[3], uid) end
    end
  end
  local order = redis.call('ZRANGE', KEYS[2], 0, -1)
  for _, seq in ipairs(order) do
    local key = membership_prefix .. seq_text(seq)
    local raw = redis.call('HGET', key, 'permissions')
    local stored = raw and cjson.decode(raw)
    if type(stored) == 'table' then
      local found, seen, held = false, {}, {}
      for _, permission in ipairs(stored) do
        if permission == old then
          found = true
          permission = new
        end
        if type(permission) == 'string' and permission ~= '' and not seen[permission] then
          seen[permission] = true
          held[#held + 1] = permission
        end
      end
      if found then
        table.sort(held, byte_less)
        local items = {}
        for i, permission in ipairs(held) do items[i] = json_string(permission) end
        redis.call('HSET', key, 'permissions', '[' .. table.concat(items, ',') .. ']')
      end
    end
  end
end
return redis.call('HGETALL', KEYS[1])
""",
)


@_plans(ChangePermissionDefinitions)
def _change_permission_definitions(
    keys: KeySpace, effect: ChangePermissionDefinitions
) -> Plan[Project | DefinitionsWrite]:
    project_id = effect.project_id
    defaults = ProjectConfig()
    expected = _config_fields(effect.expected)
    default_texts = _config_fields(
        ProjectConfigChanges.of((name, getattr(defaults, name)) for name, _ in effect.expected)
    )
    args: list[Arg] = [len(expected)]
    for (field, text), (_, default_text) in zip(expected, default_texts, strict=True):
        args += [field, text, default_text]
    updates = _config_fields(effect.config)
    args += [len(updates), *_flat(updates)]
    old, new = effect.renamed if effect.renamed is not None else (effect.removed or "", "")
    args += [old, new, keys.membership(project_id), keys.user_permissions(project_id)]
    reply = yield Script(
        "change_permission_definitions",
        (keys.project(project_id), keys.membership_order(project_id), keys.permission_users(project_id)),
        tuple(args),
    )
    if isinstance(reply, (str, bytes)):
        text = _text(reply)
        return DefinitionsWrite.PROJECT_NOT_FOUND if text == "missing" else DefinitionsWrite.CONFLICT
    project = _project(reply)
    if project is None:  # the script returned the record it had just checked exists
        raise RuntimeError("change_permission_definitions returned no project")
    return project


@writes(DropProjectGrants)
def _drop_project_grants(ops: Ops, write: DropProjectGrants) -> None:
    space, p = ops.space, ops.project_id
    ops.writes.append(["del", ops.key(space.user_permissions(p, write.user_id))])
    ops.writes.append(["srem", ops.key(space.permission_users(p)), write.user_id])
