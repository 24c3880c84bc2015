# The two user commands: `make demo` and `make test`. Both install what they need first.
PY ?= python3
PIP := $(PY) -m pip install -q --disable-pip-version-check

.PHONY: setup demo test test-c test-py test-isa test-wheel wheel-suite bench
setup:
	@# Debian packages: ccache (faster rebuilds), chromium (the porting report's browser test)
	@for pkg in ccache chromium; do command -v $$pkg >/dev/null 2>&1 || apt-get install -y -q $$pkg >/dev/null 2>&1 || \
		(apt-get update -q >/dev/null 2>&1 && apt-get install -y -q $$pkg >/dev/null 2>&1) || \
		echo "$$pkg not installed: it is optional (see the Makefile)"; done
	$(PIP) -r requirements.txt
	$(PIP) --no-build-isolation -e .

demo: setup
	$(PY) demo/train_gpt.py

test: setup test-c test-py

test-c:
	$(MAKE) -s -C runtime test test-tsan

test-py:
	$(PY) -m pytest -q tests

# The op tests once per build of the runtime this host runs (TPU_ISA; `make test` runs them on the
# default build and a subset on the others, tests/test_isa.py).
test-isa: setup
	@set -e; for isa in $$($(PY) -c "import torch_tpu._runtime as r; print(*r.host_runs())"); do \
		echo "== TPU_ISA=$$isa"; TPU_ISA=$$isa $(PY) -m pytest -q tests/test_ops.py tests/test_isa.py; done

# The suite against a non-editable install: the wheel, in a virtual environment that sees the
# installed torch, tests run from a directory outside the checkout (all but the `once` tests).
WHEEL_DIR ?= /tmp/torch_tpu_wheel
test-wheel: setup wheel-suite

# The same without installing first (CI runs it right after `make test`, which did).
wheel-suite:
	rm -rf $(WHEEL_DIR) && mkdir -p $(WHEEL_DIR)
	$(PY) -m pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps -w $(WHEEL_DIR)/dist .
	$(PY) -m venv --system-site-packages $(WHEEL_DIR)/venv
	$(WHEEL_DIR)/venv/bin/python -m pip install -q --disable-pip-version-check --no-deps $(WHEEL_DIR)/dist/*.whl
	cd $(WHEEL_DIR) && venv/bin/python -c "import torch_tpu, sys; assert torch_tpu.__file__.startswith('$(WHEEL_DIR)/venv'), torch_tpu.__file__"
	cd $(WHEEL_DIR) && venv/bin/python -m pytest -q -p no:cacheprovider -m "not once" $(CURDIR)/tests

bench: setup
	$(PY) bench/bench_gpt.py
