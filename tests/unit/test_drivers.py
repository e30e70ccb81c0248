"""The two drivers run the same flows to the same results."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass

import orjson

from backends.memory import AsyncMemoryStore, MemoryStore
from identity_hosting.settings import DEV_INTERNAL_ADMIN_KEY, DEV_PROJECT
from identity_proto import ComputeEffect, Request, Response, SeededEntropy, Service, arun, run
from identity_proto.effects import Flow, perform
from tests.support import START_MS, admin_headers, client_headers, internal_headers


def _script() -> list[Request]:
    def req(method: str, path: str, headers: dict[str, str], body: object = None) -> Request:
        raw = orjson.dumps(body) if body is not None else b""
        extra = (("content-type", "application/json"),) if body is not None else ()
        return Request(method, path, tuple(headers.items()) + extra, raw)

    return [
        req("GET", "/api/v1", {}),
        req("GET", "/api/v1/projects/current", client_headers()),
        req(
            "PATCH",
            "/api/v1/projects/current",
            admin_headers(),
            {"display_name": "Renamed", "config": {"allow_localhost": False}},
        ),
        req("PATCH", "/api/v1/projects/current", admin_headers(), {"config": {"domains": [{"domain": "nope"}]}}),
        req("POST", "/api/v1/internal/projects", internal_headers(), {"display_name": "Second"}),
        req("GET", "/api/v1/internal/projects", internal_headers()),
        req("GET", "/api/v1/projects/current", admin_headers()),
        req("DELETE", "/api/v1/projects/current", admin_headers()),
    ]


def _sync_responses() -> list[Response]:
    service, store, entropy = Service(), MemoryStore(), SeededEntropy(11)
    run(service.bootstrap(DEV_PROJECT, DEV_INTERNAL_ADMIN_KEY, now_ms=START_MS, entropy=entropy), store)
    return [run(service.handle(request, START_MS + i, entropy), store) for i, request in enumerate(_script())]


async def _async_responses() -> list[Response]:
    service, store, entropy = Service(), AsyncMemoryStore(), SeededEntropy(11)
    await arun(service.bootstrap(DEV_PROJECT, DEV_INTERNAL_ADMIN_KEY, now_ms=START_MS, entropy=entropy), store)
    return [await arun(service.handle(request, START_MS + i, entropy), store) for i, request in enumerate(_script())]


def test_run_and_arun_give_identical_responses() -> None:
    sync = _sync_responses()
    asynchronous = asyncio.run(_async_responses())
    assert [r.status for r in sync] == [200, 200, 200, 400, 201, 200, 200, 405]
    assert sync == asynchronous


@dataclass(frozen=True)
class WhichThread(ComputeEffect[int]):
    def compute(self) -> int:
        return threading.get_ident()


def _ask_thread() -> Flow[int]:
    return (yield from perform(WhichThread()))


def test_compute_effects_leave_the_event_loop_thread() -> None:
    async def main() -> tuple[int, int]:
        return threading.get_ident(), await arun(_ask_thread(), AsyncMemoryStore())

    loop_thread, worker_thread = asyncio.run(main())
    assert loop_thread != worker_thread


def test_compute_effects_run_inline_under_the_sync_driver() -> None:
    assert run(_ask_thread(), MemoryStore()) == threading.get_ident()
