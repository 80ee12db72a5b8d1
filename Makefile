# memkit: every command a newcomer or CI needs. Each target creates .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# aws-sam-cli pins its own boto3/pydantic ranges, so it lives in a venv of its own.
SAM_VENV := .tools/sam
SAM := $(SAM_VENV)/bin/sam
# checkov too (its own pins), at a fixed version so a new release's checks arrive on purpose.
CHECKOV_VENV := .tools/checkov
CHECKOV := $(CHECKOV_VENV)/bin/checkov
CHECKOV_VERSION := 3.3.30
# schemathesis (fuzzing the HTTP API) in a venv of its own, pinned likewise.
ST_VENV := .tools/schemathesis
ST := $(ST_VENV)/bin/st
ST_VERSION := 4.32.5
# The SDK (memkit-client, sdk/pyproject.toml) and the CLI (memkit-cli, devkit/pyproject.toml)
# as wheels (`make wheels`): what an agent's environment installs. Not published to PyPI.
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
CLIENT_WHEEL := dist/memkit_client-$(VERSION)-py3-none-any.whl
CLI_WHEEL := dist/memkit_cli-$(VERSION)-py3-none-any.whl
LIBRARY_SOURCES := $(shell find layers/memkit/memkit sdk/memkit -name '*.py')
# The worked AgentCore example (examples/agentcore_agent.py) runs where an agent runs: in a
# venv of its own, with the bedrock-agentcore SDK (it pins its own pydantic, and its Strands
# extra an mcp older than memkit's) and memkit's SDK as its wheel, at a fixed version.
AGENTCORE_VENV := .tools/agentcore
AGENTCORE := $(AGENTCORE_VENV)/.installed
AGENTCORE_SDK_VERSION := 1.25.0
SEED ?= 1
PORT ?= 8000
# Test processes of `make test` and `make integration` (pytest-xdist; 0: one process, no
# workers). Each test file runs whole in one of them: a module's local stack serves all of
# its tests. Three on two cores: the tests wait on their local stacks' processes about half
# the time (the whole suite: 569 s wall, 640 s of CPU, at three).
TEST_WORKERS ?= 3
PYTEST_PARALLEL := -n $(TEST_WORKERS) --dist loadfile
export AWS_DEFAULT_REGION ?= us-east-1
export AWS_ACCOUNT_ID_ENDPOINT_MODE := disabled
export PYDANTIC_DISABLE_PLUGINS := __all__
export SAM_CLI_TELEMETRY := 0

.PHONY: help serve test coverage wheels lint typecheck template scan fuzz-quick fuzz unit integration agentcore-example bench docs build deploy clean
.DEFAULT_GOAL := help

## help: list these targets (what `make` alone does)
help:
	@awk -F': ' '/^## [a-z-]+: / { sub(/^## /, ""); printf "  make %-12s %s\n", $$1, substr($$0, length($$1) + 3) }' $(MAKEFILE_LIST)

$(STAMP): pyproject.toml
	@echo "installing memkit and its development tools into $(VENV) (a few minutes the first time)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

$(SAM): | $(STAMP)
	$(PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(SAM_VENV)/bin/python -m pip install --quiet "aws-sam-cli>=1.120,<2"

$(CHECKOV):
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(CHECKOV_VENV)/bin/python -m pip install --quiet "checkov==$(CHECKOV_VERSION)"

$(ST):
	$(PYTHON) -m venv $(ST_VENV)
	$(ST_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(ST_VENV)/bin/python -m pip install --quiet "schemathesis==$(ST_VERSION)"

# Made anew when the wheel changes: pip keeps an installed wheel of the same version.
$(AGENTCORE): $(CLIENT_WHEEL)
	rm -rf $(AGENTCORE_VENV)
	$(PYTHON) -m venv $(AGENTCORE_VENV)
	$(AGENTCORE_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(AGENTCORE_VENV)/bin/python -m pip install --quiet "$(CLIENT_WHEEL)" \
	  "bedrock-agentcore==$(AGENTCORE_SDK_VERSION)"
	touch $(AGENTCORE)

# pip wheel builds in the project's folder: its build/ is cleared first, or a module removed
# since the last build would still be packed. The build backend (setuptools) comes from the index.
$(CLIENT_WHEEL): sdk/pyproject.toml sdk/README.md $(LIBRARY_SOURCES) | $(STAMP)
	rm -rf sdk/build dist/memkit_client-*.whl
	$(BIN)/python -m pip wheel --quiet --no-deps --wheel-dir dist ./sdk

$(CLI_WHEEL): devkit/pyproject.toml devkit/README.md devkit/wheel_files.py sdk/pyproject.toml \
  $(LIBRARY_SOURCES) $(shell find devkit/memkit_dev -name '*.py') | $(STAMP)
	rm -rf devkit/build dist/memkit_cli-*.whl
	$(BIN)/python -m pip wheel --quiet --no-deps --wheel-dir dist ./devkit

## serve: run the local stack (API + DynamoDB Local, or moto without Java) on http://127.0.0.1:8000 (PORT=n)
serve: $(STAMP)
	$(BIN)/memkit serve --port $(PORT)

## test: lint, type checks, template checks, the security scan, a short fuzz, the wheels and every test
test: lint typecheck template scan fuzz-quick wheels $(AGENTCORE)
	$(BIN)/python -m pytest $(PYTEST_PARALLEL) --durations=25; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; exit 1; fi; exit $$rc

# Measuring coverage slows the tests by half (1,049 s against 1,605 s at two workers), so
# `make test` leaves it to this target.
## coverage: every test (as make test runs them) with line and branch coverage of memkit and memkit_dev
coverage: $(STAMP) wheels $(AGENTCORE)
	$(BIN)/python -m pytest $(PYTEST_PARALLEL) --cov --cov-report=term:skip-covered --durations=25; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; exit 1; fi; exit $$rc

## wheels: the SDK (memkit-client) and the CLI (memkit-cli) as wheels in dist/ (docs/sdk.md#install)
wheels: $(CLIENT_WHEEL) $(CLI_WHEEL)

## lint: ruff check and ruff format --check
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

## typecheck: mypy, strict, on the library, the dev kit and the functions
typecheck: $(STAMP)
	$(BIN)/mypy

## template: cfn-lint and sam validate --lint on template.yaml, offline
template: $(STAMP) $(SAM)
	$(BIN)/cfn-lint template.yaml
	$(SAM) validate --lint --template-file template.yaml

## scan: checkov on template.yaml, offline; a finding not in .checkov.baseline (each with its reason) fails
scan: $(CHECKOV)
	$(CHECKOV) --file template.yaml --framework cloudformation --skip-download \
	  --baseline .checkov.baseline --compact --quiet
	@echo "checkov: no finding in template.yaml outside .checkov.baseline"

## fuzz-quick: schemathesis against the local stack as an admin and as a user, 5 cases an operation
fuzz-quick: $(STAMP) $(ST)
	$(BIN)/python -m memkit_dev.fuzz --schemathesis $(ST) --examples 5 --seed $(SEED)

## fuzz: the same, 100 cases an operation and the stateful phase (SEED=n to vary it)
fuzz: $(STAMP) $(ST)
	$(BIN)/python -m memkit_dev.fuzz --schemathesis $(ST) --examples 100 --stateful --seed $(SEED)

## unit: the unit tests alone
unit: $(STAMP)
	$(BIN)/python -m pytest tests/unit

## integration: the integration tests alone (moto, DynamoDB Local, the local stack)
integration: $(STAMP) $(AGENTCORE)
	$(BIN)/python -m pytest $(PYTEST_PARALLEL) tests/integration

## agentcore-example: the bedrock-agentcore SDK agent (examples/agentcore_agent.py) against the local stack
agentcore-example: $(STAMP) $(AGENTCORE)
	$(BIN)/python -m pytest tests/integration/test_agentcore_example.py

## bench: every benchmark under bench/, each printing its figures
bench: $(STAMP)
	$(BIN)/python -m bench

## docs: regenerate docs/openapi.json from the code (a test fails when it is stale)
docs: $(STAMP)
	$(BIN)/memkit openapi --output docs/openapi.json

## build: sam build (needs python3.12 on PATH; see README)
build: $(SAM)
	$(SAM) build

## deploy: sam build, then sam deploy with samconfig.toml's defaults (stack memkit-dev)
deploy: build
	$(SAM) deploy

## clean: remove .venv, .tools and every cache (the next command reinstalls)
clean:
	rm -rf $(VENV) .tools .aws-sam .pytest_cache .mypy_cache .ruff_cache .coverage
