#!/usr/bin/env bash
# Create .venv/ at the repository root and install the pinned project into it. Idempotent: a second run
# only checks the pins. `--dev` adds the test tools and Debian's Chromium (the report's browser test).
set -euo pipefail
cd "$(dirname "$0")/../.."

extras="all"
if [[ "${1:-}" == "--dev" ]]; then
  extras="all,dev"
fi

python=${PYTHON:-python3.11}
command -v "$python" >/dev/null 2>&1 || python=python3
if ! "$python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
  echo "setup.sh: Python 3.11 is required (torch 2.14.1 / torchvision 0.29.1 pins); found $("$python" --version)" >&2
  exit 1
fi
if [[ ! -x .venv/bin/python ]]; then
  # the pinned torch is a CUDA build: .venv takes about 6.3 GB; a full disk otherwise shows up only as pip's
  # "[Errno 28] No space left on device" halfway through the install
  free_kb=$(df -Pk . | awk 'NR == 2 {print $4}')
  if [[ "$free_kb" =~ ^[0-9]+$ ]] && (( free_kb < 7 * 1024 * 1024 )); then
    echo "setup.sh: warning: $((free_kb / 1024)) MB free on $(df -P . | awk 'NR == 2 {print $6}');" \
      ".venv needs about 6.3 GB (torch 2.14.1 with its CUDA libraries)" >&2
  fi
  echo "setup.sh: creating .venv with $("$python" --version)" >&2
  "$python" -m venv .venv
fi
# Pinned versions only: an open torch range would pull a multi-GB CUDA build.
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[${extras}]"

if [[ "$extras" == *dev* ]] && ! command -v chromium >/dev/null 2>&1; then
  if [[ $(id -u) -eq 0 ]]; then
    echo "setup.sh: installing Debian's chromium for the report's browser test" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "setup.sh: chromium is missing; install it (apt-get install chromium) for the report's browser test" >&2
  fi
fi
echo "setup.sh: .venv ready ($(.venv/bin/python -c 'import torch; print("torch", torch.__version__)'))" >&2
