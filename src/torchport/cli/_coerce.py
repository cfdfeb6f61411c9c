"""Command-line values turned into ``str`` / ``int`` / ``Path`` without building a pydantic model per option.

typer >= 0.2x converts every option value through a pydantic ``TypeAdapter`` built on first use: importing
pydantic and building the adapters of ``scan``'s ~20 options cost ~0.2-0.3 s of CPU in every ``torchport scan``,
more than a cached scan of a whole repository. :func:`plain_values` gives the options whose annotation is a plain
``str``, ``int`` or ``Path`` (or a list of those) a converter that returns what typer's adapter returns for the
everyday value -- the string itself, ``int("12")``, typer's own path checks over ``Path(value)`` -- and hands
anything else (a signed or spaced number, an empty path, a value of another type) to typer's own converter,
built then: the same result and the same error message as without it. Options with a parser, bounds, choices
or files keep typer's converter; with a typer that has no such converter (older versions, or a new layout)
nothing changes. ``tests/cli/test_cli_startup.py`` checks the values and errors against typer's own;
``tests/migrate/test_lazy_libcst.py`` that ``torchport scan`` imports no pydantic.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, get_args, get_origin

__all__ = ["plain_values"]

_KINDS = (str, int, bool, Path)


def _kind(descriptor: Any) -> tuple[type, bool] | None:
    """(leaf type, is a list) for an annotation this module converts, else None."""
    info, annotation = descriptor.parameter_info, descriptor.annotation
    if descriptor.file_annotation is not None or getattr(info, "parser", None) is not None:
        return None
    if any(getattr(info, a, None) is not None for a in ("min", "max", "path_type")) or getattr(info, "clamp", False):
        return None
    many = get_origin(annotation) is list
    if many:
        args = get_args(annotation)
        if len(args) != 1:
            return None
        annotation = args[0]
    if annotation not in _KINDS:
        return None
    if annotation is Path and (getattr(info, "resolve_path", False) or getattr(info, "allow_dash", False)):
        return None
    return annotation, many


def plain_values(command: Any) -> Any:
    """Give the plain options of ``command`` and its sub-commands the light converter (see the module doc);
    returns ``command``."""
    try:
        from typer._coercion import RuntimeParam, build_runtime_param
        from typer._param_types import coerce_cli_path
    except ImportError:     # a typer without runtime converters: its own conversion stays
        return command

    @dataclasses.dataclass(frozen=True)
    class _Plain(RuntimeParam):
        kind: type = str
        many: bool = False

        def _one(self, value: Any, param: Any, ctx: Any) -> Any:
            """The converted value, or ``self`` when typer's own converter must decide."""
            kind = self.kind
            if kind is Path:    # typer's own checks (exists, readable ...) on the Path its adapter would make
                if type(value) is str and value:
                    value = Path(value)
                if not isinstance(value, Path):
                    return self
                return coerce_cli_path(value, self.parameter_info, path_type=Path, param=param, ctx=ctx)
            if type(value) is kind:
                return value
            if type(value) is not str:
                return self
            if kind is str:
                return value
            return int(value) if value.isascii() and value.isdigit() else self

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            if self.many:
                out = [self._one(v, param, ctx) for v in value] if isinstance(value, (list, tuple)) else [self]
                if not any(v is self for v in out):
                    return out
            else:
                out = self._one(value, param, ctx)
                if out is not self:
                    return out
            real = build_runtime_param(param.type_descriptor)     # typer's own, for this value and the next
            param._runtime_param = real
            return real._coerce_value(value, param=param, ctx=ctx)

    def give(param: Any) -> None:
        descriptor = getattr(param, "type_descriptor", None)
        if descriptor is None or getattr(param, "_runtime_param", False) is not None:
            return
        kind = _kind(descriptor)
        if kind is not None:
            param._runtime_param = _Plain(parameter_info=descriptor.parameter_info, annotation=descriptor.annotation,
                                          kind=kind[0], many=kind[1])

    def with_help(cmd: Any) -> None:
        """``--help`` is made at parse time (click's ``get_help_option``): it gets the converter then."""
        made = getattr(cmd, "get_help_option", None)
        if made is None:
            return

        def get_help_option(ctx: Any) -> Any:
            option = made(ctx)
            if option is not None:
                give(option)
            return option

        cmd.get_help_option = get_help_option

    stack = [command]
    while stack:
        cmd = stack.pop()
        stack.extend((getattr(cmd, "commands", None) or {}).values())
        with_help(cmd)
        for param in getattr(cmd, "params", ()):
            give(param)
    return command
