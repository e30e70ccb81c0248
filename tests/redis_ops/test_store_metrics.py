"""The Redis store tells the host's metrics what each operation did (`backends.redis.runner.StoreObserver`): each
effect performed by outcome (ok, unavailable, error), its duration, and the circuit breaker's state; on a real
redis-server we start, stop and start again."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from backends.redis import AsyncRedisStore, RedisStore
from identity_hosting.observability import Metrics
from identity_proto.effects import LoadProject
from identity_proto.effects.webhooks import ListWebhookProjects
from identity_proto.errors import StorageUnavailable
from tests.redis_ops.servers import start_redis

pytestmark = pytest.mark.redis

PROJECT = LoadProject("00000000-0000-4000-8000-000000000000")


def _samples(metrics: Metrics) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(metrics.exposition()[0].decode())
        for sample in family.samples
    }


def _operations(metrics: Metrics, operation: str, outcome: str) -> float:
    key = ("identity_store_operations_total", frozenset({("operation", operation), ("outcome", outcome)}))
    return _samples(metrics).get(key, 0.0)


def _circuit(metrics: Metrics) -> float:
    return _samples(metrics)[("identity_store_circuit_open", frozenset())]


def test_the_asyncio_store_reports_operations_faults_and_the_circuit(tmp_path: Path) -> None:
    server = start_redis(tmp_path)
    metrics = Metrics()

    async def main() -> None:
        store = AsyncRedisStore.from_url(server.url, socket_timeout=0.5)
        store.observe(metrics)
        try:
            assert await store.apply(PROJECT) is None
            assert await store.apply(ListWebhookProjects()) == ()
            assert _operations(metrics, "LoadProject", "ok") == 1
            assert _operations(metrics, "ListWebhookProjects", "ok") == 1
            assert _circuit(metrics) == 0
            server.stop()
            for _ in range(3):
                with pytest.raises(StorageUnavailable):
                    await store.apply(PROJECT)
            assert _operations(metrics, "LoadProject", "unavailable") == 3  # a fault, then refused at once
            assert _circuit(metrics) == 1
            server.restart()
            for _ in range(100):  # refused at once until the window has passed; then a probe finds Redis back
                try:
                    assert await store.apply(PROJECT) is None
                    break
                except StorageUnavailable:
                    await asyncio.sleep(0.05)
            assert _circuit(metrics) == 0
        finally:
            await store.aclose()

    try:
        asyncio.run(main())
    finally:
        server.stop()
    samples = _samples(metrics)
    operations = sum(v for (name, _), v in samples.items() if name == "identity_store_operations_total")
    assert samples[("identity_store_operation_duration_seconds_count", frozenset())] == operations


def test_the_sync_store_reports_its_operations_too(tmp_path: Path) -> None:
    server = start_redis(tmp_path)
    metrics = Metrics()
    store = RedisStore.from_url(server.url)
    store.observe(metrics)
    try:
        store.apply(PROJECT)
    finally:
        store.close()
        server.stop()
    assert _operations(metrics, "LoadProject", "ok") == 1


def test_an_unobserved_store_measures_nothing(tmp_path: Path) -> None:
    server = start_redis(tmp_path)
    store = RedisStore.from_url(server.url)
    try:
        store.apply(PROJECT)
        assert store._observer is None
    finally:
        store.close()
        server.stop()
