#!/usr/bin/env bash
# `make lab`: JupyterLab on notebooks/ (or $LABKIT_LAB_ROOT) with this checkout's venv and its kernel, labkit.
# JupyterLab prints the URL to open, with its token; the browser opens by itself only where there is a display.
# Extra arguments go to `jupyter lab` (e.g. --port 8899).
set -euo pipefail
cd "$(dirname "$0")/.."
args=(--ServerApp.root_dir="${LABKIT_LAB_ROOT:-$PWD/notebooks}" --ip=127.0.0.1)
[[ -n ${DISPLAY:-}${WAYLAND_DISPLAY:-} ]] || args+=(--no-browser)
# The testbed needs root, so labkit's users often are; Jupyter refuses root unless told.
[[ $(id -u) -ne 0 ]] || args+=(--allow-root)
exec .venv/bin/jupyter lab "${args[@]}" "$@"
