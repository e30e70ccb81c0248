"""Projects: the project record and the index of every project (`{projects}`).

The project index is in another slot, so it cannot be written in the commit that writes a record: a commit's
`PutProject`, and a `PatchProject` of its key hashes (start-up's), add the id to it before the commit, whatever
the commit then finds (SADD is idempotent), so a retried create or the next start repairs an entry a crash lost.
A crash (or a create racing a delete of the same id) may leave a dangling entry, so ListProjects (SMEMBERS, then
HGETALL of each in one pipeline) skips ids whose record is missing, and sorts by (created_at_millis, id) like the
memory store.

DeleteProject removes the index entry, then the record (its reply says whether the project existed), then every
other key matching ``<p>*``, found with SCAN (MATCH, COUNT 1000; on a cluster, on every primary node in turn) and
removed page by page with UNLINK. Cost: SCAN walks the whole keyspace of the database, not only the project's
keys (O(all keys) on the server, about all keys / 1000 round trips); fine for a rare administrative operation, to
be replaced by a per-project key registry if databases grow large. This part is not atomic: a write racing the
delete may leave a key behind, and a repeated DeleteProject (which always scans) removes it.
"""

from __future__ import annotations

import dataclasses

from backends.redis.codecs import _config_fields, _flat, _json, _project, _record_fields, _text
from backends.redis.commit import Ops, guards, writes
from backends.redis.keys import KeySpace
from backends.redis.plan import Batch, Call, Plan, Scan, _plans
from identity_proto.changes import ProjectConfigChanges
from identity_proto.effects import DeleteProject, ListProjects, LoadProject, PatchProject, ProjectConfigIs, PutProject
from identity_proto.effects.commit import RecordKind
from identity_proto.records import Project, ProjectConfig

_DEFAULTS = ProjectConfig()  # what a record without a config field holds


@_plans(LoadProject)
def _load_project(keys: KeySpace, effect: LoadProject) -> Plan[Project | None]:
    return _project((yield Call("HGETALL", keys.project(effect.project_id))))


@guards(ProjectConfigIs)
def _project_config_is(ops: Ops, position: int, guard: ProjectConfigIs) -> None:
    record = ops.record_key(RecordKind.PROJECT, ops.project_id)
    defaults = _config_fields(ProjectConfigChanges.of((name, getattr(_DEFAULTS, name)) for name, _ in guard.expected))
    for (field, text), (_, default) in zip(_config_fields(guard.expected), defaults, strict=True):
        ops.guards.append([position, "hget", record, field, [text, False] if text == default else text])


@writes(PutProject)
def _put_project(ops: Ops, write: PutProject) -> None:
    project = write.project
    record = ops.record_key(RecordKind.PROJECT, project.id)
    ops.writes += [["del", record], ["hset", record, *_flat(_record_fields(project))]]
    ops.before.append(Call("SADD", ops.space.index, project.id))  # also when its id is taken: a repair


@writes(PatchProject)
def _patch_project(ops: Ops, write: PatchProject) -> None:
    fields = _config_fields(write.config)
    if write.display_name is not None:
        fields.insert(0, ("display_name", write.display_name))
    if write.keys is not None:
        fields.append(("keys", _json(dataclasses.asdict(write.keys))))
        ops.before.append(Call("SADD", ops.space.index, write.project_id))
    if fields:
        ops.writes.append(["hset", ops.record_key(RecordKind.PROJECT, write.project_id), *_flat(fields)])


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
