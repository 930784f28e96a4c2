"""The rollout collection flags, built once from :class:`CollectionOptions` (contract §11).

``openenv rollout`` and ``openenv evaluate`` take the same collection flags. They are not
written out twice: :func:`collection_command` turns a command body
``impl(flags: CollectionFlags, **own)`` into a typer command whose signature is the
source flags (``--environment``, ``--credential-env``, the reset-options files,
``--oracle``), one flag per field of :class:`CollectionOptions` (its type, help text and
metavar come from the field, its default from the field or the command's ``defaults``)
and then the command's own parameters. The parsed option values become one typed
:class:`CollectionOptions` right where typer hands them over; :meth:`CollectionFlags.controls`
is the one mapping from the parsed flags to validated controls;
:class:`~kiln_verify.cli.embedded_oracle.EmbeddedOracle` serves the embedded oracle
in-process when no ``--environment`` is given.

Engine errors name contract fields (``KilnError.fields``); :func:`kiln_verify.cli.output.
fail` shows exactly those as the flags a user types (``--group-size``).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable, Mapping
from typing import Annotated, Any

import typer

from kiln_verify.cli.embedded_oracle import DEFAULT_ORACLE, EmbeddedOracle
from kiln_verify.cli.output import flag_name
from kiln_verify.errors import UsageError
from kiln_verify.openenv.collect import CollectionControls, load_reset_options
from kiln_verify.openenv.collect.controls import OPTION_NAMES, CollectionOptions

__all__ = [
    "DEFAULT_ORACLE",
    "CollectionFlags",
    "EmbeddedOracle",
    "Force",
    "collection_command",
    "reset_templates",
]

#: Stands in for the embedded oracle's URL until it is started (after validation).
PLACEHOLDER_URL = "http://127.0.0.1:1"

Force = Annotated[bool, typer.Option("--force", help="Replace existing output files.")]


def _source_parameters(oracle_help: str) -> list[inspect.Parameter]:
    def option(name: str, annotation: Any) -> inspect.Parameter:
        return inspect.Parameter(
            name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation
        )

    return [
        option("environment", Annotated[list[str] | None, typer.Option(
            "--environment", metavar="URL",
            help="OpenEnv base URL (repeat; groups rotate round-robin)."
        )]),
        option("credential_env", Annotated[list[str] | None, typer.Option(
            "--credential-env", metavar="NAME",
            help="Bearer-token variable NAME per --environment; '-' = public."
        )]),
        option("reset_options", Annotated[str | None, typer.Option(
            "--reset-options", metavar="FILE",
            help="JSON object FILE merged into every reset (seed is set)."
        )]),
        option("environment_reset_options", Annotated[list[str] | None, typer.Option(
            "--environment-reset-options", metavar="FILE",
            help="Per-environment reset FILE (repeat; '-' = {})."
        )]),
        option("oracle", Annotated[str | None, typer.Option(
            "--oracle", metavar="NAME", help=oracle_help
        )]),
    ]  # fmt: skip


def _option_parameters(defaults: Mapping[str, Any]) -> list[inspect.Parameter]:
    declared = {f.name: f for f in dataclasses.fields(CollectionOptions)}
    types = typing.get_type_hints(CollectionOptions)
    parameters = []
    for name in OPTION_NAMES:
        field = declared[name]
        metadata = field.metadata
        default = defaults.get(name, field.default)
        kind = types[name]
        flag = flag_name(name)
        if kind is bool:
            option = typer.Option(f"{flag}/--no-{flag[2:]}", help=metadata["help"])
        else:
            option = typer.Option(flag, metavar=metadata["metavar"], help=metadata["help"])
        parameters.append(
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=default,
                annotation=Annotated[kind, option],
            )
        )
    return parameters


@dataclasses.dataclass(frozen=True, slots=True)
class CollectionFlags:
    """The parsed collection flags of one command line."""

    environment: tuple[str, ...]
    credential_env: tuple[str, ...]
    reset_options: str | None
    environment_reset_options: tuple[str, ...]
    oracle: str | None
    options: CollectionOptions

    def controls(self, options: CollectionOptions | None = None) -> CollectionControls:
        """Validated controls (placeholder URL for the embedded oracle, the bundle's default
        output names): the command line's options, or ``options`` in their place (a
        command that declares an option itself). A command sets its own outputs with
        ``dataclasses.replace``, which validates again."""
        if not self.environment and self.credential_env:
            raise UsageError(
                "`credential_envs` need `environments`", fields=("credential_envs", "environments")
            )
        return CollectionControls.create(
            list(self.environment) or [PLACEHOLDER_URL],
            reset_templates=reset_templates(
                self.reset_options, list(self.environment_reset_options)
            ),
            credential_envs=[None if slot == "-" else slot for slot in self.credential_env],
            options=self.options if options is None else options,
        )

    def embedded(self) -> EmbeddedOracle:
        return EmbeddedOracle.from_flags(list(self.environment), self.oracle)


def collection_command(
    impl: Callable[..., None],
    *,
    defaults: Mapping[str, Any] | None = None,
    oracle_help: str = "Embedded oracle to use when no --environment is given.",
) -> Callable[..., None]:
    """A typer command: the collection flags, then ``impl``'s own parameters.

    ``impl(flags, **own)`` receives the parsed :class:`CollectionFlags` first.
    """
    hints = typing.get_type_hints(impl, include_extras=True)
    own = [
        p.replace(annotation=hints[p.name])
        for p in list(inspect.signature(impl).parameters.values())[1:]
    ]
    own_names = {p.name for p in own}
    sources = _source_parameters(oracle_help)
    # A command may declare an option itself (evaluate's --seed-start has its own default
    # rule); then that declaration is used and the value reaches the command, not flags.
    options = [p for p in _option_parameters(defaults or {}) if p.name not in own_names]
    generated = [p.name for p in options]

    @functools.wraps(impl)
    def command(**kwargs: Any) -> None:
        flags = CollectionFlags(
            environment=tuple(kwargs.pop("environment") or ()),
            credential_env=tuple(kwargs.pop("credential_env") or ()),
            reset_options=kwargs.pop("reset_options"),
            environment_reset_options=tuple(kwargs.pop("environment_reset_options") or ()),
            oracle=kwargs.pop("oracle"),
            # typer's values for the generated flags, typed once, here
            options=CollectionOptions(**{name: kwargs.pop(name) for name in generated}),
        )
        impl(flags, **kwargs)

    parameters = [
        *sources,
        *options,
        *(p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own),
    ]
    clash = own_names & {p.name for p in sources}
    if clash:
        raise TypeError(f"{impl.__name__} redeclares collection source flags {sorted(clash)}")
    command.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in parameters}
    del command.__wrapped__  # typer must read the generated signature, not impl's
    return command


def reset_templates(shared: str | None, per_environment: list[str]) -> list[dict[str, Any]] | None:
    """Reset templates from ``--reset-options`` or ``--environment-reset-options`` (not both)."""
    if shared is not None and per_environment:
        raise UsageError(
            "--reset-options and --environment-reset-options are mutually exclusive",
            hint="give one shared object or one object per --environment",
        )
    if shared is not None:
        return [load_reset_options(shared)]
    if per_environment:
        return [load_reset_options(path) for path in per_environment]
    return None
