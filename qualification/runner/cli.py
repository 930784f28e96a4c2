"""Command line: qualify a workload, or ``--check`` an existing receipt.

Exit codes: 0 verdict pass (or a receipt that checks out), 1 verdict fail (the receipt is
still written) or an invalid receipt, 2 refused before anything ran.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import receipt
from .common import Refusal
from .qualify import Request, qualify

REPO = Path(__file__).resolve().parents[2]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="qualification/run.py",
        description="Run a committed qualification workload and write a receipt.",
    )
    p.add_argument("workload", nargs="?", help="qualification/workloads/NAME.json")
    p.add_argument("--variant", help="a variant the workload declares (cpu, cuda, ...)")
    p.add_argument("--host-id", help="this host's id: ^[a-z0-9][a-z0-9._-]{2,127}$")
    p.add_argument("--model", help="model directory (fingerprinted before and after)")
    p.add_argument("--model-id", help="human name of --model, e.g. Qwen/Qwen3.5-4B")
    p.add_argument("--var", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--receipt-id", help="receipt id (default: timestamp-variant-host-workload)")
    p.add_argument("--check", metavar="RECEIPT", help="validate an existing receipt and exit")
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    if args.check is not None:
        if args.workload is not None:
            print("error: --check takes no workload", file=sys.stderr)
            return 2
        try:
            notes = receipt.check(Path(args.check), REPO)
        except (receipt.ReceiptInvalid, Refusal) as error:
            print(f"receipt invalid: {args.check}: {error}", file=sys.stderr)
            return 1
        for note in notes:
            print(f"note: {note}")
        print(f"receipt ok: {args.check}")
        return 0
    if args.workload is None or args.variant is None or args.host_id is None:
        print("error: WORKLOAD, --variant and --host-id are required", file=sys.stderr)
        return 2
    request = Request(
        workload=args.workload, variant=args.variant, host_id=args.host_id, model=args.model,
        model_id=args.model_id, variables=args.var, receipt_id=args.receipt_id,
        command=["qualification/run.py", *argv],
    )  # fmt: skip
    try:
        path, record = qualify(request, REPO)
    except Refusal as refusal:
        print(f"qualification refused: {refusal}", file=sys.stderr)
        return 2
    for failure in record["failures"]:
        print(f"failure: {failure}", file=sys.stderr)
    print(f"verdict {record['verdict']}: {path.relative_to(REPO)}")
    return 0 if record["verdict"] == "pass" else 1
