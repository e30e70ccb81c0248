"""The OpenAPI document: generated from the route table and the request models, so it lists every operation."""

from __future__ import annotations

import json
from typing import Any

from identity_proto import Service, ServiceOptions
from identity_proto.routes import MOCK_OAUTH_ROUTES, ROUTES, TESTING_ROUTES
from tests.support import Harness


def _document(dev_mode: bool) -> dict[str, Any]:
    reply = Harness(service=Service(ServiceOptions(dev_mode=dev_mode))).request("GET", "/api/v1/openapi.json")
    assert reply.status == 200
    return dict(reply.json)


def _operations(document: dict[str, Any]) -> set[tuple[str, str]]:
    return {(method.upper(), path) for path, item in document["paths"].items() for method in item}


def test_every_route_is_an_operation_and_test_only_routes_only_in_dev_mode() -> None:
    production, dev = _document(False), _document(True)
    assert production["openapi"] == "3.1.0"
    assert _operations(production) == {(r.method, r.pattern) for r in ROUTES}
    assert _operations(dev) == {(r.method, r.pattern) for r in ROUTES + TESTING_ROUTES + MOCK_OAUTH_ROUTES}
    assert not any("/mock-oauth/" in path for path in production["paths"])  # mock OAuth provider: dev only
    assert not any("/testing/" in path for path in production["paths"])


def test_every_reference_resolves_and_request_bodies_are_the_validating_models() -> None:
    document = _document(True)
    text = json.dumps(document)
    schemas = document["components"]["schemas"]
    for name in {part.split('"')[0] for part in text.split("#/components/schemas/")[1:]}:
        assert name in schemas, name
    body = document["paths"]["/api/v1/users/{user_id}"]["patch"]["requestBody"]["content"]["application/json"]
    assert body["schema"] == {"$ref": "#/components/schemas/ServerUserUpdateBody"}
    assert schemas["ServerUserUpdateBody"]["additionalProperties"] is False
    assert "server_metadata" not in schemas["ClientUserUpdateBody"]["properties"]


def test_operations_say_who_may_call_them_and_what_they_answer() -> None:
    paths = _document(False)["paths"]
    create_user = paths["/api/v1/users"]["post"]
    assert "201" in create_user["responses"]
    assert create_user["security"] == [
        {"AccessType": [], "ProjectId": [], "SecretServerKey": []},
        {"AccessType": [], "ProjectId": [], "SuperSecretAdminKey": []},
    ]
    assert "security" not in paths["/api/v1/projects/{project_id}/.well-known/jwks.json"]["get"]
    token = paths["/api/v1/auth/oauth/token"]["post"]["requestBody"]["content"]
    assert list(token) == ["application/x-www-form-urlencoded"]
    listing = {p["name"]: p for p in paths["/api/v1/users"]["get"]["parameters"]}
    assert listing["limit"]["in"] == "query"
    assert listing["limit"]["required"] is False
