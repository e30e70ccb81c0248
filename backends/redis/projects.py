"""Projects: the project record and the index of every project (`{projects}`).

The project index is in another slot, so it cannot be written in the same script as a record. The order makes
every crash safe: *create* writes the record first and the index entry second; *delete* removes the index entry
first and the record second. A crash therefore never leaves an index entry pointing at nothing, only (at worst) a
record missing from the index; CreateProject and EnsureProject add the id to the index whatever the script found
(SADD is idempotent), so retrying either repairs it. A create racing a delete of the same id can still leave a
dangling entry, so ListProjects (SMEMBERS, then HGETALL of each in one pipeline) skips ids whose record is
missing, and sorts by (created_at_millis, id) like the memory store.

DeleteProject removes the index entry, then the record (its reply says whether the project existed), then every
other key matching ``<p>*``, found with SCAN (MATCH, COUNT 1000; on a cluster, on every primary node in turn) and
removed page by page with UNLINK. Cost: SCAN walks the whole keyspace of the database, not only the project's
keys (O(all keys) on the server, about all keys / 1000 round trips); fine for a rare administrative operation, to
be replaced by a per-project key registry if databases grow large. This part is not atomic: a write racing the
delete may leave a key behind, and a repeated DeleteProject (which always scans) removes it.

Each Lua script sits right above the plan that runs it (`Script("<name>", ...)`); `script` registers it in
`SCRIPTS` under that name. Shared Lua functions are in `backends.redis.lua`; key names in `backends.redis.keys`.
"""

from __future__ import annotations

from backends.redis.codecs import _config_fields, _flat, _json, _project, _record_fields, _stored, _text
from backends.redis.keys import KeySpace
from backends.redis.plan import Batch, Call, Plan, Scan, Script, _plans, script
from identity_proto.effects import CreateProject, DeleteProject, EnsureProject, ListProjects, LoadProject, UpdateProject
from identity_proto.records import Project, project_to_json


@_plans(LoadProject)
def _load_project(keys: KeySpace, effect: LoadProject) -> Plan[Project | None]:
    return _project((yield Call("HGETALL", keys.project(effect.project_id))))


# KEYS: record. ARGV: field, value, ... Returns 1 if stored, 0 if the id was taken.
script(
    "create_project",
    """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV))
return 1
""",
)


@_plans(CreateProject)
def _create_project(keys: KeySpace, effect: CreateProject) -> Plan[bool]:
    project = effect.project
    created = yield Script("create_project", (keys.project(project.id),), _flat(_record_fields(project)))
    # Record first, then index. Also when the id was taken: its entry may be the one a crash (or a lost reply
    # and a retry) kept from being added, and adding an existing member changes nothing.
    yield Call("SADD", keys.index, project.id)
    return bool(created)


# KEYS: record. ARGV: keys JSON, then field, value, ... of the whole record. Returns the stored record.
script(
    "ensure_project",
    """
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HSET', KEYS[1], 'keys', ARGV[1])
else
  redis.call('HSET', KEYS[1], unpack(ARGV, 2))
end
return redis.call('HGETALL', KEYS[1])
""",
)


@_plans(EnsureProject)
def _ensure_project(keys: KeySpace, effect: EnsureProject) -> Plan[Project]:
    project = effect.project
    args = (_json(project_to_json(project)["keys"]), *_flat(_record_fields(project)))
    stored = _stored((yield Script("ensure_project", (keys.project(project.id),), args)))
    yield Call("SADD", keys.index, project.id)  # record first, then index (idempotent: repairs a lost entry)
    return stored


# KEYS: record. ARGV: field, value, ... (maybe none). Returns the record, or nil when there is none.
script(
    "update_project",
    """
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
if #ARGV > 0 then redis.call('HSET', KEYS[1], unpack(ARGV)) end
return redis.call('HGETALL', KEYS[1])
""",
)


@_plans(UpdateProject)
def _update_project(keys: KeySpace, effect: UpdateProject) -> Plan[Project | None]:
    fields = _config_fields(effect.config)
    if effect.display_name is not None:
        fields.insert(0, ("display_name", effect.display_name))
    return _project((yield Script("update_project", (keys.project(effect.project_id),), _flat(fields))))


@_plans(ListProjects)
def _list_projects(keys: KeySpace, effect: ListProjects) -> Plan[tuple[Project, ...]]:
    ids = sorted(_text(member) for member in (yield Call("SMEMBERS", keys.index)))
    if not ids:
        return ()
    replies = yield Batch(tuple(Call("HGETALL", keys.project(project_id)) for project_id in ids))
    projects = [project for project in map(_project, replies) if project is not None]  # skip dangling ids
    return tuple(sorted(projects, key=lambda p: (p.created_at_millis, p.id)))


@_plans(DeleteProject)
def _delete_project(keys: KeySpace, effect: DeleteProject) -> Plan[bool]:
    project_id = effect.project_id
    yield Call("SREM", keys.index, project_id)  # index first, then record, then the rest
    existed = yield Call("DEL", keys.project(project_id))
    # Always scan, also when the record was gone: this is how a repeated delete finishes an interrupted one.
    yield from _unlink_matching(keys.project_pattern(project_id))
    yield Call("SREM", keys.webhook_projects, project_id)  # webhooks: the set is in its own slot
    return bool(existed)


def _unlink_matching(match: str, keep: str = "") -> Plan[None]:
    """UNLINK every key matching `match` but `keep`, a SCAN page at a time. Every key a project pattern matches
    carries the project's hash tag, so each page's UNLINK is on one slot (legal on a cluster)."""
    cursor = "0"
    while True:
        cursor, found = yield Scan(match, cursor)
        doomed = [key for key in found if _text(key) != keep]
        if doomed:
            yield Call("UNLINK", *doomed)
        if cursor == "0":
            return
