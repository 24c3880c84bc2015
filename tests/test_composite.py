"""Ops composed from native kernels in torch_tpu/composite.py (results that are Python
values): same answers and exceptions as CPU, nothing falls back."""
import pytest
import torch

import torch_tpu
from samples import make

NAN = float("nan")
CASES = [
    lambda: (make((3, 4), torch.float32), make((3, 4), torch.float32)),
    lambda: (make((3, 4), torch.float32),) * 2,
    lambda: (make((3, 4), torch.float32), make((4, 3), torch.float32).t()),
    lambda: (make((3, 4), torch.int64), make((3, 4), torch.int64).float()),
    lambda: (torch.tensor([1.0, NAN]), torch.tensor([1.0, NAN])),
    lambda: (make((3, 4), torch.bfloat16), make((3, 4), torch.bfloat16)[:2]),
    lambda: (torch.zeros(0), torch.zeros(0)),
    lambda: (make((5,), torch.bool), make((5,), torch.bool)),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_equal_matches_cpu(case):
    a, b = CASES[case]()
    torch_tpu.metrics.reset()
    assert torch.equal(a.to("tpu"), b.to("tpu")) == torch.equal(a, b)
    assert torch.equal(a.to("tpu"), a.to("tpu").clone()) == torch.equal(a, a.clone())
    assert not torch_tpu.metrics.fallback_ops()


def test_equal_different_devices_raises():
    a = torch.ones(3)
    with pytest.raises(RuntimeError, match="different devices"):
        torch.equal(a.to("tpu"), a)
