"""The environment a bundle was collected from, as every OpenEnv bundle file records it.

``kiln.openenv-identity.v1`` (:class:`EnvironmentIdentityRecord`, with its typed
``/metadata`` projection) and one discovered environment's identity plus raw schemas
(:class:`EnvironmentInspection`), embedded in summaries, replay manifests and control-plane
runs. :meth:`EnvironmentIdentityRecord.from_identity` and :meth:`~EnvironmentIdentityRecord.
to_identity` convert to and from the live form of :mod:`kiln_verify.openenv.protocol.identity`.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field, StrictStr

from kiln_verify.core.digest import Sha256Digest
from kiln_verify.openenv.protocol.identity import EnvironmentIdentity, EnvironmentMetadata
from kiln_verify.records import FreeJson, Record, Sha256

__all__ = [
    "CLIENT_PROFILE",
    "IDENTITY_SCHEMA",
    "EnvironmentIdentityRecord",
    "EnvironmentInspection",
    "EnvironmentMetadataRecord",
    "EnvironmentSchema",
]

IDENTITY_SCHEMA: Final = "kiln.openenv-identity.v1"
CLIENT_PROFILE: Final = "openenv-http/1.x"


class EnvironmentMetadataRecord(Record):
    """The typed ``/metadata`` projection inside a recorded identity (six known keys).

    Differs from :class:`kiln_verify.openenv.protocol.identity.EnvironmentMetadata`: the contract
    requires ``description`` (a string, possibly empty) and the four optional texts are
    omitted when absent.
    """

    _omit_when_none = frozenset({"readme_content", "version", "author", "documentation_url"})

    name: Annotated[StrictStr, Field(min_length=1)]
    description: StrictStr
    readme_content: StrictStr | None = None
    version: StrictStr | None = None
    author: StrictStr | None = None
    documentation_url: StrictStr | None = None


class EnvironmentIdentityRecord(Record):
    """``kiln.openenv-identity.v1`` as embedded in summaries and replay manifests.

    Same keys and order as :class:`kiln_verify.openenv.protocol.identity.EnvironmentIdentity`, but
    ``authentication`` may be absent (legacy v2 receipts; it then means ``none``) and
    ``discovery_sha256`` is omitted when absent. Convert with :meth:`from_identity` and
    :meth:`to_identity`.
    """

    _omit_when_none = frozenset({"authentication", "discovery_sha256"})

    schema_: Literal["kiln.openenv-identity.v1"] = Field(IDENTITY_SCHEMA, alias="schema")
    client_profile: Literal["openenv-http/1.x"] = CLIENT_PROFILE
    base_url: Annotated[StrictStr, Field(min_length=1)]
    websocket_url: Annotated[StrictStr, Field(pattern=r"^wss?://")]
    authentication: Literal["none", "bearer"] | None = None
    openapi_version: StrictStr | None
    environments: list[StrictStr]
    metadata: EnvironmentMetadataRecord
    schema_sha256: Sha256
    discovery_sha256: Sha256 | None = None

    @property
    def authentication_method(self) -> Literal["none", "bearer"]:
        """The method, with the legacy absent value read as ``none`` (schema default)."""
        return self.authentication or "none"

    @classmethod
    def from_identity(cls, identity: EnvironmentIdentity) -> EnvironmentIdentityRecord:
        """Record a live identity; a missing metadata description is recorded as ``""``."""
        meta = identity.metadata
        return cls(
            schema=IDENTITY_SCHEMA,
            client_profile=CLIENT_PROFILE,
            base_url=identity.base_url,
            websocket_url=identity.websocket_url,
            authentication=identity.authentication,
            openapi_version=identity.openapi_version,
            environments=list(identity.environments),
            metadata=EnvironmentMetadataRecord(
                name=meta.name,
                description=meta.description or "",
                readme_content=meta.readme_content,
                version=meta.version,
                author=meta.author,
                documentation_url=meta.documentation_url,
            ),
            schema_sha256=identity.schema_sha256,
            discovery_sha256=identity.discovery_sha256,
        )

    def to_identity(self) -> EnvironmentIdentity:
        """The live-comparison form (``protocol.identity.ensure_unchanged``).

        An empty recorded description becomes ``None`` only if it was empty: discovery
        without a description compares equal to a recorded ``""``.
        """
        meta = self.metadata
        return EnvironmentIdentity(
            schema=IDENTITY_SCHEMA,
            client_profile=CLIENT_PROFILE,
            base_url=self.base_url,
            websocket_url=self.websocket_url,
            authentication=self.authentication_method,
            openapi_version=self.openapi_version,
            environments=list(self.environments),
            metadata=EnvironmentMetadata(
                name=meta.name,
                description=meta.description or None,
                readme_content=meta.readme_content,
                version=meta.version,
                author=meta.author,
                documentation_url=meta.documentation_url,
            ),
            schema_sha256=self.schema_sha256,
            discovery_sha256=self.discovery_sha256,
        )

    def schema_digest(self) -> Sha256Digest:
        return Sha256Digest.parse(self.schema_sha256)


class EnvironmentSchema(Record):
    """The raw ``GET /schema`` JSON Schemas (free-form; written with sorted keys)."""

    action: FreeJson
    observation: FreeJson
    state: FreeJson


class EnvironmentInspection(Record):
    """One discovered environment: identity plus schemas, in ``--environment`` order."""

    identity: EnvironmentIdentityRecord
    schema_: EnvironmentSchema = Field(alias="schema")
