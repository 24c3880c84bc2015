# The two user commands: `make demo` and `make test`. Both install what they need first.
PY ?= python3
PIP := $(PY) -m pip install -q --disable-pip-version-check

.PHONY: setup demo test test-c test-py test-slow test-asan test-asan-quick test-isa test-wheel wheel-suite bench
setup:
	@# Debian packages: ccache (faster rebuilds), chromium (the porting report's browser test), clang-16
	@# and its runtime libraries (the C fuzz target, runtime/fuzz: clang 14 has no _Float16 on x86)
	@for pkg in ccache chromium clang-16 libclang-rt-16-dev; do command -v $$pkg >/dev/null 2>&1 || \
		dpkg -s $$pkg >/dev/null 2>&1 || apt-get install -y -q $$pkg >/dev/null 2>&1 || \
		(apt-get update -q >/dev/null 2>&1 && apt-get install -y -q $$pkg >/dev/null 2>&1) || \
		echo "$$pkg not installed (see the Makefile)"; done
	$(PIP) -r requirements.txt
	$(PIP) --no-deps torchrec==1.9.2
	$(PIP) --no-build-isolation -e .

demo: setup
	$(PY) demo/train_gpt.py

test: setup test-c test-asan-quick test-py

# The fuzz target for 10 s here (`make -C runtime fuzz` alone: 60): CI must stay under 20 minutes.
test-c:
	$(MAKE) -s -C runtime test test-tsan fuzz FUZZ_SECONDS=10

test-py:
	$(PY) -m pytest -q -m "not slow" tests

# What test-py leaves out: runs of 15-30 s each (Ray, a compile cache across vector ISAs,
# FSDP2 + TP on four ranks, a compiled Flux training step, every bad TPU_* value, exits, a
# checkpoint saved by four ranks loaded into two, the HF Trainer and DLRM's sharded tables on
# four ranks).
test-slow: setup
	$(PY) -m pytest -q -m slow tests

# The Python tests that drive the kernels, against the runtime and the extension built with ASan
# + UBSan (TPU_SANITIZER=asan; the runtime compiled for the host's widest instruction set: the
# vector code that ships; the extension into torch_tpu/lib/asan, never shipped). libstdc++ is
# preloaded beside the ASan runtime so that its __cxa_throw interceptor finds the real one (torch
# throws through it). Reports go to files, so that one written by a
# subprocess fails the run too. Leaks are checked by the C tests (`make -C runtime test`): at a
# Python process's exit LSan reports what Python and torch keep, and its suppressions match any
# frame of a stack, so they would hide the runtime's allocations made from Python threads too.
# The conformance worker's simulated segfault is left out (ASan reports the signal); requests
# beyond any memory (tests of the OutOfMemoryError) return NULL as without ASan.
ASAN_LOGS := /tmp/torch_tpu_asan
ASAN_RUN = rm -rf $(ASAN_LOGS) && mkdir -p $(ASAN_LOGS) && TPU_SANITIZER=asan \
	LD_PRELOAD="$$($(CC) -print-file-name=libasan.so) $$($(CC) -print-file-name=libstdc++.so)" \
	ASAN_OPTIONS=detect_leaks=0:alloc_dealloc_mismatch=0:allocator_may_return_null=1:log_path=$(ASAN_LOGS)/asan \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path=$(ASAN_LOGS)/ubsan \
	$(PY) -m pytest -q -p no:cacheprovider
ASAN_CHECK = if grep -l -E "ERROR: |runtime error" $(ASAN_LOGS)/* 2>/dev/null; then cat $(ASAN_LOGS)/*; exit 1; fi
test-asan: setup
	$(MAKE) -s -C runtime asan
	TORCH_TPU_SANITIZER=asan $(PY) setup.py -q build_ext --build-lib build/asan-ext --build-temp build/asan-temp
	mkdir -p torch_tpu/lib/asan && cp build/asan-ext/torch_tpu/_C.*.so torch_tpu/lib/asan/
	$(ASAN_RUN) tests/test_ops.py tests/test_models.py tests/test_conv_models.py tests/test_conformance.py \
		tests/test_fuzz_ops.py tests/test_fuzz_regressions.py tests/test_threads.py tests/test_fused_eager.py \
		tests/test_optimizers.py tests/test_fft.py tests/test_complex_math.py tests/test_linalg_decomp.py \
		tests/test_scratch_plans.py -k "not worker_crash"
	@$(ASAN_CHECK)

# `make test`'s share of it: the model tests and the op tests of the vector-heavy kernels.
test-asan-quick:
	$(MAKE) -s -C runtime asan
	$(ASAN_RUN) tests/test_models.py tests/test_conv_models.py tests/test_ops.py \
		-k "models or mm or conv or softmax or attention"
	@$(ASAN_CHECK)

# The op tests once per build of the runtime this host runs (TPU_ISA; `make test` runs them on the
# default build and a subset on the others, tests/test_isa.py).
test-isa: setup
	@set -e; for isa in $$($(PY) -c "import torch_tpu._runtime as r; print(*r.host_runs())"); do \
		echo "== TPU_ISA=$$isa"; TPU_ISA=$$isa $(PY) -m pytest -q tests/test_ops.py tests/test_isa.py; done

# The suite against a non-editable install: the wheel, in a virtual environment that sees the
# installed torch, tests run from a directory outside the checkout (all but the `once` tests and
# the kernel-numerics files, whose results do not depend on how torch_tpu is installed).
WHEEL_SKIP := upstream_regressions complex_math scratch_plans quantized fft errors linalg_decomp \
	linalg_complex sparse composite fuzz_regressions vector_math complex
WHEEL_DIR ?= /tmp/torch_tpu_wheel
test-wheel: setup wheel-suite

# The same without installing first (CI runs it right after `make test`, which did).
wheel-suite:
	rm -rf $(WHEEL_DIR) && mkdir -p $(WHEEL_DIR)
	$(PY) -m pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps -w $(WHEEL_DIR)/dist .
	$(PY) -m venv --system-site-packages $(WHEEL_DIR)/venv
	$(WHEEL_DIR)/venv/bin/python -m pip install -q --disable-pip-version-check --no-deps $(WHEEL_DIR)/dist/*.whl
	cd $(WHEEL_DIR) && venv/bin/python -c "import torch_tpu, sys; assert torch_tpu.__file__.startswith('$(WHEEL_DIR)/venv'), torch_tpu.__file__"
	cd $(WHEEL_DIR) && venv/bin/python -m pytest -q -p no:cacheprovider -m "not once and not slow" $(CURDIR)/tests \
		$(foreach f,$(WHEEL_SKIP),--ignore=$(CURDIR)/tests/test_$(f).py)

bench: setup
	$(PY) bench/bench_gpt.py
