# Two commands do all set-up on a fresh machine:
#   make plan STACK=<name>   offline plan of a bundled stack
#   make test                ruff, mypy, shellcheck, the docs site (--strict), then the whole
#                            test suite against real containerd 1.6 / 1.7 / 2.0 / 2.1 / 2.2
#                            and the real NVIDIA toolkit installers of every supported chart,
#                            and the real Pulumi CLI and kubernetes provider against a real
#                            Kubernetes control plane, each built from its Go module
#                            (scripts/build-oracles.sh, cached; scripts/test.sh)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STACK  ?= kind-smoke
FORMAT ?= text
export GPUPLANE_CACHE ?= $(HOME)/.cache/gpuplane
# mkdocs-material's banner about its successor is not a finding of the docs build.
export NO_MKDOCS_2_WARNING := 1

.PHONY: test test-fast plan venv containerd engine lint docs bench clean lock wheel

# Every Python dependency at the exact version requirements.lock holds (`make lock`).
$(BIN)/.installed: pyproject.toml requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c requirements.lock -e '.[test,docs]'
	# Bytecode for gpuplane's own modules, as pip writes it for an installed wheel: an
	# editable install has none, and where PYTHONDONTWRITEBYTECODE is set every process
	# (each `pulumi preview`, each CLI run of the tests) compiles them again (0.3-0.5 s).
	$(BIN)/python -m compileall -q components
	touch $@

venv: $(BIN)/.installed

# The real Pulumi engine and the Kubernetes control plane: `make test` builds them in the
# background while the rest of the suite runs (scripts/test.sh).
ENGINE_BUILDS := pulumi-3.260.0 pulumi-kubernetes-4.25.0 kubernetes-1.34.3 kubelet-1.34.3
ORACLE_BUILDS := $(filter-out $(ENGINE_BUILDS),$(notdir $(patsubst %/go.mod,%,$(wildcard tests/builds/*/go.mod))))

containerd:
	sh scripts/fetch-containerd.sh
	sh scripts/build-oracles.sh $(ORACLE_BUILDS)

engine:
	sh scripts/build-oracles.sh $(ENGINE_BUILDS)

test: venv containerd
	GPUPLANE_REQUIRE_REAL=$${GPUPLANE_REQUIRE_REAL:-$${CI:+1}} BIN=$(BIN) \
		ENGINE_BUILDS="$(ENGINE_BUILDS)" sh scripts/test.sh $(PYTEST_ARGS)

# The pure tier alone (tests/pure: no real program, no build): a quick check while editing.
test-fast: venv
	$(BIN)/python -m pytest -q tests/pure $(PYTEST_ARGS)

# gpuplane's wheel and its policy pack ready to publish (the wheel inside), in dist/: what
# a project of one's own installs (docs/own-program.md).
wheel: venv
	$(BIN)/python scripts/dist.py --out dist

plan: venv
	$(BIN)/gpuplane plan --stack $(STACK) --format $(FORMAT)

lint: venv
	$(BIN)/ruff check .
	$(BIN)/mypy
	sh scripts/shellcheck.sh

# Regenerate docs/reference/ from the code, then build the site into site/ (ignored).
docs: venv
	$(BIN)/python scripts/gen_docs.py
	$(BIN)/mkdocs build --strict --quiet --site-dir site

bench: venv containerd
	$(BIN)/python benchmarks/containerd_model.py
	$(BIN)/python benchmarks/plan_scale.py
	$(BIN)/python benchmarks/node_agent.py

# Re-resolve requirements.lock from pyproject.toml and requirements.pins (the Pulumi SDKs
# at the versions of the engine and providers tests/builds/ builds).
lock: venv
	$(BIN)/pip install -q pip-tools==7.6.2
	$(BIN)/pip-compile -q --extra test --extra docs --strip-extras --no-emit-index-url \
		--no-emit-find-links -c requirements.pins -o requirements.lock pyproject.toml

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .mypy_cache site dist
