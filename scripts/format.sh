#!/usr/bin/env bash
# Apply the project's formatter and the safe lint fixes (settings in
# pyproject.toml [tool.ruff]). `.ci/run` checks both with --check / no --fix.
# Usage: scripts/format.sh [paths...]   (default: src tests benchmarks)
set -euo pipefail
cd "$(dirname "$0")/.."
ruff=${RUFF:-.venv/bin/ruff}
paths=("$@")
[ "${#paths[@]}" -gt 0 ] || paths=(src tests benchmarks)
"$ruff" check --fix "${paths[@]}"
"$ruff" format "${paths[@]}"
