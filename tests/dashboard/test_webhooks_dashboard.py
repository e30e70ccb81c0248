"""Webhooks in the dashboard, in headless Chromium against a real Hypercorn on the memory store and on Redis: an
admin adds an endpoint for one event type (its secret shown once, in a copy box, and gone after), edits and
disables it, sends a test event, reads its deliveries and replays one, rotates the secret (the new one shown once)
and deletes the endpoint; a refused URL shows the service's reason and adds nothing."""

from __future__ import annotations

from typing import Any

import pytest

from tests.dashboard.conftest import Backend, Browser, Project
from tests.dashboard.test_dashboard_browser import connect, go, shot

pytestmark = pytest.mark.e2e

#: Nobody listens there (dev mode allows loopback receivers): deliveries to it fail, which the page shows.
RECEIVER = "http://127.0.0.1:9/identity-hooks"


def _endpoints(backend: Backend, project: Project) -> list[dict[str, Any]]:
    with backend.http() as http:
        listed = http.get("/api/v1/webhook-endpoints", headers=project.headers("admin"))
    assert listed.status_code == 200, listed.text
    items: list[dict[str, Any]] = listed.json()["items"]
    return items


def test_an_admin_manages_an_endpoint_whose_secret_is_shown_once(
    page: Browser, backend: Backend, project: Project
) -> None:
    page.secrets.append(project.super_secret_admin_key)
    connect(page, project.id, project.super_secret_admin_key)
    page.find("#users-view")
    go(page, "webhooks")
    page.text_of("#webhook-endpoints-list", "No webhook endpoints.")

    # A URL the service refuses: its reason on the page, nothing added.
    page.click("#webhook-add")
    page.type_into("#webhook-url", f"{backend.base_url}/api/v1/users")
    page.click("#webhook-save")
    page.text_of("#webhooks-status .state-error", "WEBHOOK_URL_NOT_ALLOWED")
    assert _endpoints(backend, project) == []
    page.click("#webhook-cancel")

    page.click("#webhook-add")
    page.type_into("#webhook-url", RECEIVER)
    page.type_into("#webhook-description", "CRM sync")
    page.find("#webhook-all-events").click()
    page.find('.webhook-event-type[data-event-type="user.created"]').click()
    page.click("#webhook-save")
    page.text_of("#webhooks-status", f"Added {RECEIVER}.")
    secret = page.find("#webhook-secret").get_attribute("value")
    assert secret is not None
    assert secret.startswith("whsec_")
    page.secrets.append(secret)
    (endpoint,) = _endpoints(backend, project)
    assert (endpoint["url"], endpoint["description"], endpoint["event_types"]) == (
        RECEIVER,
        "CRM sync",
        ["user.created"],
    )
    row = f'#webhook-endpoints-table tr[data-endpoint-id="{endpoint["id"]}"]'
    page.text_of(f"{row} .webhook-event-types", "user.created")
    shot(page, backend, "webhooks")
    page.click("#webhook-secret-done")
    page.until(lambda: secret not in page.driver.page_source, "the secret stayed on the page")

    # Edited and disabled.
    page.click(page.find(f"{row} .edit-endpoint"))
    page.find("#webhook-all-events").click()
    page.click("#webhook-save")
    page.text_of("#webhooks-status", f"Saved {RECEIVER}.")
    page.text_of(f"{row} .webhook-event-types", "every event")
    page.click(page.find(f"{row} .toggle-endpoint"))
    page.text_of("#webhooks-status", "Endpoint disabled.")
    page.text_of(f"{row} .webhook-state", "disabled")
    assert _endpoints(backend, project)[0]["disabled"] is True
    page.click(page.find(f"{row} .toggle-endpoint"))
    page.text_of(f"{row} .webhook-state", "enabled")

    # A test event, its delivery and a replay.
    page.click(page.find(f"{row} .send-test"))
    message = page.text_of("#webhooks-status", "Test event msg_").split()[2]
    page.click(page.find(f"{row} .show-deliveries"))
    delivery = f'#webhook-deliveries-table tr[data-message-id="{message}"]'
    page.text_of(delivery, "stack.test")
    page.click(page.find(f"{delivery} .replay-delivery"))
    page.text_of("#webhooks-status", f"Message {message} will be sent again.")
    page.text_of(f"{delivery} .delivery-state", "pending")

    # Rotation: a new secret, shown once.
    page.click(page.find(f"{row} .rotate-secret"))
    page.text_of("#confirm-dialog", "Rotate the signing secret?")
    page.click("#confirm-ok")
    page.text_of("#webhooks-status", "Secret rotated.")
    rotated = page.find("#webhook-secret").get_attribute("value")
    assert rotated is not None
    assert rotated.startswith("whsec_")
    assert rotated != secret
    page.secrets.append(rotated)
    page.text_of("#webhook-secret-box", "The previous secret also signs until")
    page.click("#webhook-secret-done")

    page.click(page.find(f"{row} .delete-endpoint"))
    page.text_of("#confirm-dialog", "Delete this endpoint?")
    page.click("#confirm-ok")
    page.text_of("#webhooks-status", "Endpoint deleted.")
    page.text_of("#webhook-endpoints-list", "No webhook endpoints.")
    assert _endpoints(backend, project) == []
    assert secret not in page.driver.page_source
    assert rotated not in page.driver.page_source
