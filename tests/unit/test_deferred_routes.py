"""A route table may name its flows and models without importing them (`identity_proto.routing.Deferred`): the router
imports a route's when a request first reaches it, and answers 405 and preflights for it before then."""

from __future__ import annotations

import pytest

from identity_proto import routes
from identity_proto.errors import ErrorCode, KnownError
from identity_proto.routing import Deferred, Route, Router, deferred_module
from identity_proto.schemas import ClientUserUpdateBody, ListUsersQuery, ServerUserUpdateBody, UserIdParams


def _table() -> tuple[Route, ...]:
    users = deferred_module("identity_proto.flows.users")
    body = {"client": Deferred("identity_proto.schemas", "ClientUserUpdateBody"), "server": ServerUserUpdateBody}
    return (
        Route("GET", "/users", users.list_users, query=Deferred("identity_proto.schemas", "ListUsersQuery")),
        Route("PATCH", "/users/{user_id}", users.update_user, body=body, params=UserIdParams),  # type: ignore[arg-type]
        Route("GET", "/users/{user_id}", users.get_user),
    )


def test_a_route_is_resolved_by_its_first_match_and_then_found_as_is() -> None:
    from identity_proto.flows import users

    router = Router(_table())
    assert all(route.deferred for route in router.routes)
    first, params, allowed = router.match("GET", "/users")
    assert (first.flow, first.query, params, allowed) == (users.list_users, ListUsersQuery, {}, ("GET",))
    assert not first.deferred
    again, _, _ = router.match("GET", "/users/")
    assert again is first
    patch, params, allowed = router.match("PATCH", "/users/u1")
    assert params == {"user_id": "u1"}
    assert allowed == ("GET", "PATCH")
    assert patch.body == {"client": ClientUserUpdateBody, "server": ServerUserUpdateBody}
    assert patch.params is UserIdParams


def test_405_and_preflights_answer_for_routes_not_resolved_yet() -> None:
    router = Router(_table())
    assert router.match("OPTIONS", "/users/u1") == (None, {"user_id": "u1"}, ("GET", "PATCH"))
    assert router.allowed("/users") == ("GET",)
    with pytest.raises(KnownError) as refused:
        router.match("DELETE", "/users/u1")
    assert refused.value.code is ErrorCode.METHOD_NOT_ALLOWED
    assert all(route.deferred for route in router.routes)


def test_resolving_the_table_imports_every_route_s_and_keeps_its_order() -> None:
    router = Router(_table())
    table = router.resolve()
    assert router.routes is table
    assert [(r.method, r.pattern) for r in table] == [(r.method, r.pattern) for r in _table()]
    assert not any(route.deferred for route in table)
    assert router.match("GET", "/users/u1")[0] is table[2]


def test_a_route_table_s_public_names_hold_its_flows_and_models_imported() -> None:
    production = routes.route_table(dev_mode=False, compat=False)
    assert tuple(route.resolved() for route in production) == routes.ROUTES
    assert not any(route.deferred for route in routes.ROUTES + routes.TESTING_ROUTES + routes.MOCK_OAUTH_ROUTES)
    assert not any(route.deferred for route in routes.COMPAT_ROUTES)
    assert any(route.deferred for route in routes.route_table(dev_mode=True, compat=True))
    with pytest.raises(AttributeError):
        routes.NO_SUCH_TABLE  # noqa: B018


def test_a_deferred_name_that_does_not_exist_fails_at_its_first_match() -> None:
    router = Router((Route("GET", "/x", deferred_module("identity_proto.flows.users").no_such_flow),))
    with pytest.raises(AttributeError):
        router.match("GET", "/x")
