"""`kiln-verify hf ...`: HF/TRL bundle export and verification (argument parsing only).

Exit 0 on success; 1 with the typed error's code, rule, file and fix; 2 for usage errors.
``--json`` prints the report (or ``{"error": ...}``) as JSON on stdout.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from kiln_verify.cli.hf_http_export import (
    EXPORT_URL,
    KEEP_SERVER_COPY,
    SERVER_URL,
    delete_report,
    http_export_report,
    list_report,
    local_only,
)
from kiln_verify.cli.hf_http_import import URL_OPTION, import_peft_report
from kiln_verify.cli.output import fail, print_json
from kiln_verify.errors import KilnError, UsageError
from kiln_verify.hf.manifest.sft import InvalidRowPolicy

__all__ = ["hf_app"]

if TYPE_CHECKING:  # the export stack is imported lazily inside each command
    from kiln_verify.hf.export.writer import ExportOutcome

hf_app = typer.Typer(
    help="HF/TRL hand-off: export bundles for external training and verify them.",
    no_args_is_help=True,
)

_MODEL = typer.Option(
    None,
    "--model",
    metavar="DIR",
    help=(
        "The resident HF model directory (config, tokenizer, chat template, *.safetensors); "
        "required without --url."
    ),
)
_NAME = typer.Option(
    ..., "--name", metavar="NAME", help="Export name: 1..128 of [A-Za-z0-9_-], first alphanumeric."
)
_OUTPUT = typer.Option(
    None,
    "--output",
    metavar="PATH",
    help=(
        "NAME.kiln-hf.tar.gz to create (default ./NAME.kiln-hf.tar.gz); the NAME.kiln-hf/ "
        "directory is published beside it."
    ),
)
_SPLIT = typer.Option(
    None,
    "--split-manifest",
    metavar="FILE",
    help="Optional evaluation split manifest (one JSON object).",
)
_TEMPLATE = typer.Option(
    None,
    "--training-template",
    metavar="FILE",
    help=(
        "TRL training template with {% generation %} blocks "
        "(default: derived from the model's chat template)."
    ),
)
_ADAPTER = typer.Option(
    None,
    "--input-adapter",
    metavar="DIR",
    help="Optional PEFT adapter directory training starts from (with --url: a server adapter).",
)
_SERVED = typer.Option(
    None,
    "--served-model-id",
    metavar="ID",
    help="Served model id to record (default: the model directory name).",
)
_JSON = typer.Option(False, "--json", help="Print the report (or the error) as JSON.")
_SFT_FILE = typer.Option(
    None,
    "--file",
    metavar="FILE",
    help='SFT messages JSONL ({"messages": [...]} per line); with --url a path on the server.',
)
_DATASET = typer.Option(
    None, "--dataset", metavar="NAME", help="With --url: a dataset registered on the server."
)
_POLICY = typer.Option(
    "fail",
    "--invalid-row-policy",
    help="fail (abort on the first bad row) or skip (record and skip it).",
)
_GRPO_FILE = typer.Option(
    None,
    "--file",
    metavar="FILE",
    help=(
        "Canonical compact final-LF JSONL of GRPO groups with rollout provenance "
        "(with --url: a path on the server)."
    ),
)
_PATH = typer.Argument(
    ..., metavar="PATH", help="NAME.kiln-hf.tar.gz, or a NAME.kiln-hf bundle directory."
)
_COMPLETED = typer.Option(
    False,
    "--completed",
    help="Require a completed bundle: the pristine set plus exactly the four result files.",
)


def _run(action: Callable[[], dict[str, Any]], as_json: bool) -> None:
    try:
        report = action()
    except KilnError as exc:
        fail(exc, as_json=as_json)
    if as_json:
        print_json(report, sort_keys=True)
    else:
        for key, value in report.items():
            typer.echo(f"{key}: {value}")


def _output(name: str, output: Path | None) -> Path:
    return output if output is not None else Path(f"{name}.kiln-hf.tar.gz")


def _exported(outcome: ExportOutcome) -> dict[str, Any]:
    """What both export commands print: where the bundle went, then its verification report."""
    return {
        "directory": str(outcome.directory),
        "archive": str(outcome.archive),
        **outcome.report.to_json(),
    }


@hf_app.command("export-sft")
def export_sft_command(
    model: Path | None = _MODEL,
    file: Path | None = _SFT_FILE,
    name: str = _NAME,
    invalid_row_policy: InvalidRowPolicy = _POLICY,
    split_manifest: Path | None = _SPLIT,
    training_template: Path | None = _TEMPLATE,
    input_adapter: Path | None = _ADAPTER,
    served_model_id: str | None = _SERVED,
    output: Path | None = _OUTPUT,
    url: str | None = EXPORT_URL,
    dataset: str | None = _DATASET,
    keep_server_copy: bool = KEEP_SERVER_COPY,
    as_json: bool = _JSON,
) -> None:
    """Export an immutable, verified SFT bundle and its deterministic archive (locally, or
    on a server with --url: create, download, verify, publish, delete the server copy)."""
    from kiln_verify.hf.export.source import ExportSource
    from kiln_verify.hf.export.writer import export_sft

    def action() -> dict[str, Any]:
        if url is not None:
            local_only(url, model=model, training_template=training_template)
            local_only(url, served_model_id=served_model_id)
            return http_export_report(
                url,
                "sft",
                name=name,
                output=output,
                file=None if file is None else str(file),
                dataset=dataset,
                invalid_row_policy=invalid_row_policy,
                input_adapter=None if input_adapter is None else str(input_adapter),
                split_manifest=split_manifest,
                keep_server_copy=keep_server_copy,
            )
        model_dir, dataset_file = _local(model, file, dataset=dataset)
        outcome = export_sft(
            ExportSource(
                model=model_dir,
                training_template=training_template,
                input_adapter=input_adapter,
                served_model_id=served_model_id,
                split_manifest=split_manifest,
            ),
            dataset=dataset_file,
            name=name,
            output=_output(name, output),
            invalid_row_policy=invalid_row_policy,
        )
        return _exported(outcome)

    _run(action, as_json)


@hf_app.command("export-grpo")
def export_grpo_command(
    model: Path | None = _MODEL,
    file: Path | None = _GRPO_FILE,
    name: str = _NAME,
    split_manifest: Path | None = _SPLIT,
    training_template: Path | None = _TEMPLATE,
    input_adapter: Path | None = _ADAPTER,
    served_model_id: str | None = _SERVED,
    output: Path | None = _OUTPUT,
    url: str | None = EXPORT_URL,
    keep_server_copy: bool = KEEP_SERVER_COPY,
    as_json: bool = _JSON,
) -> None:
    """Export an immutable, verified recorded-GRPO bundle and its deterministic archive
    (locally, or on a server with --url)."""
    from kiln_verify.hf.export.source import ExportSource
    from kiln_verify.hf.export.writer import export_grpo

    def action() -> dict[str, Any]:
        if url is not None:
            local_only(url, model=model, training_template=training_template)
            local_only(url, served_model_id=served_model_id)
            return http_export_report(
                url,
                "grpo",
                name=name,
                output=output,
                file=None if file is None else str(file),
                input_adapter=None if input_adapter is None else str(input_adapter),
                split_manifest=split_manifest,
                keep_server_copy=keep_server_copy,
            )
        model_dir, dataset_file = _local(model, file)
        outcome = export_grpo(
            ExportSource(
                model=model_dir,
                training_template=training_template,
                input_adapter=input_adapter,
                served_model_id=served_model_id,
                split_manifest=split_manifest,
            ),
            dataset=dataset_file,
            name=name,
            output=_output(name, output),
        )
        return _exported(outcome)

    _run(action, as_json)


def _local(
    model: Path | None, file: Path | None, *, dataset: str | None = None
) -> tuple[Path, Path]:
    """The local form's required options (``--dataset`` is only for ``--url``)."""
    if dataset is not None:
        raise UsageError("--dataset names a server dataset: it needs --url")
    if model is None or file is None:
        raise UsageError("a local export needs --model and --file (or give --url)")
    return model, file


_DELETE_NAME = typer.Option(..., "--name", metavar="NAME", help="The server export to delete.")
_DELETE_SHA = typer.Option(
    None,
    "--export-sha256",
    metavar="DIGEST",
    help="Delete only this identity (If-Match); omitted: an unconditioned operator delete.",
)


@hf_app.command("list")
def list_command(url: str = SERVER_URL, as_json: bool = _JSON) -> None:
    """List the server's retained HF/TRL exports."""
    _run(lambda: list_report(url), as_json)


@hf_app.command("delete")
def delete_command(
    url: str = SERVER_URL,
    name: str = _DELETE_NAME,
    export_sha256: str | None = _DELETE_SHA,
    as_json: bool = _JSON,
) -> None:
    """Delete one server export (only the identity given by --export-sha256, if given)."""
    _run(lambda: delete_report(url, name, export_sha256), as_json)


@hf_app.command("verify")
def verify_command(
    path: Path = _PATH,
    completed: bool = _COMPLETED,
    as_json: bool = _JSON,
) -> None:
    """Verify an export archive or bundle: exact file set, self-digests, every artifact byte."""
    from kiln_verify.hf.verify import verify_hf_path

    _run(lambda: verify_hf_path(path, completed=completed).to_json(), as_json)


_BUNDLE = typer.Option(
    ...,
    "--bundle",
    metavar="DIR",
    help="The completed NAME.kiln-hf directory (train.py has run in it).",
)
_ADAPTER_NAME = typer.Option(
    ...,
    "--name",
    metavar="NAME",
    help="Adapter name: 1..128 of [A-Za-z0-9._-], first alphanumeric, no '..'.",
)
_LOCAL_MODEL = typer.Option(
    None,
    "--model",
    metavar="DIR",
    help="Local import: the resident HF model directory (config, tokenizer, *.safetensors).",
)
_LOCAL_REGISTRY = typer.Option(
    None,
    "--registry",
    metavar="DIR",
    help="Local import: adapter registry directory (created private if missing).",
)
_ENVELOPE_OUTPUT = typer.Option(
    None,
    "--output",
    metavar="PATH",
    help="NAME.kiln-hf-import.tar.gz to create (default ./NAME.kiln-hf-import.tar.gz).",
)


@hf_app.command("import-peft")
def import_peft_command(
    bundle: Path = _BUNDLE,
    name: str = _ADAPTER_NAME,
    model: Path | None = _LOCAL_MODEL,
    registry: Path | None = _LOCAL_REGISTRY,
    served_model_id: str | None = _SERVED,
    url: str | None = URL_OPTION,
    as_json: bool = _JSON,
) -> None:
    """Verify a completed bundle against the resident model and install its PEFT adapter
    (locally with --model/--registry, or on a server with --url)."""
    _run(
        lambda: import_peft_report(
            bundle=bundle,
            name=name,
            url=url,
            model=model,
            registry=registry,
            served_model_id=served_model_id,
        ),
        as_json,
    )


@hf_app.command("envelope")
def envelope_command(
    bundle: Path = _BUNDLE,
    name: str = _ADAPTER_NAME,
    output: Path | None = _ENVELOPE_OUTPUT,
    as_json: bool = _JSON,
) -> None:
    """Write the deterministic ten-file import envelope archive of a completed bundle."""
    from kiln_verify.hf.envelope import write_envelope_archive

    _run(lambda: write_envelope_archive(bundle, name, output).to_json(), as_json)


_IMPORT_PATH = typer.Argument(
    ...,
    metavar="PATH",
    help=(
        "NAME.kiln-hf-import.tar.gz, a NAME.kiln-hf-import envelope directory, or an "
        "installed adapter directory REGISTRY/NAME."
    ),
)
_INSTALLED_NAME = typer.Option(
    None,
    "--name",
    metavar="NAME",
    help="Installed adapter only: the name its receipt must bind (default: the directory name).",
)
_RESIDENT = typer.Option(
    None,
    "--model",
    metavar="DIR",
    help="Also require this resident model's identity and a structurally loadable adapter.",
)


@hf_app.command("verify-import")
def verify_import_command(
    path: Path = _IMPORT_PATH,
    name: str | None = _INSTALLED_NAME,
    model: Path | None = _RESIDENT,
    served_model_id: str | None = _SERVED,
    as_json: bool = _JSON,
) -> None:
    """Verify an import envelope (archive or directory) or an installed adapter directory."""
    from kiln_verify.hf.verify_import import verify_import_path

    _run(
        lambda: verify_import_path(path, name=name, model=model, served_model_id=served_model_id),
        as_json,
    )
