"""The schemas package's face: every name it re-exports is loaded on first use from the module `_LAZY` names, every
model a route names exists and is of its kind, and a route that takes no input refuses one in the very words a model
without fields would."""

from __future__ import annotations

import importlib
from typing import Any, ClassVar

import pytest

import identity_proto.schemas as schemas
from identity_proto.auth import AccessType
from identity_proto.routes import ROUTES, TESTING_ROUTES
from identity_proto.schemas import Body, Query, validate_model, validate_nothing
from identity_proto.schemas.problems import Validated
from tests.support import Harness, client_headers, server_headers


def test_every_name_the_package_exports_is_defined_where_it_says() -> None:
    eager = {"Validated", "schema_error", "validate_nothing"}
    assert set(schemas.__all__) == set(schemas._HOMES) | eager
    for module, names in schemas._LAZY.items():
        defining = importlib.import_module(f"identity_proto.schemas.{module}")
        for name in names:
            assert getattr(schemas, name) is getattr(defining, name), name


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NoSuchBody"):
        _ = schemas.NoSuchBody  # type: ignore[attr-defined]


@pytest.mark.parametrize("route", ROUTES + TESTING_ROUTES, ids=lambda r: f"{r.method} {r.pattern}")
def test_every_model_a_route_names_exists_and_is_of_its_kind(route: Any) -> None:
    for access in (None, *AccessType):
        body = route.body_model(access)
        assert body is None or issubclass(body, Body)
    for model in (route.query, route.params):
        assert model is None or issubclass(model, Query)


class _NoFieldsBody(Body):
    """What the routes that take no body used to validate it with (so no body is what it expects)."""

    body_required: ClassVar[bool] = False


class _NoFieldsQuery(Query):
    """What the routes that take no query used to validate it with."""


NOT_TAKEN = [
    None,
    {},
    {"a": 1},
    {"b": None, "a": "x", "c": [1]},
    {"display_name": "Q"},
    [],
    [1, 2],
    "text",
    b"bytes",
    0,
    True,
]


@pytest.mark.parametrize("data", NOT_TAKEN, ids=repr)
@pytest.mark.parametrize(("model", "location"), [(_NoFieldsBody, "body"), (_NoFieldsQuery, "query")])
def test_an_input_a_route_does_not_take_is_refused_as_a_model_without_fields_refuses_it(
    data: Any, model: type[Body] | type[Query], location: str
) -> None:
    by_model: Validated[Any] = validate_model(model, data, location)
    by_rule = validate_nothing(data, location)
    assert by_rule.problems == by_model.problems
    assert by_rule.ok == by_model.ok
    assert by_rule.value is None


def test_inputs_the_original_takes_and_ignores_are_accepted() -> None:
    """The original's routes of a resource share its list's query, and its DELETEs take any body (`yupMixed`)."""
    h = Harness()
    user = h.request("POST", "/api/v1/users", server_headers(), json={}).json["id"]
    anonymous = h.request("POST", "/api/v1/auth/anonymous/sign-up", client_headers(), json={}).json["user_id"]
    read = h.request("GET", f"/api/v1/users/{anonymous}", server_headers(), query="include_anonymous=true")
    assert (read.status, read.json["is_anonymous"]) == (200, True)
    team = h.request("POST", "/api/v1/teams", server_headers(), json={"display_name": "T"}).json["id"]
    deleted = h.request("DELETE", f"/api/v1/teams/{team}", server_headers(), json={"display_name": "ignored"})
    assert (deleted.status, deleted.json) == (200, {"success": True})
    _first, second = (
        h.request("POST", "/api/v1/auth/sessions", server_headers(), json={"user_id": user}).json for _ in range(2)
    )
    me = client_headers(**{"x-service-access-token": second["access_token"]})
    listed = h.request("GET", "/api/v1/auth/sessions", me, query=f"user_id={user}").json["items"]
    other = next(s["id"] for s in listed if not s["is_current_session"])
    gone = h.request("DELETE", f"/api/v1/auth/sessions/{other}", me, query=f"user_id={user}")
    assert gone.status == 200
    refused = h.request("DELETE", f"/api/v1/auth/sessions/{other}", me, query="user_id=nope")
    assert refused.known_error == "SCHEMA_ERROR"
