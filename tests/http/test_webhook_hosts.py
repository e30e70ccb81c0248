"""The hosts' delivery loops: the ASGI host's task starts with the service and stops (awaited) at lifespan shutdown;
the WSGI host's thread starts with the host and stops with `close()`; both deliver to a real loopback receiver."""

from __future__ import annotations

import asyncio
import dataclasses

import httpx

from asgi_app import IdentityASGI
from identity_hosting.settings import Settings
from identity_hosting.wsgi import IdentityWSGI
from tests.support import admin_headers
from tests.webhook_receivers import running_receiver, svix_verifier

SETTINGS = dataclasses.replace(Settings(), webhook_poll_s=0.05, webhook_timeout_s=2.0, rate_limits=False)


def test_the_asgi_host_delivers_from_a_task_that_lifespan_shutdown_stops() -> None:
    async def scenario() -> None:
        app = IdentityASGI(SETTINGS)
        await app.startup()
        loop = app.webhook_loop
        assert loop is not None
        task = loop._task
        assert task is not None
        assert not task.done()
        with running_receiver() as receiver:
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://svc") as http:
                made = await http.post("/api/v1/webhook-endpoints", headers=admin_headers(), json={"url": receiver.url})
                assert made.status_code == 201, made.text
                receiver.verify = svix_verifier(made.json()["secret"])
                sent = await http.post(f"/api/v1/webhook-endpoints/{made.json()['id']}/test", headers=admin_headers())
                for _ in range(200):
                    if receiver.received:
                        break
                    await asyncio.sleep(0.02)
            (got,) = receiver.received
            assert (got.message_id, got.rejected) == (sent.json()["message_id"], None)
        await app.shutdown()
        assert task.done()
        assert app.webhook_loop is None

    asyncio.run(scenario())


def test_the_wsgi_host_delivers_from_a_thread_that_close_stops() -> None:
    app = IdentityWSGI(SETTINGS)
    app.startup()
    thread = app.webhook_thread
    assert thread is not None
    assert thread._thread is not None
    worker = thread._thread
    assert worker.daemon
    assert worker.is_alive()
    with (
        running_receiver() as receiver,
        httpx.Client(transport=httpx.WSGITransport(app=app), base_url="http://s") as http,
    ):
        made = http.post("/api/v1/webhook-endpoints", headers=admin_headers(), json={"url": receiver.url})
        assert made.status_code == 201, made.text
        receiver.verify = svix_verifier(made.json()["secret"])
        sent = http.post(f"/api/v1/webhook-endpoints/{made.json()['id']}/test", headers=admin_headers())
        (got,) = receiver.wait_for(lambda got: len(got) >= 1)
        assert (got.message_id, got.rejected) == (sent.json()["message_id"], None)
    app.close()
    assert not worker.is_alive()
    assert app.webhook_thread is None
