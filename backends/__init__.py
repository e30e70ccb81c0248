"""Storage backends: each implements the core's storage contract (`identity_proto.effects`) and nothing else.

- `backends.memory`: dicts behind a lock, for tests, embedding and single-process deployments.
- `backends.redis`: command plans and Lua scripts over redis-py (a server or a cluster), sync and asyncio.

Both are split into modules of the same names, by what they do; backends/README.md says where to find an effect's
handler, plan and script, and has the Redis key layout.
"""
