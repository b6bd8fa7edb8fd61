#!/usr/bin/env bash
# One entry point for people and CI:
#   ./run.sh demo   install everything (system packages + virtualenv) and run the demo
#   ./run.sh test   install everything and run the test suite
#   ./run.sh setup  only install
# Everything else the project does is reachable from .venv/bin/python -m <package>.
set -euo pipefail
cd "$(dirname "$0")"

cmd="${1:-help}"
shift || true

case "$cmd" in
  setup)
    bash scripts/setup.sh
    ;;
  demo)
    bash scripts/setup.sh
    exec .venv/bin/python -m sandbox.demo "$@"
    ;;
  test)
    bash scripts/setup.sh
    .venv/bin/ruff check .
    # two workers (tests/conftest.py): the Spark modules on one, the rest beside them; KMON_TEST_WORKERS=0 runs serially
    exec .venv/bin/python -m pytest -n "${KMON_TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder "$@"
    ;;
  *)
    echo "usage: ./run.sh demo|test|setup [args...]" >&2
    exit 2
    ;;
esac
