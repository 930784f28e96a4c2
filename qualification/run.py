#!/usr/bin/env python3
"""Entry point: ``python3 qualification/run.py qualification/workloads/NAME.json --variant V
--host-id ID [...]`` or ``--check RECEIPT``. All logic lives in ``qualification/runner``."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from qualification.runner.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
