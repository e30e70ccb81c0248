"""`quick_init`: the cheaper frozen `__init__` behaves exactly as the one dataclasses writes."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from identity_proto import effects, records
from identity_proto.effects import Effect
from identity_proto.quickinit import quick_init


def _patched_classes() -> list[type]:
    classes = [records.RiskScores, records.User, records.Session, records.Team, records.Membership]
    pending: list[type] = [Effect]
    while pending:
        for sub in pending.pop().__subclasses__():
            pending.append(sub)
            if dataclasses.is_dataclass(sub) and "__init__" in vars(sub) and sub not in classes:
                classes.append(sub)
    return classes


@pytest.mark.parametrize("cls", _patched_classes(), ids=lambda cls: cls.__name__)
def test_the_quick_init_has_the_signature_dataclasses_wrote(cls: type) -> None:
    fields = dataclasses.fields(cls)
    if fields:
        assert cls.__init__.__code__.co_names[:1] == ("_set",), f"{cls.__name__} kept the slow __init__"
    parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]
    assert [p.name for p in parameters] == [f.name for f in fields]
    for parameter, f in zip(parameters, fields, strict=True):
        if f.default is not dataclasses.MISSING:
            assert parameter.default is f.default
        elif f.default_factory is dataclasses.MISSING:
            assert parameter.default is inspect.Parameter.empty


def test_defaults_factories_post_init_and_frozenness_are_kept() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Sample:
        a: int
        b: list[int] = dataclasses.field(default_factory=list)
        c: str = "c"

        def __post_init__(self) -> None:
            if self.a < 0:
                raise ValueError("a < 0")

    expected = [Sample(1), Sample(2, [3], "x"), Sample(a=4, c="y")]
    quick_init(Sample)
    assert [Sample(1), Sample(2, [3], "x"), Sample(a=4, c="y")] == expected
    assert Sample(1).b is not Sample(1).b  # a fresh default from the factory each time
    with pytest.raises(ValueError, match="a < 0"):
        Sample(-1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        Sample(1).a = 2  # type: ignore[misc]
    with pytest.raises(TypeError):
        Sample()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Sample(1, d=2)  # type: ignore[call-arg]


def test_effects_made_by_flows_still_validate_their_inputs() -> None:
    # PatchProject's __post_init__ turns loose pairs into a validated change set, and refuses unknown fields.
    update = effects.PatchProject("p", config=(("magic_link_enabled", True),))  # type: ignore[arg-type]
    assert update.config.as_dict() == {"magic_link_enabled": True}
    with pytest.raises(TypeError, match="cannot set"):
        effects.PatchProject("p", config=(("no_such_field", "x"),))  # type: ignore[arg-type]
