"""Every setting declared once, where it is used, and checked before any work starts.

A component declares its settings as its constructor's parameters: the type, the default, and
an allowed range or set of choices in `Annotated` (ir_measures declares a measure's parameters
the same way):

    @checked("index")
    @dataclass
    class HNSWIndex(FaissIndex):
        M: Annotated[int, Range(2, 1024)] = 32

`check_config` walks a composed config (top-level settings against a schema dataclass, and every
`_target_` node against its class) and names a bad value by the key the user wrote (`chunk`, not
the `chunking.size` it is interpolated into); `checked` makes the constructor check the same
declarations when a component is built in Python. An error is one line: the key, the value, what
is allowed.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import inspect
import math
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING, dataclass, fields, is_dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar, Union

from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import InterpolationResolutionError, MissingMandatoryValue

from sweep.errors import InputError

C = TypeVar("C", bound=type)
_SIMPLE_INTERPOLATION = re.compile(r"^\$\{([A-Za-z_][\w.]*)\}$")


@dataclass(frozen=True)
class Range:
    """low <= value <= high; either end may be open (None)."""

    low: float | None = None
    high: float | None = None

    def allows(self, value: float) -> bool:
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)

    def __str__(self) -> str:
        if self.low is not None and self.high is not None:
            return f"from {_number(self.low)} to {_number(self.high)}"
        return f">= {_number(self.low)}" if self.low is not None else f"<= {_number(self.high)}"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


@dataclass(frozen=True)
class OneOf:
    choices: tuple[str, ...]

    def allows(self, value: Any) -> bool:
        return value in self.choices

    def __str__(self) -> str:
        return "one of " + ", ".join(self.choices)


@dataclass(frozen=True)
class NonEmpty:
    def allows(self, value: Any) -> bool:
        return bool(str(value).strip())

    def __str__(self) -> str:
        return "not empty"


@dataclass(frozen=True)
class Exists:
    """A path to a file or folder that is there."""

    def allows(self, value: Any) -> bool:
        return bool(str(value).strip()) and Path(str(value)).expanduser().exists()

    def __str__(self) -> str:
        return "the path of an existing file or folder"


@dataclass(frozen=True)
class Cutoffs:
    """Rank cutoffs: a non-empty list of distinct integers from 1 to `high`."""

    high: int = 1000

    def allows(self, value: Any) -> bool:
        return (
            isinstance(value, list)
            and bool(value)
            and all(_is_kind(k, int) and 1 <= k <= self.high for k in value)
            and len(set(value)) == len(value)
        )

    def __str__(self) -> str:
        return f"a non-empty list of distinct integers from 1 to {self.high}, e.g. [1, 3, 5, 10]"


KINDS: dict[type, str] = {  # how a setting's type reads in messages and in the configuration reference
    bool: "true or false",
    int: "an integer",
    float: "a number",
    str: "a string",
    dict: "a mapping",
    list: "a list",
}


def shown(value: Any) -> str:
    """A value as the user would write it in YAML or on the command line."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value)
    return str(value)


def check_value(value: Any, hint: Any, key: str) -> None:
    """`value` against a declared type (`int`, `float | None`, `Annotated[int, Range(1)]`, ...);
    an InputError `key=value: must be ...` when it does not fit."""
    base, constraints = hint, ()
    if typing.get_origin(hint) is Annotated:
        base, *constraints = typing.get_args(hint)
    options = typing.get_args(base) if typing.get_origin(base) in (Union, types.UnionType) else (base,)
    options = tuple(typing.get_origin(kind) or kind for kind in options)  # list[int] is checked as a list
    optional = type(None) in options
    kinds = [kind for kind in options if kind in KINDS]
    if value is None and optional:
        return
    if not kinds:  # an object (a nested component) is not ours to check
        return
    if any(isinstance(value, other) for other in options if isinstance(other, type) and other not in KINDS):
        return  # e.g. a Path where `str | Path` is declared
    kind = kinds[0]
    if not _is_kind(value, kind) or not all(c.allows(value) for c in constraints):
        described = [str(c) for c in constraints if not isinstance(c, NonEmpty)]
        if not any(isinstance(c, (OneOf, Exists, Cutoffs)) for c in constraints):  # they say the kind already
            empty = any(isinstance(c, NonEmpty) for c in constraints)
            described.insert(0, "a non-empty string" if empty and kind is str else KINDS[kind])
        wanted = " ".join(described) + (", or null" if optional else "")
        raise InputError(f"{key}={shown(value)}: must be {wanted}")


def _is_kind(value: Any, kind: type) -> bool:
    if kind is float:  # an integer is a number; a number is finite
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


@functools.cache
def settings_of(cls: type) -> dict[str, Any]:
    """The declared settings of a class: constructor parameter -> annotation (`Any` if none)."""
    plain = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    parameters = [p for p in inspect.signature(cls).parameters.values() if p.kind in plain]
    if not parameters:  # e.g. a class with object's constructor
        return {}
    hints = typing.get_type_hints(cls if is_dataclass(cls) else cls.__init__, include_extras=True)
    return {p.name: hints.get(p.name, Any) for p in parameters}


def check_arguments(cls: type, values: Mapping[str, Any], key: str) -> None:
    """Each value against the setting of `cls` it is for; an unknown name is an error that
    lists the settings (and suggests the nearest)."""
    declared = settings_of(cls)
    for name, value in values.items():
        if name not in declared:
            raise InputError(unknown_key(f"{key}.{name}" if key else name, declared, f"a setting of {cls.__name__}"))
        check_value(value, declared[name], f"{key}.{name}" if key else name)


def override_key(override: str) -> str:
    """The config key a command-line override sets: `+a.b=1`, `~a.b` and `a.b=1` all set `a.b`."""
    return override.split("=", 1)[0].lstrip("+~")


def unknown_key(key: str, known: Iterable[str], what: str = "a setting") -> str:
    """`key: not <what> (did you mean ...? known: ...)`."""
    name = key.rsplit(".", 1)[-1]
    known = sorted(known)
    close = difflib.get_close_matches(name, known, n=1) or [k for k in known if k.startswith(name)]
    prefix = key[: len(key) - len(name)]
    hint = f"did you mean {' or '.join(prefix + k for k in close)}? " if close else ""
    return f"{key}: not {what} ({hint}known: {', '.join(known) or 'none'})"


def checked(key: str) -> Callable[[C], C]:
    """Class decorator: the constructor checks its arguments against their declarations, and
    names them `<key>.<argument>` (the class's config group)."""

    def decorate(cls: C) -> C:
        init = cls.__init__
        signature = inspect.signature(init)

        @functools.wraps(init)
        def checked_init(self, *args: Any, **kwargs: Any) -> None:
            bound = signature.bind(self, *args, **kwargs)
            bound.apply_defaults()
            check_arguments(cls, {k: v for k, v in list(bound.arguments.items())[1:]}, key)
            init(self, *args, **kwargs)

        cls.__init__ = checked_init
        return cls

    return decorate


def check_config(cfg: DictConfig, schema: type) -> None:
    """Every value of a composed config: keys of `schema` (a dataclass, nested dataclasses for
    nested keys) against their declarations, every `_target_` node against its class's. A value
    left unset (`???`), a target that does not import and a key nobody declares are errors too."""
    try:  # every `???` (also one reached through an interpolation) before anything else
        OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    except MissingMandatoryValue as error:
        raise InputError(_unset(error)) from None
    except InterpolationResolutionError as error:  # one that reaches a `???` is an unset value too
        found = re.search(r"Missing mandatory value: ([\w.]+)", str(error))
        if found:
            key = found.group(1)
            raise InputError(f"{key} is not set: give it on the command line ({key}=...)") from None
        raise InputError(f"{error.full_key}: {str(error).splitlines()[0]}") from None
    _check_node(cfg, "", settings_of(schema), None)


def _unset(error: MissingMandatoryValue) -> str:
    key = error.full_key or str(error).rsplit(":", 1)[-1].strip()
    return f"{key} is not set: give it on the command line ({key}=...)"


def _check_node(node: DictConfig, path: str, declared: Mapping[str, Any], owner: str | None) -> None:
    for name in node.keys():
        name = str(name)
        key = f"{path}.{name}" if path else name
        if name.startswith("_"):  # _target_, _partial_, ...: Hydra's
            continue
        value = node[name]
        if isinstance(value, DictConfig) and "_target_" in value:
            if not OmegaConf.is_interpolation(node, name):  # `index: ${index}` is checked where it is written
                _check_component(value, key)
            continue
        if name not in declared:
            raise InputError(unknown_key(key, declared, f"a setting of {owner}" if owner else "a setting"))
        hint = declared[name]
        if _is_component_mapping(value):  # a hybrid's members: each checked against its own class
            for member in value.keys():
                _check_component(value[member], f"{key}.{member}")
            continue
        schema = next((t for t in typing.get_args(hint) or (hint,) if _is_schema(t)), None)
        if isinstance(value, DictConfig) and schema is not None:
            _check_node(value, key, settings_of(schema), None)
            continue
        plain = OmegaConf.to_container(value, resolve=True) if isinstance(value, (DictConfig, ListConfig)) else value
        check_value(plain, hint, _written_as(node, name, key))


def _check_component(node: DictConfig, path: str) -> None:
    target = node["_target_"]
    module, _, name = str(target).rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), name)
    except Exception as error:  # ImportError, AttributeError, ValueError: any way of not being there
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise InputError(f"{path}._target_={target}: cannot import it ({reason})") from None
    if not isinstance(cls, type):
        raise InputError(f"{path}._target_={target}: not a class")
    _check_node(node, path, settings_of(cls), cls.__name__)


def _is_component_mapping(value: Any) -> bool:
    return (
        isinstance(value, DictConfig)
        and len(value) > 0
        and all(isinstance(value[k], DictConfig) and "_target_" in value[k] for k in value.keys())
    )


def _is_schema(hint: Any) -> bool:
    return isinstance(hint, type) and is_dataclass(hint)


def _written_as(node: DictConfig, name: str, key: str) -> str:
    """The key the user wrote the value under: `chunk` for `size: ${chunk}`, else the key itself."""
    if OmegaConf.is_interpolation(node, name):
        match = _SIMPLE_INTERPOLATION.match(str(node._get_node(name)._value()))
        if match:
            return match.group(1)
    return key


def schema_defaults(schema: type) -> dict[str, Any]:
    """{key: default} of a schema dataclass, nested keys dotted (for checking config.yaml)."""
    out: dict[str, Any] = {}
    for field in fields(schema):
        hint = typing.get_type_hints(schema, include_extras=True)[field.name]
        if _is_schema(hint):
            out |= {f"{field.name}.{k}": v for k, v in schema_defaults(hint).items()}
        else:
            out[field.name] = field.default if field.default_factory is MISSING else field.default_factory()
    return out
