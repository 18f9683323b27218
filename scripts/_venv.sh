# Shared by the scripts: create the virtualenv (once) and install dpkit into it. The virtualenv is
# .venv, or the one DPKIT_VENV names (.ci/run builds the docs in one of their own); $VENV is its
# path.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3}"
VENV="${DPKIT_VENV:-.venv}"
if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi
export PIP_DISABLE_PIP_VERSION_CHECK=1
