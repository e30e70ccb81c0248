"""Webhook endpoints: which URLs the service refuses to call (SSRF), the body rules, the secret's format, and
the configuration switch; driven in process on the memory store. Refused input changes nothing (a refusal comes
before any write: `GET /webhook-endpoints` is checked where storage is covered, tests/contract)."""

from __future__ import annotations

import base64
from dataclasses import replace
from typing import Any

import pytest

from identity_hosting.settings import ConfigurationError, Settings
from identity_proto import Request, SeededEntropy, Service, ServiceOptions
from identity_proto.context import RequestContext
from identity_proto.errors import KnownError
from identity_proto.flows.webhooks import check_endpoint_url, new_webhook_secret
from tests.support import Harness, Reply, admin_headers, server_headers

PRODUCTION = ServiceOptions(password_rounds=4)
PRODUCTION_ALLOWING_PRIVATE = ServiceOptions(password_rounds=4, webhook_allow_private=True)
DEV = ServiceOptions(password_rounds=4, dev_mode=True)


def _context(options: ServiceOptions, *, host: str = "id.example.com", base_url: str = "") -> RequestContext:
    request = Request("POST", "/api/v1/webhook-endpoints", (("host", host),), scheme="https")
    return RequestContext(
        request=request,
        now_ms=0,
        entropy=SeededEntropy(1),
        request_id="r",
        options=replace(options, base_url=base_url),
        auth=None,
        params=None,
        query=None,
        body=None,
    )


def _refusal(options: ServiceOptions, url: str, **where: str) -> str:
    with pytest.raises(KnownError) as refused:
        check_endpoint_url(_context(options, **where), url)
    assert refused.value.code.name == "WEBHOOK_URL_NOT_ALLOWED"
    assert refused.value.status == 400
    assert refused.value.details is not None
    reason: str = refused.value.details["reason"]
    assert refused.value.message == f"This webhook URL is not allowed: {reason}"
    return reason


PRIVATE_URLS = [
    "http://127.0.0.1:9000/hook",
    "http://127.1.2.3/hook",
    "https://10.0.0.7/hook",
    "https://172.16.0.1/hook",
    "https://192.168.1.10:8443/hook",
    "http://169.254.169.254/latest/meta-data",  # the cloud metadata service
    "http://0.0.0.0:9000/",
    "http://100.64.0.1/",  # carrier-grade NAT
    "http://[::1]:9000/",
    "http://[fd00::1]/",
    "http://[fe80::1]/",
    "http://[::ffff:10.0.0.1]/",  # an IPv4-mapped private address
    "http://224.0.0.1/",
    "http://100.64.0.1/",  # shared address space (CGNAT)
    "http://100.100.100.200/",  # a cloud metadata address, in CGNAT space
]
LOCAL_NAMES = [
    "http://localhost:9000/hook",
    "http://api.localhost/hook",
    "http://redis:6379/",
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://printer.local/",
    "http://router.lan/",
]
PUBLIC_URLS = ["https://hooks.example.com/identity", "http://8.8.8.8:8080/x", "https://[2001:4860:4860::8888]/"]


@pytest.mark.parametrize("url", PRIVATE_URLS)
def test_production_refuses_private_loopback_and_link_local_addresses(url: str) -> None:
    reason = _refusal(PRODUCTION, url)
    assert "non-public address" in reason
    assert "IDENTITY_WEBHOOK_ALLOW_PRIVATE=1" in reason


@pytest.mark.parametrize("url", LOCAL_NAMES)
def test_production_refuses_local_host_names(url: str) -> None:
    reason = _refusal(PRODUCTION, url)
    assert "is a local host name" in reason
    assert "IDENTITY_WEBHOOK_ALLOW_PRIVATE=1" in reason


@pytest.mark.parametrize("url", PUBLIC_URLS)
def test_production_accepts_public_receivers(url: str) -> None:
    assert check_endpoint_url(_context(PRODUCTION), url) is None


@pytest.mark.parametrize("options", [PRODUCTION_ALLOWING_PRIVATE, DEV], ids=["allowed-by-the-operator", "dev-mode"])
@pytest.mark.parametrize("url", PRIVATE_URLS + LOCAL_NAMES)
def test_the_operator_switch_and_dev_mode_allow_private_receivers(options: ServiceOptions, url: str) -> None:
    assert check_endpoint_url(_context(options), url) is None


@pytest.mark.parametrize("options", [PRODUCTION, PRODUCTION_ALLOWING_PRIVATE, DEV], ids=["prod", "allowed", "dev"])
@pytest.mark.parametrize(
    ("url", "where"),
    [
        ("https://id.example.com/api/v1/users", {"host": "id.example.com"}),
        ("http://id.example.com:443/x", {"host": "id.example.com"}),  # another scheme, the same host and port
        ("https://id.example.com/hook", {"host": "other.example", "base_url": "https://id.example.com/auth"}),
        ("http://localhost:8000/hook", {"host": "127.0.0.1:8000"}),  # a loopback name for a loopback service
        ("http://[::1]:8000/hook", {"host": "localhost:8000"}),
    ],
    ids=["host-header", "other-scheme", "base-url", "localhost-for-127", "ipv6-loopback"],
)
def test_the_service_never_calls_itself(options: ServiceOptions, url: str, where: dict[str, str]) -> None:
    assert "points at this service itself" in _refusal(options, url, **where)


def test_dev_mode_accepts_another_port_of_the_same_machine() -> None:
    assert check_endpoint_url(_context(DEV, host="127.0.0.1:8000"), "http://127.0.0.1:9000/hook") is None


# --------------------------------------------------------------------------------------------------------------
# Through the service: the schema and the refusals, before anything is written


def _create(harness: Harness, body: dict[str, Any]) -> Reply:
    return harness.request("POST", "/api/v1/webhook-endpoints", admin_headers(host="id.example.com"), json=body)


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({}, "body.url must be defined"),
        ({"url": "ftp://hooks.example.com/"}, "body.url is not a valid webhook URL: it must be an http or https URL"),
        ({"url": "https://user:pw@hooks.example.com/"}, "must not contain a user name or password"),
        ({"url": "https://hooks.example.com\\@evil.example/"}, "must not contain a backslash"),
        ({"url": "https://" + "a" * 2048 + ".com/"}, "body.url must be at most 2048 characters"),
        ({"url": "https://hooks.example.com/", "event_types": ["user.created", "user.exploded"]}, "user.exploded"),
        ({"url": "https://hooks.example.com/", "event_types": []}, "body.event_types must not be empty"),
        ({"url": "https://hooks.example.com/", "event_types": ["stack.test"]}, "unknown event types: stack.test"),
        ({"url": "https://hooks.example.com/", "description": None}, "body.description cannot be null"),
        ({"url": "https://hooks.example.com/", "secret": "whsec_mine"}, "unknown properties: secret"),
    ],
    ids=["no-url", "ftp", "credentials", "backslash", "long", "unknown-type", "empty-types", "test-type", "null", "x"],
)
def test_bad_bodies_are_schema_errors(body: dict[str, Any], problem: str) -> None:
    refused = _create(Harness(), body)
    assert (refused.status, refused.known_error) == (400, "SCHEMA_ERROR")
    assert problem in refused.json["error"]


def test_a_private_receiver_is_refused_in_production_with_the_reason() -> None:
    refused = _create(Harness(service=Service(PRODUCTION)), {"url": "http://10.1.2.3/hook"})
    assert (refused.status, refused.known_error) == (400, "WEBHOOK_URL_NOT_ALLOWED")
    assert refused.json["details"]["reason"].startswith("10.1.2.3 is a private")


def test_a_patch_to_the_services_own_url_is_refused_before_the_endpoint_is_read() -> None:
    harness = Harness()
    refused = harness.request(
        "PATCH",
        "/api/v1/webhook-endpoints/33333333-3333-4333-8333-333333333333",
        admin_headers(host="id.example.com"),
        json={"url": "https://id.example.com/hook"},
    )
    assert (refused.status, refused.known_error) == (400, "WEBHOOK_URL_NOT_ALLOWED")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/v1/webhook-endpoints"),
        ("POST", "/api/v1/webhook-endpoints"),
        ("GET", "/api/v1/webhook-endpoints/33333333-3333-4333-8333-333333333333"),
        ("POST", "/api/v1/webhook-endpoints/33333333-3333-4333-8333-333333333333/rotate-secret"),
        ("GET", "/api/v1/webhook-endpoints/33333333-3333-4333-8333-333333333333/deliveries"),
        ("POST", "/api/v1/internal/send-test-webhook"),
    ],
)
def test_webhook_routes_are_for_admin_access_only(method: str, path: str) -> None:
    refused = Harness().request(method, path, server_headers(), json={})
    assert (refused.status, refused.known_error) == (401, "INSUFFICIENT_ACCESS_TYPE")


def test_path_parameters_are_checked() -> None:
    harness = Harness()
    bad_id = harness.request("GET", "/api/v1/webhook-endpoints/not-a-uuid", admin_headers())
    bad_message = harness.request(
        "POST",
        "/api/v1/webhook-endpoints/33333333-3333-4333-8333-333333333333/deliveries/1;DROP/replay",
        admin_headers(),
    )
    assert (bad_id.status, bad_id.known_error) == (400, "SCHEMA_ERROR")
    assert (bad_message.status, bad_message.known_error) == (400, "SCHEMA_ERROR")


# --------------------------------------------------------------------------------------------------------------
# The secret and the switch


def test_a_secret_is_whsec_and_the_base64_of_24_random_bytes() -> None:
    secret = new_webhook_secret(SeededEntropy(3))
    assert secret.startswith("whsec_")
    assert len(base64.b64decode(secret.removeprefix("whsec_"), validate=True)) == 24
    assert new_webhook_secret(SeededEntropy(4)) != secret


def test_identity_webhook_allow_private_sets_the_option() -> None:
    production = {
        "IDENTITY_PROJECT_ID": "5f0c6e5e-6a58-4c53-9f4b-3c1f0b8f7a10",
        "IDENTITY_PUBLISHABLE_CLIENT_KEY": "pck_" + "p" * 30,
        "IDENTITY_SECRET_SERVER_KEY": "ssk_" + "s" * 30,
        "IDENTITY_SUPER_SECRET_ADMIN_KEY": "sak_" + "a" * 30,
    }
    assert Settings.from_env(production).service_options().webhook_allow_private is False
    allowed = Settings.from_env({**production, "IDENTITY_WEBHOOK_ALLOW_PRIVATE": "1"})
    assert allowed.service_options().webhook_allow_private is True
    with pytest.raises(ConfigurationError, match="IDENTITY_WEBHOOK_ALLOW_PRIVATE must be 1 or 0"):
        Settings.from_env({**production, "IDENTITY_WEBHOOK_ALLOW_PRIVATE": "yes"})


def test_identity_allow_private_addresses_is_the_one_switch_for_every_outbound_request() -> None:
    production = {
        "IDENTITY_PROJECT_ID": "5f0c6e5e-6a58-4c53-9f4b-3c1f0b8f7a10",
        "IDENTITY_PUBLISHABLE_CLIENT_KEY": "pck_" + "p" * 30,
        "IDENTITY_SECRET_SERVER_KEY": "ssk_" + "s" * 30,
        "IDENTITY_SUPER_SECRET_ADMIN_KEY": "sak_" + "a" * 30,
    }
    assert Settings.from_env(production).may_reach_private_addresses is False
    for name in ("IDENTITY_ALLOW_PRIVATE_ADDRESSES", "IDENTITY_WEBHOOK_ALLOW_PRIVATE"):  # the new name, the former
        allowed = Settings.from_env({**production, name: "1"})
        assert allowed.may_reach_private_addresses is True
        assert allowed.service_options().webhook_allow_private is True
    assert Settings.from_env({}).may_reach_private_addresses is True  # dev mode
    with pytest.raises(ConfigurationError, match="IDENTITY_ALLOW_PRIVATE_ADDRESSES must be 1 or 0"):
        Settings.from_env({**production, "IDENTITY_ALLOW_PRIVATE_ADDRESSES": "yes"})
