#!/usr/bin/env bash
# The project's whole check: lint, the import contract (the layers of docs/ARCHITECTURE.md),
# strict typing, then the test suite.
# README's test command and .ci/run both call this script, so they can never drift apart.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== ruff"
ruff check .
echo "== lint-imports (the layer contract in pyproject.toml)"
lint-imports
echo "== mypy --strict"
mypy
echo "== pytest"
# In parallel (pytest-xdist): one worker more than the cores (many tests wait on servers and
# child processes), each test module whole on one worker so its fixtures are built once
# (modules sharing an OpenEnv peer fixture together: tests/scheduling.py),
# longest work units first in the order tests/scheduling.py sets (hence no xdist reordering).
# Arguments come after these, so `-n 0` runs serially and `--shuffle SEED` runs the modules
# and their tests in a random order (docs/performance.md, "Test suite wall time").
# Compiled bytecode is kept (__pycache__, git-ignored): where PYTHONDONTWRITEBYTECODE is set,
# every worker re-compiles and re-rewrites every test module it collects (~7 s CPU each) and
# each of the suite's hundreds of `kiln-verify` and oracle child processes re-compiles the
# package from source (~0.25 s CPU each). The package is compiled once, up front, so the
# workers and their children do not race to do it (docs/performance.md).
unset PYTHONDONTWRITEBYTECODE
python -m compileall -q -j 0 kiln_verify oracle pytest_kiln >/dev/null
workers=$(python -c 'import os; print(len(os.sched_getaffinity(0)) + 1)')
set +e
python -m pytest -n "$workers" --dist loadfile --no-loadscope-reorder "$@"
status=$?
set -e
# Exit status 5 means "no tests collected": a selection that matched nothing is not a failure
# of the project, but it must never pass silently either, so say so and succeed explicitly.
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests for this selection" >&2
  exit 0
fi
exit "$status"
