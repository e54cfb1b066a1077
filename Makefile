# The commands of the README: `make demo` (the main job), `make test` and `make lab` (JupyterLab).
VENV := .venv
BIN := $(VENV)/bin

.PHONY: bootstrap demo test lab proto clean-testbeds

## The whole set-up: what every target below needs (scripts/bootstrap.sh).
bootstrap:
	@scripts/bootstrap.sh

## Bring up the local testbed, run the idle-connection experiment, summarize, tear down. Its set-up is the demo's
## alone (no load tools, protoc plugins, test tools or Jupyter kernel); a later target adds the rest.
demo:
	@scripts/bootstrap.sh demo
	$(BIN)/labkit demo

## The whole test suite (testbed tests need root; CI sets LABKIT_REQUIRE_TESTBED=1). Modules go to the workers in the
## order tests/conftest.py collects them (longest first), not xdist's default order by number of tests. Four workers
## on two cores: most of a testbed test waits out its link's delays, and no test asserts how well the machine keeps time.
## PYTEST_ARGS go to pytest (a module, -k ...). Without PYTHONDONTWRITEBYTECODE (which some shells and CI runners set):
## pytest then keeps its rewritten test modules in tests/__pycache__ (git-ignored) and each worker collects in 10 s of
## CPU, not 20.
test: bootstrap
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q -ra -n 4 --dist loadfile --no-loadscope-reorder --durations=30 $(PYTEST_ARGS)

## JupyterLab on notebooks/ with the labkit kernel; prints the URL with its token (LAB_ARGS go to jupyter lab).
lab: bootstrap
	@scripts/lab.sh $(LAB_ARGS)

## Regenerate the committed gRPC stubs from proto/echo.proto with the pinned grpcio-tools.
proto: bootstrap
	$(BIN)/python -m labkit.proto.regenerate

## Remove every testbed left behind (by name prefix labkit-), e.g. after a crash.
clean-testbeds: bootstrap
	$(BIN)/labkit testbed down --all
