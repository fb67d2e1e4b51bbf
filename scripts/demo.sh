#!/usr/bin/env bash
# The main job on the embedded default: installs what is needed, then runs on a local
# sandboxed desktop. Extra arguments go to the command.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/install.sh
exec uv run --frozen osworld-gym run --task text_editor-append-001 --out runs/demo "$@"
