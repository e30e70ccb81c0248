"""The OpenAPI document: generated from the route table and the request models, so it lists every operation."""

from __future__ import annotations

import json
from typing import Any

import jsonschema_rs

from identity_proto import Service, ServiceOptions
from identity_proto.routes import MOCK_OAUTH_ROUTES, ROUTES, TESTING_ROUTES
from tests.support import Harness, admin_headers, client_headers, server_headers


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


# ----------------------------------------------------------------------------------------------------------------
# Responses: every JSON answer has a real schema, and what the renderers send conforms to it.

ALL_ROUTES = ROUTES + TESTING_ROUTES + MOCK_OAUTH_ROUTES


def _validator(document: dict[str, Any], schema: dict[str, Any]) -> Any:
    return jsonschema_rs.validator_for({**schema, "components": document["components"]})


def test_every_json_success_has_a_schema_and_redirects_say_so() -> None:
    document = _document(True)
    empty = []
    for route in ALL_ROUTES:
        responses = document["paths"][route.pattern][route.method.lower()]["responses"]
        successes = {status: r for status, r in responses.items() if status.startswith(("2", "3"))}
        assert successes, (route.method, route.pattern)
        for status, response in successes.items():
            if status.startswith("3"):
                assert response["headers"]["location"]["required"] is True
                continue
            for media_type, content in response["content"].items():
                if media_type == "application/json" and content["schema"] in ({}, {"type": "object"}):
                    empty.append((route.method, route.pattern))
    assert empty == []


def test_rendered_objects_of_every_access_type_conform_to_the_document() -> None:
    """The renderers and the document agree: objects of every access type validate against their component."""
    document = _document(True)
    harness = Harness()
    with_team = {"display_name": "Team"}
    for access, headers in (("client", client_headers), ("server", server_headers), ("admin", admin_headers)):
        project = harness.request("GET", "/api/v1/projects/current", headers())
        name = "AdminProject" if access == "admin" else "ClientProject"
        assert _validator(document, _ref(name)).is_valid(project.json), (access, project.json)
    user = harness.request("POST", "/api/v1/users", server_headers(), json={"primary_email": "ada@example.com"}).json
    team = harness.request(
        "POST", "/api/v1/teams", server_headers(), json={**with_team, "creator_user_id": user["id"]}
    ).json
    harness.request("PATCH", f"/api/v1/users/{user['id']}", server_headers(), json={"selected_team_id": team["id"]})
    tokens = harness.request("POST", "/api/v1/auth/sessions", server_headers(), json={"user_id": user["id"]}).json
    client = client_headers(**{"x-service-access-token": tokens["access_token"]})
    for headers in (client, server_headers()):
        me = harness.request("GET", "/api/v1/users/me" if headers is client else f"/api/v1/users/{user['id']}", headers)
        assert _validator(document, _ref("User")).is_valid(me.json), me.json
        assert ("server_metadata" in me.json) is (headers is not client)
        got = harness.request("GET", f"/api/v1/teams/{team['id']}", headers)
        assert _validator(document, _ref("Team")).is_valid(got.json), got.json
        profile = harness.request("GET", f"/api/v1/team-member-profiles/{team['id']}/{user['id']}", headers)
        assert _validator(document, _ref("TeamMemberProfile")).is_valid(profile.json), profile.json
    # a closed object: a field the document does not list is a violation
    assert not _validator(document, _ref("Team")).is_valid({**team, "extra": 1})


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


# ----------------------------------------------------------------------------------------------------------------
# 405 and required bodies: the document and the service agree.


def test_a_405_for_an_unknown_method_names_the_allowed_methods() -> None:
    harness = Harness()
    for method in ("TRACE", "QUERY", "PUT"):
        reply = harness.request(method, "/api/v1/users/me", client_headers())
        assert reply.status == 405, method
        assert reply.known_error == "METHOD_NOT_ALLOWED"
        assert reply.headers["allow"] == "DELETE, GET, PATCH", method
    unknown_path = harness.request("TRACE", "/api/v1/no-such-thing", client_headers())
    assert unknown_path.status == 405  # the method is judged first, as the original does
    assert unknown_path.headers["allow"] == "DELETE, GET, OPTIONS, PATCH, POST, PUT"


def test_a_required_body_missing_is_a_schema_error_as_the_document_says() -> None:
    harness = Harness()
    document = _document(True)
    for method, path, headers in (
        ("POST", "/api/v1/users", server_headers()),
        ("PATCH", "/api/v1/users/me", client_headers()),
        ("PATCH", "/api/v1/projects/current", admin_headers()),
    ):
        assert document["paths"][path][method.lower()]["requestBody"]["required"] is True
        reply = harness.request(method, path, headers)
        assert reply.status == 400, (method, path, reply.body)
        assert reply.known_error == "SCHEMA_ERROR"
        assert "body must be defined" in reply.json["error"]
    # `{}` is a body: a user with no fields
    assert harness.request("POST", "/api/v1/users", server_headers(), json={}).status == 201
    # a DELETE that takes and ignores a body does not require one
    assert document["paths"]["/api/v1/teams/{team_id}"]["delete"]["requestBody"]["required"] is False


def test_operations_list_the_known_errors_they_can_answer() -> None:
    """Per status, the codes an operation can answer: the pipeline's, its flow's, and those of a literal route
    that answers some of its paths; plain-text refusals where the flow answers them."""
    paths = _document(True)["paths"]
    create = paths["/api/v1/users"]["post"]["responses"]
    assert "SCHEMA_ERROR" in create["400"]["headers"]["x-service-known-error"]["schema"]["enum"]
    assert "USER_EMAIL_ALREADY_EXISTS" in create["409"]["headers"]["x-service-known-error"]["schema"]["enum"]
    assert "INSUFFICIENT_ACCESS_TYPE" in create["401"]["headers"]["x-service-known-error"]["schema"]["enum"]
    # DELETE /users/me answers DELETE /users/{user_id} with user_id `me`
    delete = paths["/api/v1/users/{user_id}"]["delete"]["responses"]
    assert "CLIENT_USER_DELETION_NOT_ENABLED" in delete["400"]["headers"]["x-service-known-error"]["schema"]["enum"]
    # "Contact channel not found" is a plain-text 400
    channel = paths["/api/v1/contact-channels/{user_id}/{contact_channel_id}"]["patch"]["responses"]
    assert "text/plain" in channel["400"]["content"]
    # a JSON body's code is one of the listed ones
    schema = create["409"]["content"]["application/json"]["schema"]
    document = _document(True)
    assert _validator(document, schema).is_valid({"code": "USER_EMAIL_ALREADY_EXISTS", "error": "taken"})
    assert not _validator(document, schema).is_valid({"code": "TEAM_NOT_FOUND", "error": "no"})


def test_a_path_parameter_never_names_a_literal_route() -> None:
    """`/users/me` is its own operation: `/users/{user_id}` with `me` would be answered by it, so the document
    leaves `me` out of that parameter (literal paths are matched first, whatever the method)."""
    paths = _document(True)["paths"]
    (user_id,) = (p for p in paths["/api/v1/users/{user_id}"]["get"]["parameters"] if p["in"] == "path")
    assert user_id["schema"]["not"] == {"enum": ["me"]}
    (key_id,) = (p for p in paths["/api/v1/user-api-keys/{api_key_id}"]["get"]["parameters"] if p["in"] == "path")
    assert key_id["schema"]["not"] == {"enum": ["check"]}
