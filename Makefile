# The two commands of the README. Both bootstrap .venv themselves, so a fresh clone needs nothing else.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
PLUGINS := $(sort $(wildcard plugins/*/pyproject.toml))
LIBS := $(sort $(wildcard libs/*/pyproject.toml))
NATIVE := $(wildcard native/pyproject.toml)
STAMP := $(VENV)/.installed

.PHONY: demo test e2e image lint types imports pytest bench bench-kube install clean protos

install: $(STAMP)
	@# Bytecode as pip writes it into the image: a process started here then reads .pyc files instead of
	@# compiling every module of the tree (PYTHONDONTWRITEBYTECODE=1 stops Python from caching them itself);
	@# about a third of `koord scheduler`'s start-up otherwise (bench/README.md, Start-up).
	$(BIN)/python -m compileall -q -j 0 koord_framework $(dir $(LIBS) $(PLUGINS)) >/dev/null
	@# The same for the methods dataclasses compile when a class is made (koord_framework/codecache.py).
	$(BIN)/python -m koord_framework.cli.codecache -q

# Re-install when any distribution's metadata changes (new plugin, new entry point, new dependency). The
# folders too: a plugin checked out with an older pyproject.toml than the stamp still adds a folder there.
$(STAMP): pyproject.toml $(LIBS) $(PLUGINS) $(NATIVE) $(wildcard plugins libs)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]' $(foreach p,$(LIBS) $(PLUGINS),-e $(dir $(p)))
	@# koord-native needs a C compiler: without one koord still works and the Resctrl strategy says unsupported
	$(if $(NATIVE),$(BIN)/python -m pip install -q -e native || echo "koord-native not built (see above)")
	@touch $(STAMP)

# The main job: schedule the example cluster with Koordinator's profile, explaining nothing but the outcome.
demo: $(STAMP)
	$(BIN)/koord plugins list
	$(BIN)/koord profile validate configs/scheduler/koord-scheduler.yaml
	$(BIN)/koord profile validate configs/descheduler/koord-descheduler.yaml
	@# The example cluster holds pods that cannot fit by design, to show why (an oversized NUMA pod, a gang
	@# too big for the cluster): exit 1, "pods left unscheduled", is the expected outcome; 2 or worse fails.
	@# koord-manager closes the loop: batch-cpu / batch-memory computed from the example NodeMetrics (the
	@# slo-controller-config of batch-slo-controller-config.yaml turns colocation on), then the scheduler places
	@# the BE pods requesting them on the cluster the manager left.
	rm -rf .demo-state
	$(BIN)/koord manager --cluster configs/examples/cluster --once --now 2024-01-01T00:00:00Z --write-state .demo-state
	$(BIN)/koord simulate --cluster .demo-state --seed 1 --now 2024-01-01T00:00:00Z || test $$? -eq 1

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

types: $(STAMP)
	$(BIN)/mypy koord_framework $(patsubst %/__init__.py,%,$(wildcard libs/*/src/koord_lib_*/__init__.py plugins/*/src/koord_plugin_*/__init__.py)) $(if $(NATIVE),native/src/koord_native)

imports: $(STAMP)
	$(BIN)/lint-imports --config "$$($(BIN)/python tools/importlinter_config.py)"

pytest: $(STAMP)
	$(BIN)/pytest -q

test: lint types imports pytest

# End-to-end tests against a real kube-apiserver + etcd on loopback. Needs root the first time: installs etcd
# from Debian's packages and builds kube-apiserver v1.20.2 once into /var/cache/koord-e2e (KOORD_E2E_CACHE).
e2e: $(STAMP)
	bash tests/e2e/setup.sh
	BINS=kube-apiserver bash tests/e2e/build_apiserver.sh
	$(BIN)/pytest -m e2e tests/e2e -q

# The container image every component runs from (docs/image.md): buildah on mmdebstrap'd Debian bookworm
# bases, no registry. Installs its tools from Debian's packages on first use (root); cached after that.
image:
	bash tools/image/build.sh

# Every benchmark in its own process (bench/suite.py lists them); a missed target fails the run at the end,
# after the other benchmarks have printed their figures.
bench: $(STAMP)
	$(BIN)/python -m bench.suite
	$(if $(KUBE_E2E),$(MAKE) bench-kube)

# Regenerate the committed gRPC modules of the runtime hook API (RuntimeHookService) from its .proto.
HOOK_PROTO := koord_framework/koordlet/runtimehooks/proto/api.proto
# And the CRI runtime.v1 subset koord runtime-proxy decodes (messages only: it forwards with generic handlers).
CRI_PROTO := koord_framework/runtimeproxy/proto/api.proto
protos: $(STAMP)
	$(BIN)/python -m grpc_tools.protoc -I . --python_out=. --pyi_out=. --grpc_python_out=. $(HOOK_PROTO)
	$(BIN)/python -m grpc_tools.protoc -I . --python_out=. --pyi_out=. $(CRI_PROTO)

# koord vs kube-scheduler v1.20 vs the no-logic binder on a real kube-apiserver (bench/kube_e2e.py, the
# table of bench/README.md): about 40 minutes on the shared 2-core machine, so opt-in (make bench KUBE_E2E=1).
bench-kube: $(STAMP)
	$(BIN)/python -m bench.kube_e2e --nodes 1000 --pods 5000 --stream 0 --qps 5000,50 --repeat 2

clean:
	rm -rf $(VENV) build dist *.egg-info plugins/*/build plugins/*/src/*.egg-info libs/*/build libs/*/src/*.egg-info
