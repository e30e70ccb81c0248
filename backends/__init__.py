"""Storage backends: each implements the core's storage contract (`identity_proto.effects`) and nothing else.

- `backends.memory`: dicts behind a lock, for tests, embedding and single-process deployments.
"""
