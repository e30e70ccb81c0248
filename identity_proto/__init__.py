"""identity_proto: the sans-io core of the identity service.

Parsed requests in, responses out, as generator flows that yield atomic storage effects; no sockets, no event
loop, no wall clock, no global randomness. Hosts run flows with `run` (sync stores) or `arun` (async stores)::

    service = Service()
    response = run(service.handle(request, now_ms, entropy), store)

Backends implement the storage contract in `identity_proto.effects` on the records of `identity_proto.records`.
"""

from __future__ import annotations

import logging

from identity_proto.auth import AccessType
from identity_proto.context import ServiceOptions
from identity_proto.drivers import AsyncStore, Store, arun, run
from identity_proto.effects import ComputeEffect, Effect, Flow, StorageEffect
from identity_proto.errors import ErrorCode, IdentityError, KnownError, StorageUnavailable
from identity_proto.flows.projects import IssuedKeys, ProjectSeed
from identity_proto.http import MalformedRequest, Request, Response
from identity_proto.service import RequestNote, Service
from identity_proto.tokens import Entropy, SeededEntropy, new_request_id

__all__ = [
    "AccessType",
    "AsyncStore",
    "ComputeEffect",
    "Effect",
    "Entropy",
    "ErrorCode",
    "Flow",
    "IdentityError",
    "IssuedKeys",
    "KnownError",
    "MalformedRequest",
    "ProjectSeed",
    "Request",
    "RequestNote",
    "Response",
    "SeededEntropy",
    "Service",
    "ServiceOptions",
    "StorageEffect",
    "StorageUnavailable",
    "Store",
    "arun",
    "new_request_id",
    "run",
]

# The core logs through the standard library and never configures logging: silent unless the host wants it.
logging.getLogger("identity_proto").addHandler(logging.NullHandler())
