"""Read-only state values (M3): what hooks get from ``ctx.get`` / ``ctx.state``.

State values are frozen once, when they enter the state (a checkpoint loaded, ``ctx.write``, a message
appended), never per read: ``ctx.get("messages")`` hands out the history itself, O(1), however long it
is. ``FrozenDict`` / ``FrozenList`` are ``dict`` / ``list`` subclasses, so ``isinstance`` checks,
``json.dumps``, ``dict(x)``, ``{**x}`` and ``list(x)`` work (the copies are ordinary, mutable values);
every in-place change raises ``StateChangedInPlace`` naming the state key and the middleware whose
hook tried it. Only the engine appends to the history, through ``list.append`` on the frozen list.
"""

from __future__ import annotations

import contextvars
from typing import Any, NoReturn

from workbench.errors import RunError

# Who is running now (a middleware's hook, a tool, the engine): named in the error. Set by the engine
# around hook calls; a ContextVar so concurrent tool calls each see their own.
ACTIVE_HOOK: contextvars.ContextVar[str | None] = contextvars.ContextVar("workbench_active_hook", default=None)


class StateChangedInPlace(RunError):
    """A hook or tool changed a state value in place (M3): the run fails, nothing is checkpointed."""


def _refuse(obj: FrozenDict | FrozenList) -> NoReturn:
    who = ACTIVE_HOOK.get() or "a hook"
    key = getattr(obj, "_key", None) or "?"
    raise StateChangedInPlace(
        f"{who} changed state key '{key}' in place; state seen by hooks is read-only (M3): copy the value "
        f"(dict(x) / list(x)) and store it with ctx.write('{key}', ...) from the middleware that declares "
        f"'{key}' in `writes`"
    )


class FrozenDict(dict):  # type: ignore[type-arg]
    """A dict that refuses every change (see the module docstring)."""

    __slots__ = ("_key",)

    def _no(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse(self)

    # __init__ too: dict.__init__ on a built value updates it in place; freeze() builds through
    # __new__ + dict.update, so no Python-level __init__ runs on the hot path. __setattr__ and
    # __delattr__ guard _key and __class__ (no turning a frozen value back into a plain one).
    __init__ = __setattr__ = __delattr__ = _no  # type: ignore[assignment]
    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _no  # type: ignore[assignment]

    def __copy__(self) -> dict[Any, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[Any, Any]:
        return thaw(self)

    def __reduce__(self) -> Any:
        return (dict, (dict(self),))


class FrozenList(list):  # type: ignore[type-arg]
    """A list that refuses every change (see the module docstring)."""

    __slots__ = ("_key",)

    def _no(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse(self)

    __init__ = __setattr__ = __delattr__ = _no  # type: ignore[assignment]  # as FrozenDict's
    __setitem__ = __delitem__ = append = extend = insert = remove = pop = clear = sort = reverse = _no  # type: ignore[assignment]
    __iadd__ = __imul__ = _no  # type: ignore[assignment]

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return thaw(self)

    def __reduce__(self) -> Any:
        return (list, (list(self),))


_SCALARS = (str, int, float, bool, type(None))

# How freeze() builds a frozen value without the refused __init__ / __setattr__: the base types' own
# constructors and fillers, and the _key slot's descriptor.
_new_dict, _fill_dict, _set_dict_key = dict.__new__, dict.update, FrozenDict.__dict__["_key"].__set__
_new_list, _fill_list, _set_list_key = list.__new__, list.extend, FrozenList.__dict__["_key"].__set__


def freeze(value: Any, key: str) -> Any:
    """``value`` with every dict/list/tuple inside made read-only; frozen parts are reused as they are."""
    t = type(value)
    if t is FrozenDict or t is FrozenList or t in _SCALARS:
        return value
    if isinstance(value, dict):
        d = _new_dict(FrozenDict)
        _fill_dict(d, {k: freeze(v, key) for k, v in value.items()})
        _set_dict_key(d, key)
        return d
    if isinstance(value, (list, tuple)):
        items = _new_list(FrozenList)
        _fill_list(items, [freeze(v, key) for v in value])
        _set_list_key(items, key)
        return items
    return value  # other objects: not JSON state; the checkpoint will say so


def thaw(value: Any) -> Any:
    """A mutable deep copy of a (possibly frozen) value."""
    if isinstance(value, dict):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [thaw(v) for v in value]
    return value


def append(history: list[Any], item: Any, key: str) -> None:
    """The engine's own append to a frozen list (the history is append-only)."""
    list.append(history, freeze(item, key))
