"""Bad TPU_* launch variables: `import torch` still works (torch_tpu autoloads with it), the
device reports itself unavailable with a warning that says why, and its first use raises a
ValueError naming the variable, as CUDA does with a bad CUDA_VISIBLE_DEVICES."""
import json
import math
import os
import pathlib
import subprocess
import sys

import pytest
import torch_tpu

# (variable, bad value, the rest of the environment it needs)
BAD = [
    ("TPU_ACCELERATOR_TYPE", "bogus", {}),
    ("TPU_ACCELERATOR_TYPE", "v6e-3", {}),      # not a size v6e comes in (it gave 3 chips)
    ("TPU_ACCELERATOR_TYPE", "v6e-9", {}),      # it gave 8 chips
    ("TPU_ACCELERATOR_TYPE", "v6e-8x", {}),
    ("TPU_ACCELERATOR_TYPE", "v5p-6", {}),      # TensorCores, 2 per chip
    ("TPU_ACCELERATOR_TYPE", "v6e-512", {}),    # beyond the largest slice
    ("TPU_TOPOLOGY", "2x3", {"TPU_ACCELERATOR_TYPE": "v6e-8"}),
    ("TPU_TOPOLOGY", "2x2x2", {"TPU_ACCELERATOR_TYPE": "v6e-8"}),
    ("TPU_WORKER_ID", "one", {}),
    ("TPU_WORKER_ID", "1", {"TPU_ACCELERATOR_TYPE": "v6e-8"}),  # a single-host slice has host 0 only
    ("TPU_VISIBLE_CHIPS", "9", {"TPU_ACCELERATOR_TYPE": "v6e-8"}),
    ("TPU_VISIBLE_CHIPS", "0;1", {"TPU_ACCELERATOR_TYPE": "v6e-8"}),
    ("TPU_ISA", "avx9", {}),  # tests/test_isa.py: a build the host lacks, and TPU_ISA set after import
    ("TPU_SANITIZER", "msan", {}),
    ("TPU_NUM_THREADS", "0", {}),
    ("TPU_NUM_THREADS", "two", {}),
    ("TPU_HBM_BYTES", "1e9", {}),
    ("TPU_HBM_BYTES", "-5", {}),
    ("TPU_LAUNCH_BLOCKING", "yes", {}),
    ("TORCH_TPU_DEFER_AND_FUSE", "2", {}),
    ("TPU_EXPLAIN_RECOMPILES", "on", {}),
    ("TPU_FAULT_ALLOC", "0", {}),
    ("TPU_FAULT_ALLOC", "sometimes", {}),
    ("TPU_WORKER_HOSTNAMES", "h0,h1", {}),  # v6e-1 is one host
    ("TPU_WORKER_HOSTNAMES", "h0,,h1", {"TPU_ACCELERATOR_TYPE": "v5p-16"}),
    ("LOCAL_RANK", "x", {"TPU_ACCELERATOR_TYPE": "v6e-4", "LOCAL_WORLD_SIZE": "2"}),
    ("LOCAL_RANK", "2", {"TPU_ACCELERATOR_TYPE": "v6e-4", "LOCAL_WORLD_SIZE": "2"}),
    ("LOCAL_WORLD_SIZE", "9", {"TPU_ACCELERATOR_TYPE": "v6e-8", "LOCAL_RANK": "0"}),  # a host has 8 chips
]

PROBE = """
import json, warnings, torch
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    available = torch.tpu.is_available()
try:
    torch.ones(2, device="tpu")
    error = None
except Exception as e:
    error = [type(e).__name__, str(e)]
print(json.dumps({"available": available, "count": torch.tpu.device_count(),
                  "warnings": [str(w.message) for w in caught], "error": error}))
"""


def _clean_env(extra):
    launch = ("TPU_", "TORCH_TPU_", "LOCAL_RANK", "LOCAL_WORLD_SIZE")
    env = {k: v for k, v in os.environ.items() if not k.startswith(launch)}
    env.update(extra)
    return env


@pytest.mark.slow  # 21 fresh interpreters: 26 s
def test_every_bad_value_imports_then_raises_on_first_use():
    runs = [(var, value, subprocess.Popen([sys.executable, "-c", PROBE], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True, env=_clean_env(dict(rest, **{var: value}))))
            for var, value, rest in BAD]
    for var, value, proc in runs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, (var, value, err[-2000:])
        got = json.loads(out.strip().splitlines()[-1])
        assert not got["available"] and got["count"] == 0, (var, value, got)
        assert any(var in w and value in w for w in got["warnings"]), (var, value, got["warnings"])
        kind, message = got["error"]
        assert kind == "ValueError" and var in message and repr(value)[1:-1] in message, (var, value, message)


def test_every_variable_has_a_bad_value_case():
    assert {name for name, _, _ in torch_tpu._C._environment()} == {var for var, _, _ in BAD}


@pytest.mark.once
def test_sizes_a_generation_comes_in_are_accepted():
    code = "import torch; print(torch.tpu.device_count(), torch.tpu.get_device_properties(0).topology)"
    cases = [("v6e-4", 4, "2x2"), ("v5p-8", 4, "2x2x1"), ("v4-384", 4, "4x4x12"), ("v5litepod-16", 8, "4x4")]
    runs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=_clean_env({"TPU_ACCELERATOR_TYPE": name})) for name, _, _ in cases]
    for (name, chips_here, topology), proc in zip(cases, runs):
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, (name, err[-2000:])
        assert out.split() == [str(chips_here), topology], (name, out)


def test_accepted_v6e_sizes_are_the_published_topologies():
    specs = json.loads((pathlib.Path(torch_tpu.__file__).parent / "specs" / "tpu_specs.json").read_text())
    published = {math.prod(map(int, t.split("x"))) for t in specs["generations"]["v6e"]["valid_topologies"]}
    accepted = set()
    for n in range(1, 300):
        try:
            accepted.add(torch_tpu._C._generation_info(f"v6e-{n}")["slice_chips"])
        except ValueError:
            pass
    assert accepted == published
