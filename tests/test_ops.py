"""Every op of the runtime's op table against PyTorch CPU: forward and backward, contiguous
and non-contiguous inputs, every dtype the op's samples claim. Parametrised from the op
table itself, so a kernel without a sample fails here."""
import importlib
import pathlib

import pytest
import torch

import torch_tpu
from samples import SAMPLES, check_sample, samples_for

for _f in sorted(pathlib.Path(__file__).parent.glob("samples_*.py")):
    importlib.import_module(_f.stem)

NATIVE = [name for name, _ in torch_tpu._C._native_ops() if not name.startswith("tpurt::")]
KERNEL_OF = dict(torch_tpu._C._native_ops())


@pytest.mark.once  # the kernels' numerics do not depend on how torch_tpu is installed
@pytest.mark.parametrize("op", NATIVE)
def test_op_matches_cpu(op):
    samples = samples_for(op)
    assert samples, f"{op} has a native kernel but no sample in tests/samples_*.py"
    for s in samples:
        for dtype in s.dtypes:
            for nc in ((False, True) if s.noncontig else (False,)):
                torch_tpu.metrics.reset()
                try:
                    check_sample(s, dtype, nc)
                except AssertionError as e:
                    raise AssertionError(f"{op} sample '{s.name}' dtype={dtype} noncontig={nc}: {e}") from None
                ran = torch_tpu.metrics.executed_ops()
                assert KERNEL_OF[op] in ran, f"sample '{s.name}' did not run kernel {KERNEL_OF[op]} (ran {ran})"


def test_samples_name_real_ops():
    known = set(KERNEL_OF)
    for s in SAMPLES:
        for op in s.ops:
            assert op in known, f"sample '{s.name}' names {op}, which is not in the op table"


def test_kernel_argument_indices_are_the_installed_torchs():
    """runtime/src/args.gen.h (kernels read arguments by name through it) is what the installed
    torch's schemas give, and every table line lays its overloads' arguments out alike."""
    import subprocess
    import sys
    gen = pathlib.Path(__file__).resolve().parent.parent / "runtime" / "gen_args.py"
    done = subprocess.run([sys.executable, str(gen), "--check"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    # and a line whose overloads disagree is refused: sort's dim is #1, sort.stable's #2
    probe = ("import importlib.util, sys; s = importlib.util.spec_from_file_location('g', sys.argv[1]); "
             "g = importlib.util.module_from_spec(s); s.loader.exec_module(g); g.layout('sort', ['sort', 'sort.stable'])")
    done = subprocess.run([sys.executable, "-c", probe, str(gen)], capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and "argument 'dim' is #2 in sort.stable but #1 in sort" in done.stderr, done.stderr
