"""The tpu generator: determinism under manual_seed, state round trips, distributions."""
import torch


def test_manual_seed_is_deterministic():
    torch.tpu.manual_seed(123)
    a = torch.randn(1000, device="tpu").cpu()
    b = torch.rand(10, device="tpu").cpu()
    torch.tpu.manual_seed(123)
    assert torch.equal(a, torch.randn(1000, device="tpu").cpu())
    assert torch.equal(b, torch.rand(10, device="tpu").cpu())
    assert not torch.equal(a, torch.randn(1000, device="tpu").cpu())
    torch.manual_seed(5)  # torch.manual_seed seeds every device
    c = torch.randn(4, device="tpu").cpu()
    torch.manual_seed(5)
    assert torch.equal(c, torch.randn(4, device="tpu").cpu())


def test_rng_state_round_trip_and_generators():
    state = torch.tpu.get_rng_state()
    x = torch.randn(50, device="tpu").cpu()
    torch.tpu.set_rng_state(state)
    assert torch.equal(x, torch.randn(50, device="tpu").cpu())
    g = torch.Generator(device="tpu").manual_seed(7)
    y = torch.randn(20, device="tpu", generator=g).cpu()
    g.manual_seed(7)
    assert torch.equal(y, torch.randn(20, device="tpu", generator=g).cpu())
    assert torch.tpu.initial_seed() >= 0


def test_layout_does_not_change_values():
    torch.tpu.manual_seed(0)
    a = torch.empty(8, 6, device="tpu").normal_().cpu()
    torch.tpu.manual_seed(0)
    b = torch.empty(6, 8, device="tpu").t().normal_().cpu()
    assert torch.equal(a, b)


def test_distributions():
    torch.tpu.manual_seed(0)
    n = torch.randn(200_000, device="tpu").cpu().double()
    assert abs(n.mean()) < 0.01 and abs(n.std() - 1) < 0.01
    u = torch.rand(200_000, device="tpu").cpu().double()
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.01
    k = torch.randint(3, 9, (100_000,), device="tpu").cpu()
    assert k.min() == 3 and k.max() == 8
    bern = torch.empty(100_000, device="tpu").bernoulli_(0.3).cpu()
    assert abs(bern.mean() - 0.3) < 0.01
    e = torch.empty(100_000, device="tpu").exponential_(2.0).cpu().double()
    assert abs(e.mean() - 0.5) < 0.01
    geo = torch.empty(100_000, device="tpu").geometric_(0.25).cpu().double()
    assert geo.min() == 1 and abs(geo.mean() - 4) < 0.05  # trials to first success: mean 1/p
    cau = torch.empty(100_001, device="tpu").cauchy_(1.0, 2.0).cpu().double()
    assert abs(cau.median() - 1) < 0.05 and abs((cau - 1).abs().median() - 2) < 0.05  # median, half IQR
    logn = torch.empty(100_000, device="tpu").log_normal_(0.5, 0.3).cpu().double().log()
    assert abs(logn.mean() - 0.5) < 0.01 and abs(logn.std() - 0.3) < 0.01


def test_dropout_scales_and_masks():
    torch.tpu.manual_seed(1)
    x = torch.ones(100_000, device="tpu", requires_grad=True)
    y = torch.nn.functional.dropout(x, p=0.25, training=True)
    kept = (y.detach().cpu() != 0)
    assert abs(kept.double().mean() - 0.75) < 0.01
    assert torch.allclose(y.detach().cpu()[kept], torch.tensor(1 / 0.75))
    y.sum().backward()
    assert torch.equal(x.grad.cpu() != 0, kept)
