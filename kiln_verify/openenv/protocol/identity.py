"""The environment identity record ``kiln.openenv-identity.v1`` and its digests.

An identity pins *which* environment a run talked to: the URLs, how we authenticated
(never the token), the typed metadata, and two content digests over the raw discovery
documents (kiln-openenv-contract §4). Comparing two identities names the fields that
changed, which is how a long collection or a replay notices that the server under it
was redeployed. A server that predates ``/list_environments`` (404) advertises no names:
its identity lists ``[]`` and its discovery preimage holds ``null`` for that document.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kiln_verify.core.digest import parsed_digest
from kiln_verify.errors import DiscoveryInvalid, EnvironmentIdentityChanged, snippet
from kiln_verify.limits import MAX_CATALOG_NAMES, MAX_SELECTOR_BYTES

IDENTITY_SCHEMA: Final = "kiln.openenv-identity.v1"
DISCOVERY_SCHEMA: Final = "kiln.openenv-discovery.v1"
CLIENT_PROFILE: Final = "openenv-http/1.x"
_DIGEST = r"^sha256:[0-9a-f]{64}$"
_SCHEMA_PARTS = ("action", "observation", "state")


class EnvironmentMetadata(BaseModel):
    """The typed projection of ``/metadata``; unknown server fields stay in the digest only."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    name: str
    description: str | None = None
    readme_content: str | None = None
    version: str | None = None
    author: str | None = None
    documentation_url: str | None = None


class EnvironmentIdentity(BaseModel):
    """``kiln.openenv-identity.v1``: what a run records about the environment it used."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    schema_: Literal["kiln.openenv-identity.v1"] = Field(IDENTITY_SCHEMA, alias="schema")
    client_profile: Literal["openenv-http/1.x"] = CLIENT_PROFILE
    base_url: str
    websocket_url: str
    authentication: Literal["none", "bearer"]
    openapi_version: str | None
    environments: list[str]
    metadata: EnvironmentMetadata
    schema_sha256: str = Field(pattern=_DIGEST)
    discovery_sha256: str | None = Field(default=None, pattern=_DIGEST)

    def to_json(self) -> dict[str, Any]:
        """The record as a JSON object, with ``schema`` spelled as in the contract."""
        return self.model_dump(mode="json", by_alias=True)


#: The status that says a server predates ``GET /list_environments`` (openenv-core 0.3.0,
#: openenv 0.3.1 and 0.4.0 have no such route; 0.5.0 added it). Any other non-200 status
#: is a failure, as before.
INVENTORY_ABSENT_STATUS: Final = 404


@dataclass(frozen=True, slots=True)
class DiscoveryDocuments:
    """The four raw discovery bodies, parsed but otherwise untouched.

    ``inventory_route`` is false when ``/list_environments`` answered 404: the server
    predates the route, so there is no fourth document. ``environments`` is then ``None``
    and the preimage records JSON ``null`` there -- a value no server can send in its
    place (a 200 ``null`` body is refused), so "no route" and "an empty list" keep
    different digests.
    """

    metadata: Any
    environment_schema: Any
    environments: Any
    openapi: Any
    inventory_route: bool = True

    def __post_init__(self) -> None:
        if not self.inventory_route and self.environments is not None:
            raise ValueError("a server without /list_environments has no environments document")

    def preimage(self) -> dict[str, Any]:
        return {
            "schema": DISCOVERY_SCHEMA,
            "metadata": self.metadata,
            "environment_schema": self.environment_schema,
            "environments": self.environments if self.inventory_route else None,
            "openapi": self.openapi,
        }

    def advertised_names(self) -> list[str]:
        """The advertised environment names; none (``[]``) without the inventory route."""
        if not self.inventory_route:
            return []
        return environment_names(self.environments)


def _schema_parts(document: Any) -> dict[str, Any]:
    if not isinstance(document, dict):
        raise DiscoveryInvalid("/schema must be a JSON object")
    for key in _SCHEMA_PARTS:
        if key not in document:
            raise DiscoveryInvalid(f"/schema lacks {key!r}")
        if not isinstance(document[key], dict | bool):
            raise DiscoveryInvalid(f"/schema {key} must be a JSON Schema (object or boolean)")
    return document


def environment_names(document: Any) -> list[str]:
    if not isinstance(document, list) or not all(isinstance(name, str) for name in document):
        raise DiscoveryInvalid("/list_environments must be a JSON array of strings")
    if len(document) > MAX_CATALOG_NAMES:
        raise DiscoveryInvalid(
            f"/list_environments lists {len(document)} names; MAX_CATALOG_NAMES = "
            f"{MAX_CATALOG_NAMES}"
        )
    for name in document:
        if not 1 <= len(name.encode("utf-8", "surrogatepass")) <= MAX_SELECTOR_BYTES:
            raise DiscoveryInvalid(
                f"environment name {snippet(name)} is not 1..{MAX_SELECTOR_BYTES} bytes"
            )
    return list(document)


def _metadata(document: Any) -> EnvironmentMetadata:
    if not isinstance(document, dict):
        raise DiscoveryInvalid("/metadata must be a JSON object")
    known = {key: document[key] for key in EnvironmentMetadata.model_fields if key in document}
    try:
        return EnvironmentMetadata.model_validate(known)
    except ValidationError as exc:
        fields = sorted({str(error["loc"][0]) for error in exc.errors() if error["loc"]})
        raise DiscoveryInvalid(f"/metadata fields have the wrong type: {fields}") from None


def _openapi_version(document: Any) -> str | None:
    if not isinstance(document, dict):
        raise DiscoveryInvalid("/openapi.json must be a JSON object")
    info = document.get("info")
    if info is None:
        return None
    if not isinstance(info, dict):
        raise DiscoveryInvalid("/openapi.json info must be an object")
    version = info.get("version")
    if version is not None and not isinstance(version, str):
        raise DiscoveryInvalid("/openapi.json info.version must be a string")
    return version


def build_identity(
    *, base_url: str, websocket_url: str, authenticated: bool, documents: DiscoveryDocuments
) -> EnvironmentIdentity:
    """Check the documents' shapes and compute the identity with the §4 digests."""
    schema = _schema_parts(documents.environment_schema)
    return EnvironmentIdentity(
        schema=IDENTITY_SCHEMA,
        client_profile=CLIENT_PROFILE,
        base_url=base_url,
        websocket_url=websocket_url,
        authentication="bearer" if authenticated else "none",
        openapi_version=_openapi_version(documents.openapi),
        environments=documents.advertised_names(),
        metadata=_metadata(documents.metadata),
        schema_sha256=str(parsed_digest(schema)),
        discovery_sha256=str(parsed_digest(documents.preimage())),
    )


_IDENTITY_FIELDS = (
    "schema_",
    "client_profile",
    "base_url",
    "websocket_url",
    "authentication",
    "openapi_version",
    "environments",
    "metadata",
    "schema_sha256",
)


def compare_identities(
    expected: EnvironmentIdentity,
    actual: EnvironmentIdentity,
    *,
    expected_schema: Mapping[str, Any] | None = None,
    actual_schema: Mapping[str, Any] | None = None,
) -> list[str]:
    """Names of the fields that differ (Kiln's ``ensure_unchanged``), in a fixed order.

    ``discovery_sha256`` is compared only when ``expected`` has one; the action,
    observation and state schemas (``schema.action`` ...) only when both raw ``/schema``
    documents are given. The token never enters an identity, so rotating it changes nothing.
    """
    changed = [
        "schema" if name == "schema_" else name
        for name in _IDENTITY_FIELDS
        if getattr(expected, name) != getattr(actual, name)
    ]
    if expected.discovery_sha256 is not None and (
        expected.discovery_sha256 != actual.discovery_sha256
    ):
        changed.append("discovery_sha256")
    if expected_schema is not None and actual_schema is not None:
        for part in _SCHEMA_PARTS:
            if expected_schema.get(part) != actual_schema.get(part):
                changed.append(f"schema.{part}")
    return changed


def ensure_unchanged(
    expected: EnvironmentIdentity,
    actual: EnvironmentIdentity,
    *,
    expected_schema: Mapping[str, Any] | None = None,
    actual_schema: Mapping[str, Any] | None = None,
) -> None:
    """Raise :class:`EnvironmentIdentityChanged` naming only the changed fields."""
    changed = compare_identities(
        expected, actual, expected_schema=expected_schema, actual_schema=actual_schema
    )
    if changed:
        raise EnvironmentIdentityChanged(f"environment identity changed: {', '.join(changed)}")
