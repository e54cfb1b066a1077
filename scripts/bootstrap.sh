#!/usr/bin/env bash
# Make this checkout ready to run: Debian tools, then .venv with labkit installed.
# Called by `make demo` and `make test`; safe to run again (it does only what is missing).
set -euo pipefail
cd "$(dirname "$0")/.."

# command -> Debian package that provides it
declare -A NEEDED=(
  [ip]=iproute2 [ss]=iproute2 [ping]=iputils-ping [iperf3]=iperf3
  [ssh-keygen]=openssh-client [sshd]=openssh-server [unshare]=util-linux
  [h2load]=nghttp2-client
)
missing=()
for cmd in "${!NEEDED[@]}"; do
  # sshd lives in /usr/sbin, which is not on every user's PATH.
  command -v "$cmd" >/dev/null 2>&1 || [[ -x /usr/sbin/$cmd ]] || missing+=("${NEEDED[$cmd]}")
done
if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
  missing+=(python3-venv)
fi
if ((${#missing[@]})); then
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    echo "bootstrap: installing Debian packages: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "bootstrap: missing tools; install them first: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
fi

if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "bootstrap: labkit needs Python >= 3.11 (found $(python3 -V 2>&1))" >&2
  exit 1
fi

# Reinstall only when the dependency list changed since the last install.
stamp=.venv/.labkit-installed
if [[ ! -x .venv/bin/python ]]; then
  python3 -m venv .venv
fi
if [[ ! -f $stamp || pyproject.toml -nt $stamp ]]; then
  echo "bootstrap: installing labkit and its dependencies into .venv"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e '.[dev,notebooks]'
  touch "$stamp"
fi

# ghz (gRPC load generator) from the Go module proxy, built static so that
# `labkit deploy` can copy it to hosts of any distribution. Pinned: its JSON
# output is what labkit's parser is tested on.
GHZ_VERSION=v0.93.0
if [[ ! -x .venv/bin/ghz ]]; then
  if command -v go >/dev/null 2>&1; then
    echo "bootstrap: building ghz $GHZ_VERSION into .venv/bin"
    GOBIN="$PWD/.venv/bin" CGO_ENABLED=0 GOFLAGS=-mod=mod go install "github.com/bojand/ghz/cmd/ghz@$GHZ_VERSION" \
      || echo "bootstrap: could not build ghz; labkit load will say how to get it" >&2
  else
    echo "bootstrap: Go is not installed, so ghz is not built; labkit load needs it (https://ghz.sh)" >&2
  fi
fi
