"""What the webhook delivery loop logs when its passes fail: a store outage (`StorageUnavailable`) is one line when it
begins and one when the store answers again, however many passes fail meanwhile; any other failure is a bug and
keeps its traceback, then the same failure at most once a minute."""

from __future__ import annotations

import logging

import pytest

from identity_hosting.webhook_common import _FailureLog
from identity_proto.errors import StorageUnavailable


def test_an_outage_is_one_line_when_it_begins_and_one_when_it_ends(caplog: pytest.LogCaptureFixture) -> None:
    log = _FailureLog()
    with caplog.at_level(logging.INFO, logger="identity_service.webhooks"):
        for _ in range(50):
            log.failed(StorageUnavailable("Redis unavailable during ClaimDeliveries (ConnectionError)"), 1.0)
        log.succeeded()
        log.succeeded()
        log.failed(StorageUnavailable("Redis unavailable during ClaimDeliveries (ConnectionError)"), 1.0)
        log.succeeded()
    messages = [record.getMessage() for record in caplog.records]
    assert messages == [
        "webhook deliveries paused: Redis unavailable during ClaimDeliveries (ConnectionError); retrying every 1.0 s",
        "webhook deliveries resumed: the store answers again",
        "webhook deliveries paused: Redis unavailable during ClaimDeliveries (ConnectionError); retrying every 1.0 s",
        "webhook deliveries resumed: the store answers again",
    ]
    assert all(record.exc_info is None for record in caplog.records)  # no traceback for an outage


def test_another_failure_keeps_its_traceback_once_a_minute(caplog: pytest.LogCaptureFixture) -> None:
    log = _FailureLog()
    with caplog.at_level(logging.INFO, logger="identity_service.webhooks"):
        for _ in range(20):
            log.failed(KeyError("bug"), 1.0)
    (record,) = caplog.records
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None
