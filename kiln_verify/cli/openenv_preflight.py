"""`kiln-verify openenv preflight --request FILE`: ask a server to admit a training intent.

The file is one ``OpenEnvTrainingPreflightRequest`` object (``adapter``, ``output_adapter``,
``training_config``, ``auto_load``, ``post_eval``; the same file rules as ``openenv start``:
a regular non-symlink file of at most 1 MiB). The server answers Kiln's
``kiln.openenv-training-preflight.v1`` receipt, the exact effective GRPO configuration a
run with this intent would train with, or a typed refusal; nothing is reserved, collected
or written. ``--json`` prints the receipt as the server sent it (validated first).
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from kiln_verify.cli.control_common import URL_DEFAULT, Json, Url, echo_json, with_client
from kiln_verify.cli.output import fail
from kiln_verify.control.training.records import OpenEnvTrainingPreflightReceipt
from kiln_verify.control_client.client import ControlClient, load_run_request
from kiln_verify.errors import ControlResponseInvalid, KilnError

__all__ = ["PREFLIGHT_PATH", "register"]

PREFLIGHT_PATH = "/v1/openenv/training/preflight"


def _receipt_table(receipt: OpenEnvTrainingPreflightReceipt) -> Table:
    config = receipt.effective_config
    policy = receipt.behavior_policy
    capacity = receipt.capacity
    table = Table(title="Training admitted (nothing reserved)", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    rows = (
        ("output adapter", str(config.output_name)),
        ("behaviour adapter", config.base_adapter or "base"),
        ("behaviour policy", f"{policy.served_model_id} ({policy.implementation})"),
        ("auto_load", str(config.auto_load).lower()),
        (
            "learning_rate",
            "runner default" if config.learning_rate is None else repr(config.learning_rate),
        ),
        ("lora rank / alpha", f"{config.lora_rank} / {config.lora_alpha:g}"),
        ("kl_coeff", repr(config.kl_coeff)),
        (
            "capacity",
            f"{capacity.queued_jobs} queued of {capacity.max_queued_jobs}, "
            f"{capacity.tracked_jobs} tracked of {capacity.max_tracked_jobs}",
        ),
    )
    for key, value in rows:
        table.add_row(key, value)
    return table


def preflight_command(
    request: Annotated[
        str,
        typer.Option(
            "--request",
            metavar="FILE",
            help="JSON file holding one OpenEnvTrainingPreflightRequest object.",
        ),
    ],
    url: Url = URL_DEFAULT,
    as_json: Json = False,
) -> None:
    """Check a training intent against the server before any collection (nothing reserved)."""
    try:
        body = load_run_request(request)
    except KilnError as exc:
        fail(exc, as_json=as_json)

    def work(client: ControlClient) -> OpenEnvTrainingPreflightReceipt:
        answer = OpenEnvTrainingPreflightReceipt
        receipt, status = client._json(answer, "POST", PREFLIGHT_PATH, body)
        if status != 200:
            raise ControlResponseInvalid(f"POST {PREFLIGHT_PATH} answered {status}, not 200")
        return receipt

    receipt = with_client(url, work, as_json=as_json)
    if as_json:
        echo_json(receipt.to_json())
    else:
        Console(file=sys.stdout).print(_receipt_table(receipt))


def register(app: typer.Typer) -> None:
    app.command("preflight")(preflight_command)
