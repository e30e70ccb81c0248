"""`quick_init`: the cheaper frozen `__init__` behaves exactly as the one dataclasses writes; and `dataclass`, whose
frozen, slotted classes get their methods written on first use, gives classes that behave exactly as dataclasses'."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from identity_proto import effects, records
from identity_proto.effects import Effect
from identity_proto.quickinit import dataclass, quick_init, write_now


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
    write_now(cls)  # what its first instance does
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


def _both(namespace: dict[str, object]) -> tuple[type, type]:
    """The same class body made by `dataclasses.dataclass` and by `dataclass` (frozen, slotted)."""
    made = []
    for decorate in (dataclasses.dataclass(frozen=True, slots=True), dataclass(frozen=True, slots=True)):
        made.append(decorate(type("Sample", (), dict(namespace))))
    return made[0], made[1]


SAMPLE = {
    "__doc__": "A sample.",
    "__annotations__": {"a": "int", "b": "list[int]", "c": "str", "d": "int"},
    "b": dataclasses.field(default_factory=list),
    "c": "c",
    "d": dataclasses.field(default=0, repr=False, compare=False),
}


def test_a_deferred_class_behaves_as_the_one_dataclasses_makes() -> None:
    plain, deferred = _both(SAMPLE)
    assert vars(deferred)["__init__"].__deferred_method__
    for cls in (plain, deferred):
        one, same, other = cls(1, (2,), "x", 5), cls(1, (2,), "x", 6), cls(2)
        assert one == same  # `d` is not compared
        assert one != other
        assert hash(one) == hash(same) == hash((1, (2,), "x"))
        assert (one == 1) is False
        with pytest.raises(dataclasses.FrozenInstanceError):
            one.a = 3
        with pytest.raises(TypeError):
            cls()
        assert cls(1).b == []
        assert cls(1).b is not cls(1).b
    assert repr(plain(1, [2])) == repr(deferred(1, [2])) == "Sample(a=1, b=[2], c='c')"
    assert plain(1) != deferred(1)  # the classes differ: as between any two dataclasses
    assert [(f.name, f.default, f.repr, f.compare) for f in dataclasses.fields(plain)] == [
        (f.name, f.default, f.repr, f.compare) for f in dataclasses.fields(deferred)
    ]
    assert repr(plain.__dataclass_params__) == repr(deferred.__dataclass_params__)
    assert plain.__match_args__ == deferred.__match_args__
    assert plain.__slots__ == deferred.__slots__
    assert dataclasses.replace(deferred(1, [2]), c="y") == deferred(1, [2], "y")
    # once called, each method is the written one, installed on the class
    assert not any(getattr(vars(deferred)[name], "__deferred_method__", False) for name in ("__init__", "__eq__"))
    assert vars(deferred)["__init__"].__code__.co_names[:1] == ("_set",)
    assert list(inspect.signature(deferred).parameters) == ["a", "b", "c", "d"]


def test_a_deferred_class_s_repr_is_guarded_against_recursion() -> None:
    plain, deferred = _both({"__doc__": "A box.", "__annotations__": {"items": "list[object]"}})
    for cls in (plain, deferred):
        box = cls([])
        box.items.append(box)
        assert repr(box) == "Sample(items=[...])"


def test_subclasses_of_a_deferred_class_write_their_own_methods() -> None:
    @dataclass(frozen=True, slots=True)
    class Base:
        """A base."""

        a: int

    @dataclass(frozen=True, slots=True)
    class Child(Base):
        """A child."""

        b: int = 2

    class Plain(Base):
        __slots__ = ()

    assert Child(1) == Child(1, 2)
    assert repr(Child(1)) == "test_subclasses_of_a_deferred_class_write_their_own_methods.<locals>.Child(a=1, b=2)"
    assert Plain(3) == Plain(3)
    assert Plain(3) != Base(3)
    assert hash(Base(1)) == hash((1,))


def test_classes_it_cannot_reproduce_are_left_to_dataclasses() -> None:
    @dataclass(frozen=True, slots=True)
    class NoDoc:
        a: int

    @dataclass(frozen=True, slots=True)
    class OwnEq:
        """Its own equality."""

        a: int

        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = object.__hash__

    @dataclass(frozen=True, slots=True)
    class Hidden:
        """A field not in __init__."""

        a: int
        b: int = dataclasses.field(default=0, init=False)

    @dataclass(frozen=True)
    class NotSlotted:
        """Not slotted."""

        a: int

    assert NoDoc.__doc__ == "NoDoc(a: 'int')"  # written by dataclasses from the signature
    for cls in (NoDoc, OwnEq, Hidden, NotSlotted):
        assert not getattr(vars(cls)["__init__"], "__deferred_method__", False), cls
    assert OwnEq(1) == OwnEq(2)
    assert Hidden(1).b == 0
