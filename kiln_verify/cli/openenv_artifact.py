"""`kiln-verify openenv artifact RUN_ID KIND --output PATH`: a verified artifact download;
`kiln-verify openenv artifact RUN_ID --all --output-dir DIR`: the whole run.

Only a kind in the run's manifest, from its own relative URL; Content-Length, strong
ETag, Cache-Control and nosniff checked against the manifest before the body is read;
the body counted, capped and hashed into a staging file beside ``PATH`` and published
only when everything matches (never over an existing file without ``--force``).
``--json`` prints the ``kiln.openenv-artifact-download.v1`` receipt.

``--all`` downloads every artifact of an ended run's manifest with the same checks into
``DIR``, each at its path of the run's own layout, plus the status as ``run.json``; the
directory appears complete or not at all (an existing one is refused without
``--force``). ``--json`` prints our ``kiln-verify.run-download.v1`` receipt;
``kiln-verify openenv verify-run DIR`` then checks the whole chain offline.
"""

from __future__ import annotations

from typing import Annotated

import typer

from kiln_verify.cli.control_common import URL_DEFAULT, Json, RunId, Url, echo_json, with_client
from kiln_verify.cli.output import fail
from kiln_verify.control_client.client import ControlClient
from kiln_verify.control_client.download import download_artifact
from kiln_verify.errors import UsageError
from kiln_verify.openenv.records.reports import ArtifactDownloadReceipt

__all__ = ["register"]


def _download_all(run_id: str, output_dir: str, *, force: bool, as_json: bool, url: str) -> None:
    from kiln_verify.control_client.download_run import download_run
    from kiln_verify.openenv.runcheck.records import RunDownloadReceipt

    def work(client: ControlClient) -> RunDownloadReceipt:
        return download_run(client, run_id, output_dir, force=force)

    receipt = with_client(url, work, as_json=as_json)
    if as_json:
        echo_json(receipt.to_json())
        return
    for item in receipt.files:
        typer.echo(f"{item.kind}: {item.bytes} bytes, {item.sha256} -> {item.relative_path}")
    typer.echo(
        f"run {receipt.run_id} ({receipt.run_kind}, {receipt.state}): {len(receipt.files)} "
        f"artifacts and {receipt.status_file} -> {receipt.output_dir}"
    )


def artifact_command(
    run_id: RunId,
    kind: Annotated[
        str | None,
        typer.Argument(
            metavar="[KIND]",
            help="Artifact kind (dataset, replay, summary, ...); omitted with --all.",
        ),
    ] = None,
    output: Annotated[
        str | None,
        typer.Option("--output", metavar="PATH", help="Where to write the artifact."),
    ] = None,
    all_kinds: Annotated[
        bool,
        typer.Option("--all", help="Download every artifact of the run and its status."),
    ] = False,
    output_dir: Annotated[
        str | None,
        typer.Option("--output-dir", metavar="DIR", help="With --all: the directory to create."),
    ] = None,
    force: Annotated[
        bool,
        typer.Option("--force", help="Replace an existing output file (or directory's files)."),
    ] = False,
    as_json: Json = False,
    url: Url = URL_DEFAULT,
) -> None:
    """Download one published artifact of a run (or --all), verified against its manifest."""
    if all_kinds:
        if kind is not None or output is not None or output_dir is None:
            fail(
                UsageError(
                    "--all takes --output-dir DIR and neither KIND nor --output",
                    fields=("kind", "output", "output_dir"),
                ),
                as_json=as_json,
            )
        _download_all(run_id, output_dir, force=force, as_json=as_json, url=url)
        return
    if kind is None or output is None or output_dir is not None:
        fail(
            UsageError(
                "name KIND and --output PATH (or --all --output-dir DIR for the whole run)",
                fields=("kind", "output", "output_dir"),
            ),
            as_json=as_json,
        )

    def work(client: ControlClient) -> ArtifactDownloadReceipt:
        return download_artifact(client, run_id, kind, output, force=force)

    receipt = with_client(url, work, as_json=as_json)
    if as_json:
        echo_json(receipt.to_json())
        return
    typer.echo(f"{receipt.kind}: {receipt.bytes} bytes, {receipt.sha256} -> {receipt.output_path}")


def register(app: typer.Typer) -> None:
    app.command("artifact")(artifact_command)
