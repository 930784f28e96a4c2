"""``kiln-verify hf import-peft``'s two forms: local (``--model`` and ``--registry``) and
HTTP (``--url``).

The local form is the verified import into a registry directory, unchanged; ``--url``
hands the same completed bundle to :func:`kiln_verify.control_client.hf_import.import_over_http`,
which verifies it, streams its envelope to the server's ``POST
/v1/train/hf/peft/imports/{name}`` and accepts only the answer it predicted
(docs/hf-http-import.md). The forms exclude each other: ``--url`` with ``--model``,
``--registry`` or ``--served-model-id`` is a usage error (the server's own resident model
decides), and so is the local form without both of its options.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from kiln_verify.errors import UsageError

__all__ = ["URL_OPTION", "import_peft_report"]

URL_OPTION = typer.Option(
    None,
    "--url",
    metavar="URL",
    help=(
        "Import over HTTP into the kiln-verify serve --model (or Kiln) server at URL instead "
        "of --model/--registry; the server's answer must equal the receipt predicted here."
    ),
)


def import_peft_report(
    *,
    bundle: Path,
    name: str,
    url: str | None,
    model: Path | None,
    registry: Path | None,
    served_model_id: str | None,
) -> dict[str, Any]:
    """The report of whichever form the options name."""
    if url is not None:
        given = [
            flag
            for flag, value in (
                ("--model", model),
                ("--registry", registry),
                ("--served-model-id", served_model_id),
            )
            if value is not None
        ]
        if given:
            raise UsageError(
                f"--url imports into the server's resident model; drop {', '.join(given)}"
            )
        from kiln_verify.control_client.hf_import import import_over_http

        return import_over_http(bundle, name, url)
    if model is None or registry is None:
        raise UsageError(
            "give --model DIR and --registry DIR (a local import), or --url URL (over HTTP)"
        )
    from kiln_verify.hf.importer import import_peft

    return import_peft(
        bundle=bundle,
        name=name,
        model=model,
        registry=registry,
        served_model_id=served_model_id,
    ).to_json()
