# The two user commands: `make demo` and `make test`. Both install what they need first.
PY ?= python3
PIP := $(PY) -m pip install -q --disable-pip-version-check

.PHONY: setup demo test test-c test-py bench
setup:
	@command -v ccache >/dev/null 2>&1 || apt-get install -y -q ccache >/dev/null 2>&1 || \
		(apt-get update -q >/dev/null 2>&1 && apt-get install -y -q ccache >/dev/null 2>&1) || \
		echo "ccache not installed; builds will be slower"
	$(PIP) -r requirements.txt
	$(PIP) --no-build-isolation -e .

demo: setup
	$(PY) demo/train_gpt.py

test: setup test-c test-py

test-c:
	$(MAKE) -s -C runtime test

test-py:
	$(PY) -m pytest -q tests

bench: setup
	$(PY) bench/bench_gpt.py
