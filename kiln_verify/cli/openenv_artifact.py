"""`kiln-verify openenv artifact RUN_ID KIND --output PATH`: a verified artifact download.

Only a kind in the run's manifest, from its own relative URL; Content-Length, strong
ETag, Cache-Control and nosniff checked against the manifest before the body is read;
the body counted, capped and hashed into a staging file beside ``PATH`` and published
only when everything matches (never over an existing file without ``--force``).
``--json`` prints the ``kiln.openenv-artifact-download.v1`` receipt.
"""

from __future__ import annotations

from typing import Annotated

import typer

from kiln_verify.cli.control_common import URL_DEFAULT, Json, RunId, Url, echo_json, with_client
from kiln_verify.control_client.client import ControlClient
from kiln_verify.control_client.download import download_artifact
from kiln_verify.openenv.records.reports import ArtifactDownloadReceipt

__all__ = ["register"]


def artifact_command(
    run_id: RunId,
    kind: Annotated[
        str, typer.Argument(metavar="KIND", help="Artifact kind: dataset, replay or summary.")
    ],
    output: Annotated[
        str, typer.Option("--output", metavar="PATH", help="Where to write the artifact.")
    ],
    force: Annotated[
        bool, typer.Option("--force", help="Replace an existing output file.")
    ] = False,
    as_json: Json = False,
    url: Url = URL_DEFAULT,
) -> None:
    """Download one published artifact of a run, verified against its manifest."""

    def work(client: ControlClient) -> ArtifactDownloadReceipt:
        return download_artifact(client, run_id, kind, output, force=force)

    receipt = with_client(url, work, as_json=as_json)
    if as_json:
        echo_json(receipt.to_json())
        return
    typer.echo(f"{receipt.kind}: {receipt.bytes} bytes, {receipt.sha256} -> {receipt.output_path}")


def register(app: typer.Typer) -> None:
    app.command("artifact")(artifact_command)
