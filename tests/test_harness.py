"""The op tests' comparison (tests/samples.py `_close`) can fail: a result further from the
float64 computation than CPU's, a NaN CPU does not have, or a NaN missing where CPU has one."""
import pytest
import torch

import torch_tpu  # noqa: F401
from samples import Sample, _close

SAMPLE = Sample(ops=("test",), fn=None, inputs=None, dtypes=(torch.float32,), grad=False)
EXACT = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
CPU = torch.tensor([1.0, 2.0, 3.0 + 3e-6])  # CPU's own rounding error


def close(values):
    _close(torch.tensor(values).to("tpu"), CPU, SAMPLE, "output", lambda: EXACT)


def test_as_close_to_float64_as_cpu_passes():
    close([1.0, 2.0, 3.0])  # off CPU's bits beyond the tolerance, but exact


@pytest.mark.parametrize("values", [[1.0, 2.0, 3.0 + 1e-4], [1.0, float("nan"), 3.0], [1.0, 2.0, float("inf")]],
                         ids=["further from float64", "a NaN CPU does not have", "inf for a number"])
def test_wrong_results_fail(values):
    with pytest.raises(AssertionError):
        close(values)


def test_a_missing_nan_fails():
    cpu = torch.tensor([1.0, float("nan"), 3.0])
    exact = torch.tensor([1.0, float("nan"), 3.0], dtype=torch.float64)
    with pytest.raises(AssertionError):
        _close(torch.tensor([1.0, 2.0, 3.0]).to("tpu"), cpu, SAMPLE, "output", lambda: exact)


# CPU's vectorized gelu gives NaN for +inf where float64 (and its scalar path) gives inf; a
# Chebyshev polynomial of int64 (x, n) = (-55, 55) is -7.3e111 in float64, NaN in CPU's float32,
# and float64's value rounded to float32 is -inf
@pytest.mark.parametrize("exact,value,ok", [
    (float("inf"), float("inf"), True), (float("inf"), 5.0, False), (float("inf"), float("nan"), True),  # NaN: as CPU
    (-7.3e111, -float("inf"), True), (-7.3e111, -3.4e38, False), (-7.3e111, 0.0, False)])
def test_where_cpu_lost_a_number_float64_rounded_decides(exact, value, ok):
    cpu = torch.tensor([1.0, float("nan")])

    def run():
        _close(torch.tensor([1.0, value]).to("tpu"), cpu, SAMPLE, "output",
               lambda: torch.tensor([1.0, exact], dtype=torch.float64))
    if ok:
        run()
    else:
        with pytest.raises(AssertionError):
            run()
