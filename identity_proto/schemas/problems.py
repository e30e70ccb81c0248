"""What validating one input gives (a value or its problem lines), the wording problems share, the SCHEMA_ERROR they
become, and the check of an input a route does not take.

Free of pydantic on purpose: a route that takes no query or no body is checked here, so answering it needs no
model built and pydantic not even imported (importing it costs more CPU than the rest of a first response).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from identity_proto.errors import ErrorCode, KnownError
from identity_proto.quickinit import quick_init

if TYPE_CHECKING:
    from dataclasses import dataclass
else:
    from identity_proto.quickinit import dataclass  # methods written on first use


V = TypeVar("V")

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def is_uuid(value: str) -> bool:
    """Whether `value` is a UUID in canonical lower-case form."""
    return _UUID.match(value) is not None


@dataclass(frozen=True, slots=True)
class Validated(Generic[V]):
    """What validating one input gave: the model (`value`), or the problem lines (`problems`, never empty)."""

    value: V | None = None
    problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """Whether the input was valid (`value` is set)."""
        return not self.problems


quick_init(Validated)  # made per request (identity_proto.quickinit)


def schema_error(method: str, path: str, lines: Sequence[str]) -> KnownError:
    """The SCHEMA_ERROR for these problem lines, worded as the original words it."""
    message = f"Request validation failed on {method} {path}:\n" + "\n".join(f"  - {line}" for line in lines)
    return KnownError(ErrorCode.SCHEMA_ERROR, details={"message": message})


def not_an_object(location: str) -> str:
    """The problem line of an input (body, query) that is not a JSON object."""
    return f"{location} must be an object"


def unknown_properties(parent: str, names: Iterable[str]) -> str:
    """The problem line of keys no field has, at `parent` (reference §0.1: unknown keys are never dropped)."""
    return f"{parent} contains unknown properties: {', '.join(names)}"


_NOTHING: Validated[None] = Validated(None)


def validate_nothing(data: Any, location: str) -> Validated[None]:
    """The input of a route that takes none (its query or body): absent or `{}`, whose value is None; anything else
    has the problems a model without fields that forbids unknown keys would give (`validate_model`), in the same
    words (tests/unit/test_schemas.py compares the two)."""
    if data is None or data == {}:
        return _NOTHING
    if not isinstance(data, dict):
        return Validated(problems=(not_an_object(location),))
    return Validated(problems=(unknown_properties(location, map(str, data)),))
