"""Webhook signatures verify with the two standard verifier libraries, unchanged: `svix` and `standardwebhooks`."""

from __future__ import annotations

import base64
import time

import pytest
import standardwebhooks.webhooks as standard
import svix.webhooks as svix

from identity_proto.effects.webhooks import ClaimedDelivery, Delivery, DeliveryState, WebhookEndpoint
from identity_proto.flows.webhook_delivery import signed_request
from identity_proto.records import StoredEvent
from identity_proto.webhook_signing import (
    WebhookSecretError,
    new_webhook_secret,
    sign,
    webhook_headers,
    webhook_key,
)

SECRET = new_webhook_secret(bytes(range(24)))
OTHER_SECRET = new_webhook_secret(bytes(range(100, 124)))
BODY = b'{"type":"user.created","data":{"id":"u1","display_name":"Ada \xc3\xa9"}}'


def _headers(secrets: tuple[str, ...], msg_id: str = "msg_000000000001", body: bytes = BODY) -> dict[str, str]:
    return dict(webhook_headers(secrets, msg_id, int(time.time()), body))


def test_a_signature_verifies_with_svix() -> None:
    svix.Webhook(SECRET).verify(BODY, _headers((SECRET,)))


def test_a_signature_verifies_with_standardwebhooks() -> None:
    assert standard.Webhook(SECRET).verify(BODY, _headers((SECRET,)))["type"] == "user.created"


def test_standardwebhooks_verifies_from_the_webhook_headers_alone() -> None:
    headers = {name: value for name, value in _headers((SECRET,)).items() if not name.startswith("svix-")}
    standard.Webhook(SECRET).verify(BODY, headers)


def test_svix_verifies_from_the_svix_headers_alone() -> None:
    headers = {name: value for name, value in _headers((SECRET,)).items() if not name.startswith("webhook-")}
    svix.Webhook(SECRET).verify(BODY, headers)


def test_a_tampered_body_fails_both_verifiers() -> None:
    headers = _headers((SECRET,))
    tampered = BODY.replace(b"u1", b"u2")
    with pytest.raises(svix.WebhookVerificationError):
        svix.Webhook(SECRET).verify(tampered, headers)
    with pytest.raises(standard.WebhookVerificationError):
        standard.Webhook(SECRET).verify(tampered, headers)


def test_a_signature_made_with_another_secret_fails() -> None:
    headers = _headers((OTHER_SECRET,))
    with pytest.raises(svix.WebhookVerificationError):
        svix.Webhook(SECRET).verify(BODY, headers)


def test_during_a_rotation_each_secret_verifies_its_own_signature() -> None:
    headers = _headers((SECRET, OTHER_SECRET))
    assert len(headers["svix-signature"].split(" ")) == 2
    for secret in (SECRET, OTHER_SECRET):
        svix.Webhook(secret).verify(BODY, headers)
        standard.Webhook(secret).verify(BODY, headers)
    with pytest.raises(svix.WebhookVerificationError):
        svix.Webhook(new_webhook_secret(b"x" * 24)).verify(BODY, headers)


def test_the_signature_is_hmac_sha256_of_id_timestamp_and_body() -> None:
    # The Standard Webhooks test vector (standard-webhooks spec, "Signature scheme" example).
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    body = b'{"test": 2432232314}'
    assert sign(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body) == (
        "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    )


def test_every_header_is_sent_under_both_names() -> None:
    headers = _headers((SECRET,), msg_id="msg_42")
    assert headers["svix-id"] == headers["webhook-id"] == "msg_42"
    assert headers["svix-timestamp"] == headers["webhook-timestamp"]
    assert headers["svix-signature"] == headers["webhook-signature"]
    assert headers["content-type"] == "application/json"
    assert headers["user-agent"]


@pytest.mark.parametrize("secret", ["MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_not base64!", "whsec_abc"])
def test_a_secret_that_is_not_whsec_base64_is_refused(secret: str) -> None:
    with pytest.raises(WebhookSecretError):
        webhook_key(secret)


def test_the_key_is_the_decoded_part_after_whsec() -> None:
    assert webhook_key(new_webhook_secret(b"\x00\xffkey")) == b"\x00\xffkey"
    assert new_webhook_secret(b"abc") == "whsec_" + base64.b64encode(b"abc").decode()


def _claimed(endpoint: WebhookEndpoint) -> ClaimedDelivery:
    event = StoredEvent(id="msg_7", type="team.deleted", created_at_millis=0, ids=("t1",))
    delivery = Delivery(endpoint.id, "msg_7", "team.deleted", DeliveryState.PENDING, 0)
    return ClaimedDelivery(delivery=delivery, event=event, endpoint=endpoint, claim_token="tok")


def test_a_rotated_endpoint_signs_with_both_secrets_until_the_overlap_ends() -> None:
    now_ms = int(time.time() * 1000)
    endpoint = WebhookEndpoint(
        id="ep1",
        url="https://example.com/hook",
        secret=SECRET,
        previous_secret=OTHER_SECRET,
        previous_until_millis=now_ms + 1000,
    )
    during = dict(signed_request(_claimed(endpoint), BODY, now_ms).headers)
    svix.Webhook(OTHER_SECRET).verify(BODY, during)
    svix.Webhook(SECRET).verify(BODY, during)
    after = dict(signed_request(_claimed(endpoint), BODY, now_ms + 1000).headers)
    assert len(after["webhook-signature"].split(" ")) == 1
    with pytest.raises(svix.WebhookVerificationError):
        svix.Webhook(OTHER_SECRET).verify(BODY, after)
