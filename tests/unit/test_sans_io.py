"""The core is sans-io: it imports no backend or host, and handles requests with no I/O at all."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from identity_proto import MalformedRequest, Request, Response, SeededEntropy, Service
from identity_proto.effects import HitRateLimits, LoadProject, StorageEffect
from identity_proto.flows.projects import new_project
from identity_proto.records import Project

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "identity_proto"

# Nothing in the core may reach for the network, the disk, processes, the wall clock or global randomness, nor
# import a backend or a host. (`asyncio` is imported lazily by `arun` only, never at module level.)
FORBIDDEN_TOP_LEVEL = {
    "asgi_app",
    "backends",
    "identity_hosting",
    "redis",
    "socket",
    "ssl",
    "select",
    "selectors",
    "asyncio",
    "subprocess",
    "multiprocessing",
    "time",
    "secrets",
    "os",
    "urllib.request",
    "http.client",
    "smtplib",
}


def _module_level_imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", sorted(CORE.rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_core_module_imports_no_io_backend_or_host(path: Path) -> None:
    imported = _module_level_imports(path)
    bad = {name for name in imported if name in FORBIDDEN_TOP_LEVEL or name.split(".")[0] in FORBIDDEN_TOP_LEVEL}
    assert not bad, f"{path.name} imports {bad}"


def test_a_flow_driven_by_hand_with_next_and_send() -> None:
    service = Service()
    project, keys = new_project(
        SeededEntropy(1), 1_000, "Hand driven", project_id="00000000-0000-4000-8000-00000000000a"
    )
    request = Request(
        "GET",
        "/api/v1/projects/current",
        (
            ("x-service-access-type", "server"),
            ("x-service-project-id", project.id),
            ("x-service-secret-server-key", keys.secret_server_key),
        ),
    )
    flow = service.handle(request, 2_000, SeededEntropy(2))
    assert next(flow) == LoadProject(project.id)
    rate_limit = flow.send(project)
    assert isinstance(rate_limit, HitRateLimits)
    assert [hit.key for hit in rate_limit.hits] == [f"rl:project_server:{project.id}:0"]
    with pytest.raises(StopIteration) as done:
        flow.send((1,))
    response: Response = done.value.value
    assert response.status == 200
    assert b'"display_name":"Hand driven"' in response.body


def test_a_storage_failure_thrown_into_a_flow_becomes_503_without_internals() -> None:
    from identity_proto import StorageUnavailable

    flow = Service().handle(
        Request(
            "GET", "/api/v1/projects/current", (("x-service-access-type", "client"), ("x-service-project-id", "p"))
        ),
        0,
        SeededEntropy(3),
    )
    assert isinstance(next(flow), StorageEffect)
    with pytest.raises(StopIteration) as done:
        flow.throw(StorageUnavailable("connection refused to 10.0.0.1:6379 password=hunter2"))
    response: Response = done.value.value
    assert response.status == 503
    assert response.header("x-service-known-error") == "STORAGE_UNAVAILABLE"
    assert b"hunter2" not in response.body
    assert b"10.0.0.1" not in response.body
    assert response.header("x-service-request-id") is not None


def test_a_bug_becomes_500_with_a_request_id_and_no_internals() -> None:
    flow = Service().handle(
        Request(
            "GET", "/api/v1/projects/current", (("x-service-access-type", "client"), ("x-service-project-id", "p"))
        ),
        0,
        SeededEntropy(3),
    )
    next(flow)
    with pytest.raises(StopIteration) as done:
        flow.throw(KeyError("secret internal detail"))
    response: Response = done.value.value
    request_id = response.header("x-service-request-id")
    assert response.status == 500
    assert request_id is not None
    assert request_id.encode() in response.body
    assert b"secret internal detail" not in response.body
    assert b"KeyError" not in response.body


NO_IO_SCRIPT = textwrap.dedent(
    """
    import sys
    sys.modules["asyncio"] = None  # no event loop can even be imported
    import identity_proto
    from identity_proto import Request, SeededEntropy, Service
    from identity_proto.effects import Admission, Committed, HitRateLimits, LoadProject
    from identity_proto.flows.projects import new_project

    # A route's models are built on its first use, which imports modules (reads files): build them all first, as
    # a serving host does at start-up.
    service = Service()
    service.prepare()
    project, keys = new_project(SeededEntropy(1), 1, "P", project_id="00000000-0000-4000-8000-00000000000b")
    headers = (("x-service-access-type", "admin"), ("x-service-project-id", project.id),
               ("x-service-super-secret-admin-key", keys.super_secret_admin_key))

    FORBIDDEN = ("socket.", "open", "subprocess.", "os.system", "os.exec", "os.spawn", "os.fork", "os.posix_spawn",
                 "urllib.", "http.", "ctypes.", "time.sleep")
    def audit(event, args):
        if event.startswith(FORBIDDEN):
            raise RuntimeError(f"I/O attempted by the core: {event} {args!r}")
    sys.addaudithook(audit)

    for method, path, body in (
        ("GET", "/api/v1/projects/current", b""),
        ("PATCH", "/api/v1/projects/current", b'{"display_name": "Q", "config": {"sign_up_enabled": false}}'),
        ("GET", "/api/v1/nowhere", b""),
    ):
        request = Request(method, path, headers + (("content-type", "application/json"),), body)
        flow = service.handle(request, 2, SeededEntropy(2))
        try:
            effect = next(flow)
            while True:
                if isinstance(effect, LoadProject):
                    effect = flow.send(project)
                elif isinstance(effect, HitRateLimits):
                    effect = flow.send(tuple(1 for _ in effect.hits))
                else:  # the Commit of a PatchProject behind the counters (Admit): answer as a store would
                    import dataclasses
                    (patch,) = effect.effect.writes
                    config = dataclasses.replace(project.config, **dict(patch.config))
                    updated = dataclasses.replace(project, display_name=patch.display_name, config=config)
                    counts = tuple(1 for _ in effect.counter.hits)
                    effect = flow.send(Admission(counts, True, Committed((updated,))))
        except StopIteration as done:
            print(method, path, done.value.status)
    """
)


def test_the_core_handles_requests_with_sockets_files_and_event_loop_unavailable() -> None:
    result = subprocess.run(
        [sys.executable, "-c", NO_IO_SCRIPT], capture_output=True, text=True, cwd=ROOT, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "GET /api/v1/projects/current 200",
        "PATCH /api/v1/projects/current 200",
        "GET /api/v1/nowhere 404",
    ]


def test_project_records_are_built_from_inputs_only() -> None:
    a, keys_a = new_project(SeededEntropy(5), 10, "X")
    b, keys_b = new_project(SeededEntropy(5), 10, "X")
    assert (a, keys_a) == (b, keys_b)
    assert isinstance(a, Project)


# --------------------------------------------------------------------------------------------------------------
# Requests and responses check their headers (all of a message's headers in one pass)

_BAD_HEADERS = [
    (("x-a", "1"), ("X-Upper", "2")),  # names are lower-case
    (("x-a", "1"), ("", "2")),  # names are not empty
    (("x-a\nx-b", "1"),),  # a newline inside a name must not read as two names
    (("x a", "1"),),  # not a token
    (("x-a", "1"), ("x-b", "line\r\nbreak")),
    (("x-a", "nul\x00"),),
    (("x-a", "del\x7f"),),
    (("x-a", "esc\x1b"),),
]


@pytest.mark.parametrize("headers", _BAD_HEADERS)
def test_malformed_headers_cannot_form_a_request_or_a_response(headers: tuple[tuple[str, str], ...]) -> None:
    from identity_proto import MalformedRequest

    with pytest.raises(MalformedRequest):
        Request("GET", "/", headers)
    with pytest.raises(ValueError, match="invalid response header"):
        Response(200, headers)
    with pytest.raises(ValueError, match="invalid response header"):
        Response(200).with_headers(headers)


def test_well_formed_headers_are_kept_and_repeats_joined() -> None:
    headers = (("x-a", "tab\tinside"), ("x-b", "é ünïcode"), ("x-a", "again"), ("x-c", ""))
    request = Request("GET", "/", headers)
    assert (request.header("x-a"), request.header("x-b"), request.header("x-c")) == (
        "tab\tinside, again",
        "é ünïcode",
        "",
    )
    response = Response(200, headers[:2]).with_headers((("x-request-id", "abc"),))
    assert response.headers == (*headers[:2], ("x-request-id", "abc"))
    assert response == Response(200, (*headers[:2], ("x-request-id", "abc")))


# --------------------------------------------------------------------------------------------------------------
# Random strings: each random byte b is alphabet[b % size]


class _Bytes:
    """Entropy that hands out the given bytes."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def token_bytes(self, n: int) -> bytes:
        out, self.data = self.data[:n], self.data[n:]
        assert len(out) == n
        return out


def test_random_strings_map_each_byte_to_the_alphabet() -> None:
    from identity_proto.tokens import CROCKFORD_ALPHABET, random_string

    every_byte = bytes(range(256))
    assert random_string(_Bytes(every_byte), 256) == CROCKFORD_ALPHABET * 8  # uniform: each letter 8 times
    assert random_string(_Bytes(every_byte), 256, "0123456789abcdef") == "0123456789abcdef" * 16
    with pytest.raises(ValueError, match="divide 256"):
        random_string(_Bytes(every_byte), 4, "abc")
    with pytest.raises(ValueError, match="ASCII"):
        random_string(_Bytes(every_byte), 4, "äbcd")
    seeded = random_string(SeededEntropy(7), 45)
    assert seeded == random_string(SeededEntropy(7), 45)
    assert len(seeded) == 45
    assert set(seeded) <= set(CROCKFORD_ALPHABET)


def test_signed_tokens_are_what_joserfc_jwt_encode_makes() -> None:
    # SigningKey.sign encodes the claims with orjson and has joserfc sign the JWS; the header and payload must be
    # byte for byte those of joserfc's own jwt.encode (ECDSA signatures differ run to run, so those are verified).
    from joserfc import jwt

    from identity_proto.tokens import SigningKey, new_signing_key

    key = SigningKey.from_scalar(new_signing_key(SeededEntropy(3)))
    claims = {
        "sub": "4a8433be-39e8-4501-af0d-b2961619807c",
        "iat": 1795305023,
        "exp": 1795305623,
        "aud": "project:restricted",
        "name": "Zoë “quoted” \\ back\nslash",
        "email": None,
        "email_verified": True,
        "restricted_reason": {"type": "email_not_verified"},
        "list": [1, "two", False],
    }
    ours = key.sign(claims)
    theirs = jwt.encode({"alg": "ES256", "kid": key.kid, "typ": "JWT"}, dict(claims), key.key)
    assert ours.split(".")[:2] == theirs.split(".")[:2]
    assert key.verify(ours) == claims
    assert dict(jwt.decode(ours, key.key, algorithms=["ES256"]).claims) == claims
    assert key.verify(SigningKey.from_scalar(new_signing_key(SeededEntropy(4))).sign(claims)) is None


def test_records_replaced_equals_dataclasses_replace() -> None:
    import dataclasses

    from identity_proto.records import Session, User, replaced

    user = User(id="u", signed_up_at_millis=1, last_active_at_millis=2, display_name="A", client_metadata={"k": 1})
    for changes in ({}, {"display_name": None}, {"primary_email": "a@example.com", "primary_email_verified": True}):
        assert replaced(user, changes) == dataclasses.replace(user, **changes)
    session = Session("s", "u", "hash", 1, 2, 3)
    assert replaced(session, {"user_id": "v"}) == dataclasses.replace(session, user_id="v")
    with pytest.raises(TypeError, match="no field"):
        replaced(user, {"not_a_field": 1})


def test_headers_of_trusted_responses_are_checked_where_they_are_made() -> None:
    from identity_proto.http import check_headers
    from identity_proto.render import json_response

    with pytest.raises(ValueError, match="invalid response headers"):
        check_headers((("x-ok", "fine"), ("x-bad", "line\r\nbreak")))
    with pytest.raises(ValueError, match="invalid response header"):
        json_response(200, {}, (("x-bad", "line\nbreak"),))
    assert json_response(200, {"a": 1}).headers[0] == ("content-type", "application/json; charset=utf-8")


_HEADER_BYTES = st.binary(max_size=12) | st.sampled_from([b"x-service-access-type", b"Content-Type", b"a b", b""])


@given(st.lists(st.tuples(_HEADER_BYTES, st.binary(max_size=16)), max_size=5))
def test_requests_from_wire_bytes_are_checked_as_the_constructor_checks_them(raw: list[tuple[bytes, bytes]]) -> None:
    # from_wire checks the raw bytes once; it must accept and refuse exactly what the constructor does.
    decoded = tuple((n.decode("latin-1").lower(), v.decode("latin-1")) for n, v in raw)
    try:
        expected: Request | None = Request("GET", "/p", decoded)
    except MalformedRequest:
        expected = None
    try:
        got: Request | None = Request.from_wire("GET", "/p", raw)
    except MalformedRequest:
        got = None
    assert got == expected
    if got is not None and expected is not None:
        assert got.headers == expected.headers
        assert all(got.header(name) == expected.header(name) for name, _ in decoded)
