"""Every kernel's plan counts the temporaries it takes: a call issued without scratch gets its
planned bytes at launch (tpurt_op_scratch_bytes), so a kernel that takes more from the
allocator while it runs has a plan that undercounts (torch.tpu.metrics.unplanned_temporaries).
Each case drives the paths of one kernel that take temporaries (strided operands, reductions
over inner dims, ...) and must match CPU."""
import warnings

import pytest
import torch

import torch_tpu  # noqa: F401


def _randn(*shape, dtype=torch.float32):
    g = torch.Generator().manual_seed(sum(shape) + len(shape))
    return torch.randn(*shape, generator=g).to(dtype)


# kernel name (as torch.tpu.metrics names it) -> calls f(device) that take its temporaries
CASES = {}

# ---------------------------------------------------------------- sort, scan, reduce, index, histogram

# ---------------------------------------------------------------- data-sized, fft, misc, nn, matmul

# ---------------------------------------------------------------- attention, pooling, resampling, linalg, conv


def _unplanned(kernel):
    torch.tpu.synchronize()
    return torch.tpu.metrics.unplanned_temporaries().get(kernel, 0)


def _runs(kernel):
    torch.tpu.synchronize()
    return torch.tpu.metrics.executed_ops().get(kernel, 0)


def _to_cpu(x):
    if isinstance(x, torch.Tensor):
        return x.cpu()
    if isinstance(x, (tuple, list)):
        return type(x)(_to_cpu(v) for v in x)
    return x


@pytest.mark.parametrize("kernel", sorted(CASES))
def test_plan_counts_every_temporary(kernel):
    for case in CASES[kernel]:
        before, ran = _unplanned(kernel), _runs(kernel)
        expected = case("cpu")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            actual = case("tpu")
        assert _runs(kernel) > ran, f"the case did not run kernel {kernel}"
        assert _unplanned(kernel) == before, (
            f"kernel {kernel} took {_unplanned(kernel) - before} bytes of temporaries its plan did not count")
        torch.testing.assert_close(_to_cpu(actual), expected, equal_nan=True)
