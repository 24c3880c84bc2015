"""Bad input raises the exception type PyTorch's CPU backend raises, with a clear message;
never a crash. Data-dependent errors (an index out of range) surface at the next
synchronization in strict mode and at the issuing line in debug mode."""
import pytest
import torch

BAD_CALLS = {
    "add shape mismatch": lambda d: torch.ones(3, 4, device=d) + torch.ones(5, device=d),
    "in-place broadcast to a smaller output": lambda d: torch.ones(3, device=d).add_(torch.ones(2, 3, device=d)),
    "mm inner dims": lambda d: torch.ones(3, 4, device=d) @ torch.ones(5, 6, device=d),
    "mm dtype mismatch": lambda d: torch.ones(3, 4, device=d) @ torch.ones(4, 2, device=d, dtype=torch.float16),
    "cat rank mismatch": lambda d: torch.cat([torch.ones(2, 3, device=d), torch.ones(3, device=d)]),
    "view incompatible": lambda d: torch.ones(4, 6, device=d).t().view(24),
    "softmax bad dim": lambda d: torch.softmax(torch.ones(3, device=d), dim=3),
    "sum bad dim": lambda d: torch.ones(3, device=d).sum(dim=2),
    "layer_norm shape": lambda d: torch.nn.functional.layer_norm(torch.ones(3, 4, device=d), (5,)),
    "nll_loss target shape": lambda d: torch.nn.functional.nll_loss(torch.ones(3, 4, device=d),
                                                                   torch.zeros(5, dtype=torch.long, device=d)),
    "integer requires_grad": lambda d: torch.ones(3, dtype=torch.long, device=d).requires_grad_(),
    "bool subtraction": lambda d: torch.ones(3, dtype=torch.bool, device=d) - torch.ones(3, dtype=torch.bool, device=d),
    "fill_ with a 1-dim value": lambda d: torch.ones(3, device=d).fill_(torch.ones(2, device=d)),
    "normal_ negative std": lambda d: torch.empty(3, device=d).normal_(0, -1),
    "unfold of an integer tensor": lambda d: torch.nn.functional.unfold(torch.ones(1, 1, 3, 3, dtype=torch.long, device=d), 2),
    "fold of an integer tensor": lambda d: torch.nn.functional.fold(torch.ones(1, 4, 4, dtype=torch.uint8, device=d), (3, 3), 2),
    "geometric_ p outside (0, 1)": lambda d: torch.empty(3, device=d).geometric_(1.5),
    "cauchy_ non-positive sigma": lambda d: torch.empty(3, device=d).cauchy_(0, -1),
    "log_normal_ zero std": lambda d: torch.empty(3, device=d).log_normal_(0, 0),
    "in-place through an expanded view": lambda d: torch.ones(3, device=d).expand(2, 3).add_(1),
    "out= an expanded view": lambda d: torch.index_select(torch.ones(4, 6, device=d), 0,
                                                          torch.tensor([0, 1], device=d),
                                                          out=torch.ones(1, device=d).expand(2, 6)),
    # out-of-range indices: CPU raises RuntimeError for gather/scatter, IndexError for the rest
    "gather index out of range": lambda d: torch.gather(torch.ones(2, 2, device=d), 1,
                                                        torch.tensor([[0, 23], [0, 0]], device=d)),
    "scatter_ index out of range": lambda d: torch.ones(2, 3, device=d).scatter_(1, torch.tensor([[0, 9]], device=d), 1.0),
    "index_add_ index out of range": lambda d: torch.ones(3, device=d).index_add_(0, torch.tensor([5], device=d),
                                                                                  torch.ones(1, device=d)),
    "index_select index out of range": lambda d: torch.index_select(torch.ones(3, device=d), 0,
                                                                    torch.tensor([5], device=d)),
    # PyTorch's meta functions raise other types here than CPU does
    "embedding 0-dim weight": lambda d: torch.nn.functional.embedding(torch.tensor([0], device=d),
                                                                      torch.tensor(1.0, device=d)),
    "amax over a zero-size dim": lambda d: torch.amax(torch.ones(0, 3, device=d), 0),
    "amin over a zero-size dim": lambda d: torch.amin(torch.ones(2, 0, device=d), -1),
    "cat out= overlapping an input": lambda d: (lambda x: torch.cat([x[:2], x[2:]], out=x))(torch.ones(4, device=d)),
    # ops that size their outputs from the data validate their inputs themselves
    "masked_select non-bool mask": lambda d: torch.masked_select(torch.ones(3, device=d), torch.ones(3, device=d)),
    "masked_select shape mismatch": lambda d: torch.masked_select(torch.ones(3, device=d),
                                                                  torch.ones(4, dtype=torch.bool, device=d)),
    "x[mask] shape mismatch": lambda d: torch.ones(3, 4, device=d)[torch.ones(4, dtype=torch.bool, device=d)],
    "bincount negative": lambda d: torch.bincount(torch.tensor([-1, 2], device=d)),
    "bincount float": lambda d: torch.bincount(torch.tensor([1.0, 2.0], device=d)),
    "bincount weights length": lambda d: torch.bincount(torch.tensor([1, 2], device=d), torch.ones(3, device=d)),
    "repeat_interleave negative": lambda d: torch.repeat_interleave(torch.tensor([1, -2], device=d)),
    "repeat_interleave 2-d": lambda d: torch.repeat_interleave(torch.tensor([[1, 2]], device=d)),
    "masked_scatter short source": lambda d: torch.ones(3, device=d).masked_scatter(
        torch.ones(3, dtype=torch.bool, device=d), torch.ones(2, device=d)),
    "take index out of range": lambda d: torch.ones(3, device=d).take(torch.tensor([5], device=d)),
    "put_ index out of range": lambda d: torch.ones(3, device=d).put_(torch.tensor([-4], device=d),
                                                                      torch.ones(1, device=d)),
    "index_fill index out of range": lambda d: torch.ones(3, device=d).index_fill(0, torch.tensor([3], device=d), 1),
    "max_unpool2d bad index": lambda d: torch.nn.functional.max_unpool2d(
        torch.ones(1, 1, 2, 2, device=d), torch.full((1, 1, 2, 2), 99, device=d), 2),
}


@pytest.mark.parametrize("name", list(BAD_CALLS))
def test_same_exception_type_as_cpu(name):
    call = BAD_CALLS[name]
    with pytest.raises(Exception) as cpu_err:
        call("cpu")
    with pytest.raises(Exception) as tpu_err:
        call("tpu")
        torch.tpu.synchronize()
    assert type(tpu_err.value) is type(cpu_err.value), f"cpu: {cpu_err.value!r}\ntpu: {tpu_err.value!r}"
    assert str(tpu_err.value), "message must not be empty"


def test_mixing_devices_is_rejected():
    with pytest.raises(RuntimeError, match="same device"):
        torch.ones(3, device="tpu") + torch.ones(3)


def test_index_out_of_range():
    weight = torch.randn(10, 4, device="tpu")
    bad = torch.tensor([1, 12], device="tpu")
    with pytest.raises(IndexError):
        torch.nn.functional.embedding(torch.tensor([1, 12]), weight.cpu())
    with torch.tpu.eager_mode("debug"):
        with pytest.raises(IndexError, match="out of range|out of bounds"):
            torch.nn.functional.embedding(bad, weight)
    out = torch.nn.functional.embedding(bad, weight)  # strict: returns at once
    with pytest.raises(IndexError, match="embedding|index_select"):
        torch.tpu.synchronize()
    del out
    assert torch.equal(torch.nn.functional.embedding(torch.tensor([3], device="tpu"), weight).cpu(),
                       weight.cpu()[3:4])


def test_unsupported_dtype_is_refused_not_crashed():
    with pytest.raises(NotImplementedError, match="complex32"):
        torch.empty(1, 0, 3, dtype=torch.complex32, device="tpu")
    with pytest.raises(NotImplementedError):
        torch.ones(2, dtype=torch.complex32).to("tpu")

