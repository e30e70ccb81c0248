"""Cheaper frozen dataclasses: an `__init__` that is cheaper to call, and methods written on first use.

`@dataclass(frozen=True)` writes an `__init__` that sets each field with
`__dataclass_builtins_object__.__setattr__(self, name, value)`: a global, an attribute lookup and a call per field.
For a 24-field `User` that costs more than everything else its write does in the memory store. `quick_init` gives a
class an `__init__` with the same signature, defaults, default factories and `__post_init__` call, that sets each
field through one name bound once (`_set = object.__setattr__`): the same assignments, about 40 % cheaper. The class
stays exactly as frozen (its `__setattr__` still refuses), and a class using what this does not reproduce
(`InitVar`, keyword-only or `init=False` fields) keeps the `__init__` dataclasses wrote.

Writing methods is what importing the core spends most of its time on: `dataclasses` compiles six functions for each
frozen class (`__init__`, `__repr__`, `__eq__`, `__hash__`, `__setattr__`, `__delattr__`), and the core has about 200
of them, most of which a given process never makes. So `dataclass` here is `dataclasses.dataclass`, except that a
frozen, slotted class gets its `__init__` (the quick one), `__repr__`, `__eq__` and `__hash__` written by their first
call, each in place of a stand-in that writes it, installs it on the class and calls it: from then on the class holds
the same method `dataclasses` would have written (the quick `__init__` for `__init__`), and nothing is looked up
again. The class's fields, parameters (`__dataclass_params__`), `__match_args__`, frozenness, slots and pickling are
those `dataclasses` gives it. A class this cannot reproduce exactly (its own `__init__`, `__repr__`, `__eq__` or
`__hash__`, no docstring, `InitVar`, keyword-only or `init=False` fields, other options) is left to `dataclasses`.
`quick_init` on such a class is a no-op; on another dataclass it too defers the writing to the first call.
"""

from __future__ import annotations

import dataclasses
import reprlib
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["dataclass", "quick_init", "write_now"]

C = TypeVar("C", bound=type[Any])

_FACTORY = object()  # the default of a parameter whose field has a default factory

#: The methods `dataclass` defers to their first call.
_WRITERS = ("__init__", "__repr__", "__eq__", "__hash__")


def _init_source(cls: type[Any]) -> Callable[..., None]:
    """The quick `__init__` of `cls` (compiled now)."""
    namespace: dict[str, Any] = {"_set": object.__setattr__, "_FACTORY": _FACTORY}
    parameters: list[str] = []
    lines: list[str] = []
    annotations: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        annotations[f.name] = f.type
        if f.default is not dataclasses.MISSING:
            namespace[f"_default_{f.name}"] = f.default
            parameters.append(f"{f.name}=_default_{f.name}")
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f"_factory_{f.name}"] = f.default_factory
            parameters.append(f"{f.name}=_FACTORY")
            lines.append(f"    if {f.name} is _FACTORY:\n        {f.name} = _factory_{f.name}()")
        else:
            parameters.append(f.name)
        lines.append(f"    _set(self, {f.name!r}, {f.name})")
    if hasattr(cls, "__post_init__"):
        lines.append("    self.__post_init__()")
    source = f"def __init__(self, {', '.join(parameters)}):\n" + ("\n".join(lines) or "    pass") + "\n"
    local: dict[str, Any] = {}
    exec(source, namespace, local)  # noqa: S102 - what dataclasses itself does to write __init__
    init: Callable[..., None] = local["__init__"]
    init.__annotations__ = {**annotations, "return": None}
    return init


def _function(name: str, source: str) -> Callable[..., Any]:
    local: dict[str, Any] = {}
    exec(source, {}, local)  # noqa: S102 - what dataclasses itself does to write methods
    return local[name]  # type: ignore[no-any-return]


def _repr(cls: type[Any]) -> Callable[..., str]:
    """`__repr__` as dataclasses writes it: the fields with `repr=True`, guarded against recursion."""
    body = ", ".join(f"{f.name}={{self.{f.name}!r}}" for f in dataclasses.fields(cls) if f.repr)
    source = f'def __repr__(self):\n    return self.__class__.__qualname__ + f"({body})"\n'
    return reprlib.recursive_repr()(_function("__repr__", source))


def _eq(cls: type[Any]) -> Callable[..., Any]:
    """`__eq__` as dataclasses (3.11) writes it: same class, then the tuples of the fields with `compare=True`."""
    names = [f.name for f in dataclasses.fields(cls) if f.compare]
    mine = "".join(f"self.{n}," for n in names)
    theirs = "".join(f"other.{n}," for n in names)
    source = (
        "def __eq__(self, other):\n"
        "    if other.__class__ is self.__class__:\n"
        f"        return ({mine})==({theirs})\n"
        "    return NotImplemented\n"
    )
    return _function("__eq__", source)


def _hash(cls: type[Any]) -> Callable[..., int]:
    """`__hash__` as dataclasses writes it for a frozen class with `eq`: the hash of the tuple of its hashed fields."""
    names = [f.name for f in dataclasses.fields(cls) if (f.compare if f.hash is None else f.hash)]
    source = "def __hash__(self):\n    return hash((" + "".join(f"self.{n}," for n in names) + "))\n"
    return _function("__hash__", source)


_MAKERS: dict[str, Callable[[type[Any]], Callable[..., Any]]] = {
    "__init__": _init_source,
    "__repr__": _repr,
    "__eq__": _eq,
    "__hash__": _hash,
}


def _write(cls: type[Any], name: str) -> Callable[..., Any]:
    """Write `cls`'s `name` method and install it in place of its stand-in; returns it."""
    method = _MAKERS[name](cls)
    method.__qualname__ = f"{cls.__qualname__}.{name}"
    method.__module__ = cls.__module__
    setattr(cls, name, method)
    return method


def _stand_in(cls: type[Any], name: str) -> Callable[..., Any]:
    """What `cls.<name>` is until its first call: writes the method, installs it, and calls it."""

    def stand_in(self: Any, *args: Any, **kwargs: Any) -> Any:
        return _write(cls, name)(self, *args, **kwargs)

    stand_in.__name__ = name
    stand_in.__qualname__ = f"{cls.__qualname__}.{name}"
    stand_in.__module__ = cls.__module__
    stand_in.__deferred_method__ = True  # type: ignore[attr-defined]
    return stand_in


def _is_stand_in(method: object) -> bool:
    return getattr(method, "__deferred_method__", False) is True


def write_now(cls: type[Any]) -> None:
    """Write every method of `cls` still deferred (what first calls would do)."""
    for name in _WRITERS:
        if _is_stand_in(vars(cls).get(name)):
            _write(cls, name)


def _deferrable(cls: type[Any]) -> bool:
    """Whether `dataclass` can defer `cls`'s methods and still give exactly what dataclasses gives."""
    own = vars(cls)
    if not own.get("__doc__") or any(name in own for name in _WRITERS):
        return False  # dataclasses writes a docstring from the signature; or the class has its own method
    declared = [own.get(name) for name in own.get("__annotations__", {})]
    inherited = [f for base in cls.__mro__[1:] for f in getattr(base, "__dataclass_fields__", {}).values()]
    for f in (*declared, *inherited):
        if isinstance(f, dataclasses.Field) and (not f.init or f.kw_only is True):
            return False
    return not any(
        "InitVar" in str(annotation) or "KW_ONLY" in str(annotation)
        for annotation in own.get("__annotations__", {}).values()
    )


def dataclass(cls: Any = None, /, **options: Any) -> Any:
    """`dataclasses.dataclass(cls, **options)`; with exactly `frozen=True, slots=True` (and a class it can
    reproduce), the methods are written on first use (see the module docstring)."""

    def wrap(cls: type[Any]) -> type[Any]:
        if options != {"frozen": True, "slots": True} or not _deferrable(cls):
            return dataclasses.dataclass(cls, **options)
        made: type[Any] = dataclasses.dataclass(cls, frozen=True, slots=True, init=False, repr=False, eq=False)
        params = made.__dataclass_params__
        params.init = params.repr = params.eq = True  # what it is once its methods are written
        for name in _WRITERS:
            setattr(made, name, _stand_in(made, name))
        return made

    return wrap if cls is None else wrap(cls)


def quick_init(cls: C) -> C:
    """Give the frozen dataclass `cls` the cheaper `__init__` (see the module docstring), written on its first call;
    returns `cls`."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or not params.init:
        raise TypeError(f"{cls.__name__} is not a frozen dataclass with an __init__")
    if _is_stand_in(vars(cls).get("__init__")):
        return cls  # made by `dataclass` above: its first call writes the quick one
    fields = dataclasses.fields(cls)
    if any(not f.init or f.kw_only for f in fields) or any(
        isinstance(f.type, dataclasses.InitVar) or str(f.type).startswith("InitVar") for f in fields
    ):
        return cls
    cls.__init__ = _stand_in(cls, "__init__")
    return cls
