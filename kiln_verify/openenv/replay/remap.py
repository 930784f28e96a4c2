"""Replaying a captured environment at another base URL (``--environment-url``, ``--oracle``).

A captured identity pins the base URL and the WebSocket URL derived from it (both are
identity fields, contract §8.4), so a bundle collected from a server that has since
moved, or from the embedded oracle on an ephemeral port that is gone, could never be
replayed. A remap names the new address of one recorded base URL. Rediscovery then
compares the live identity with the captured one *with only those two URLs replaced*:
metadata, environment names, authentication method, schemas and the complete discovery
digest are still compared exactly (no discovery document carries the server's own
address, so the digest needs no remapping), and the report records every remap.

``--oracle`` is an automatic remap (the embedded oracle listens on a fresh port) and is
recorded the same way, with ``source`` ``oracle`` and the oracle server's name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kiln_verify.errors import KilnError, UsageError, snippet
from kiln_verify.openenv.protocol.identity import EnvironmentIdentity
from kiln_verify.openenv.protocol.urls import normalize_base_url
from kiln_verify.openenv.records.environment import EnvironmentInspection
from kiln_verify.openenv.records.reports import EnvironmentRemap

__all__ = ["UrlRemap", "parse_environment_url", "plan_remaps", "remapped_identity"]


@dataclass(frozen=True, slots=True)
class UrlRemap:
    """Replay the environment recorded at ``recorded`` at ``replayed`` (both normalized)."""

    recorded: str
    replayed: str
    source: str = "environment_url"
    oracle: str | None = None

    @classmethod
    def create(
        cls,
        recorded: str,
        replayed: str,
        *,
        source: str = "environment_url",
        oracle: str | None = None,
    ) -> UrlRemap:
        """Both URLs normalized as the client normalizes them; a bad one is ``usage``."""
        return cls(_normalized(recorded), _normalized(replayed), source, oracle)


def _normalized(text: str) -> str:
    try:
        return normalize_base_url(text).base_url
    except KilnError as exc:
        raise UsageError(f"--environment-url: {exc.rule}", hint=exc.hint) from None


def parse_environment_url(text: str) -> UrlRemap:
    """``OLD=NEW`` (split at the first ``=``; base URLs carry no query) as a remap."""
    old, sep, new = text.partition("=")
    if not sep or not old.strip() or not new.strip():
        raise UsageError(
            f"--environment-url {snippet(text)} is not OLD=NEW",
            hint="give the recorded base URL and the new one, e.g. "
            "--environment-url http://127.0.0.1:8000=http://10.0.0.5:8000",
        )
    return UrlRemap.create(old, new)


def plan_remaps(
    environments: Sequence[EnvironmentInspection], remaps: Sequence[UrlRemap]
) -> tuple[list[str], list[EnvironmentRemap]]:
    """The base URL to reach per captured environment, and the notes' remap entries.

    Every remap must name a recorded base URL, at most once; a remap applies to every
    captured environment recorded at that URL.
    """
    recorded = [captured.identity.base_url for captured in environments]
    by_old: dict[str, UrlRemap] = {}
    for remap in remaps:
        if remap.recorded in by_old:
            raise UsageError(f"--environment-url names {snippet(remap.recorded)} twice")
        if remap.recorded not in recorded:
            known = ", ".join(dict.fromkeys(recorded))
            raise UsageError(
                f"--environment-url: no captured environment was recorded at "
                f"{snippet(remap.recorded)}",
                hint=f"OLD must be a recorded base URL; the bundle recorded: {known}",
            )
        by_old[remap.recorded] = remap
    urls: list[str] = []
    entries: list[EnvironmentRemap] = []
    for index, old in enumerate(recorded):
        moved = by_old.get(old)
        urls.append(old if moved is None else moved.replayed)
        if moved is not None:
            entries.append(
                EnvironmentRemap(
                    environment_index=index,
                    recorded_base_url=old,
                    base_url=moved.replayed,
                    source="oracle" if moved.source == "oracle" else "environment_url",
                    oracle=moved.oracle,
                )
            )
    return urls, entries


def remapped_identity(captured: EnvironmentIdentity, base_url: str) -> EnvironmentIdentity:
    """``captured`` as it would read at ``base_url``: only the two URL fields change."""
    if base_url == captured.base_url:
        return captured
    url = normalize_base_url(base_url)
    return captured.model_copy(
        update={"base_url": url.base_url, "websocket_url": url.websocket_url}
    )
