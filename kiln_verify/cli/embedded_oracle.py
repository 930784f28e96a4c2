"""The embedded oracle: this project's oracle servers started in-process by a command.

``openenv rollout`` and ``openenv evaluate`` collect from one when no ``--environment`` is
given (:meth:`EmbeddedOracle.serve`); ``openenv replay --oracle [NAME]`` replays a bundle
against one (:meth:`EmbeddedOracle.replay_provider`), by default the oracle server whose
identity matches each captured environment (its ``/metadata`` name and
``/list_environments`` entry), so the bundle of the README's main job can be replayed
although the port it was collected on is gone. Every server gets a fresh loopback port
and is stopped when the command's work ends.

This is the one library module besides ``oracle_cmd`` that imports the ``oracle`` package,
always lazily (inside a function): collection and replay never depend on it unless a user
asks for the embedded oracle (tests/test_hygiene.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from kiln_verify.errors import UsageError, snippet

if TYPE_CHECKING:
    from kiln_verify.openenv.collect import CollectionControls
    from kiln_verify.openenv.protocol.identity import EnvironmentIdentity
    from kiln_verify.openenv.replay import EnvironmentProvider, UrlRemap

__all__ = ["DEFAULT_ORACLE", "EmbeddedOracle", "matching_oracle"]

#: The embedded oracle served when neither ``--environment`` nor ``--oracle`` is given.
DEFAULT_ORACLE = "bandit"


@contextmanager
def _served(names: Sequence[str]) -> Iterator[list[str]]:
    """Serve ``names`` (one server each) and yield their base URLs; stopped on exit."""
    from oracle.runner import ServerConfig, start_servers

    try:
        handles = start_servers([ServerConfig(name) for name in names])
    except (KeyError, ValueError) as exc:
        raise UsageError(f"cannot start the embedded oracle: {exc}") from None
    try:
        yield [handle.base_url for handle in handles]
    finally:
        for handle in handles:
            handle.stop()


def matching_oracle(identity: EnvironmentIdentity) -> str | None:
    """The oracle server whose ``/metadata`` name and environment name match ``identity``.

    Only these two are matched here; rediscovery then compares the whole identity
    (schemas, version, discovery digest) exactly, so a near miss is still drift.
    """
    from oracle.inventory import ALL_SERVERS, environment_class

    for name in ALL_SERVERS:
        cls = environment_class(name)
        if cls.class_name == identity.metadata.name and cls.env_name in identity.environments:
            return name
    return None


@dataclasses.dataclass(frozen=True, slots=True)
class EmbeddedOracle:
    """The embedded-oracle default: ``name`` is ``None`` when ``--environment`` was given."""

    name: str | None

    @classmethod
    def from_flags(cls, environment: list[str] | None, oracle: str | None) -> EmbeddedOracle:
        """Check ``--oracle`` against ``--environment`` (usage error when both are given)."""
        if oracle is not None and environment:
            raise UsageError("--oracle only applies when no --environment is given")
        return cls(None if environment else oracle or DEFAULT_ORACLE)

    @contextmanager
    def serve(self, controls: CollectionControls) -> Iterator[CollectionControls]:
        """``controls`` as given, or aimed at the oracle served in-process until exit."""
        if self.name is None:
            yield controls
            return
        with _served([self.name]) as urls:
            yield dataclasses.replace(controls, environments=tuple(urls))

    def replay_provider(self) -> EnvironmentProvider:
        """Serve an oracle per recorded base URL of a bundle and remap it there.

        ``name`` ``""`` matches each captured environment's identity
        (:func:`matching_oracle`); a given name serves that server, which needs a bundle
        recorded at one base URL.
        """
        explicit = self.name or None

        @contextmanager
        def provide(identities: Sequence[EnvironmentIdentity]) -> Iterator[list[UrlRemap]]:
            from kiln_verify.openenv.replay import UrlRemap

            recorded = dict.fromkeys(identity.base_url for identity in identities)
            if explicit is not None and len(recorded) > 1:
                raise UsageError(
                    f"--oracle {explicit} serves one environment; the bundle recorded "
                    f"{len(recorded)} base URLs",
                    hint="give --oracle without a name: each captured environment is then "
                    "matched to the oracle server with its identity",
                )
            names: list[str] = []
            for url in recorded:
                identity = next(item for item in identities if item.base_url == url)
                name = explicit or matching_oracle(identity)
                if name is None:
                    raise UsageError(
                        f"no embedded oracle server matches the environment recorded at "
                        f"{snippet(url)} ({snippet(identity.metadata.name)})",
                        hint="see `kiln-verify oracle list`; give --oracle NAME, or "
                        "--environment-url OLD=NEW to replay against a server of your own",
                    )
                names.append(name)
            with _served(names) as urls:
                yield [
                    UrlRemap.create(old, new, source="oracle", oracle=name)
                    for old, new, name in zip(recorded, urls, names, strict=True)
                ]

        return provide
