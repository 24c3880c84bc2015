"""max/min reductions over float32 rows: the vector scan (lanes, a tree over them, the first
position of the extreme) against CPU's max.dim/min.dim, which keep the first occurrence.
Row lengths straddle the lane counts; rows hold ties, signed zeros, infinities and NaNs
wherever a lane, the tree or the tail could lose the first one."""
import pytest
import torch

import torch_tpu  # noqa: F401

LENGTHS = (1, 2, 15, 16, 17, 63, 64, 65, 127, 128, 129, 1000, 1031)


def rows(n, seed):
    g = torch.Generator().manual_seed(seed)
    out = [torch.randn(n, generator=g),
           torch.randint(-2, 3, (n,), generator=g).float(),  # many ties
           torch.zeros(n), -torch.zeros(n),
           torch.full((n,), float("-inf")), torch.full((n,), float("inf"))]
    for pos in sorted({0, min(5, n - 1), n // 3, n - 1}):
        z = torch.where(torch.rand(n, generator=g) < 0.5, torch.zeros(n), -torch.zeros(n))
        z[pos] = -z[pos]  # signed zeros in any order: the first one's sign is the result's
        out.append(z)
        for special in (float("nan"), float("inf"), float("-inf")):
            r = torch.randn(n, generator=g)
            r[pos] = special
            out.append(r)
        for sign in (1.0, -1.0):  # two zeros among negatives, the second in a lower lane
            if pos + 60 < n:
                r = -1 - torch.rand(n, generator=g)
                r[pos], r[pos + 60] = 0.0 * sign, -0.0 * sign
                out.append(r)
                out.append(-r)
        two = torch.randn(n, generator=g)
        two[pos], two[-1] = float("nan"), float("nan")
        out.append(two)
    return torch.stack(out)


def bits(t):
    return torch.where(t.isnan(), torch.full_like(t, float("nan")), t).view(torch.int32)


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("op", ["max", "min"])
def test_row_extremes_keep_first_occurrence(n, op):
    x = rows(n, n)
    ref = getattr(x, op)(1)
    t = x.to("tpu")
    got = getattr(t, op)(1)
    assert torch.equal(bits(got.values.cpu()), bits(ref.values))
    assert torch.equal(got.indices.cpu(), ref.indices)
    assert torch.equal(bits(getattr(t, "a" + op)(1).cpu()), bits(ref.values))
    assert torch.equal(getattr(t, "arg" + op)(1).cpu(), ref.indices)
    for k in range(x.shape[0]):  # the whole-tensor reduction of each row
        whole = getattr(t[k], op)().cpu()
        assert bits(whole).item() == bits(ref.values[k]).item(), (k, whole, ref.values[k])
