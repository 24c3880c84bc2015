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


DRAWS = {  # op: fills its argument in place
    "normal_": lambda x: x.normal_(0.5, 2.0),
    "uniform_": lambda x: x.uniform_(-2.0, 3.0),
    "bernoulli_": lambda x: x.bernoulli_(0.3),
    "exponential_": lambda x: x.exponential_(2.0),
    "log_normal_": lambda x: x.log_normal_(0.1, 0.5),
    "random_": lambda x: x.random_(3, 100),
}


def _draw(op, n, dtype, seed=11):
    torch.tpu.manual_seed(seed)
    return DRAWS[op](torch.empty(n, device="tpu", dtype=dtype)).cpu()


def test_each_element_depends_only_on_its_counter():
    """The pool's threads fill blocks of elements and Philox runs 16 counters at a time: element i
    must still be the draw of counter offset + i, whatever the length (lane and block tails)."""
    for op in DRAWS:
        for dtype in (torch.float32, torch.float64, torch.bfloat16):
            long = _draw(op, 20_011, dtype)
            for n in (1, 15, 16, 17, 8193):
                assert torch.equal(_draw(op, n, dtype), long[:n]), (op, dtype, n)
    masks = _draw("bernoulli_", 20_011, torch.bool)  # dropout's masks: bool, stored directly
    assert torch.equal(masks, _draw("bernoulli_", 20_011, torch.float32).bool())
    assert torch.equal(_draw("bernoulli_", 17, torch.bool), masks[:17])


def test_draws_do_not_depend_on_the_thread_count():
    import subprocess
    import sys
    code = ("import torch, torch_tpu, sys; from test_random import _draw, DRAWS; "
            "torch.save({op: _draw(op, 50_000, torch.float32) for op in DRAWS}, sys.argv[1])")
    import os
    import tempfile
    here = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory() as d:
        out = {}
        for threads in ("1", "2"):
            path = os.path.join(d, threads + ".pt")
            env = dict(os.environ, TPU_NUM_THREADS=threads, PYTHONPATH=here + os.pathsep + os.environ.get("PYTHONPATH", ""))
            subprocess.run([sys.executable, "-c", code, path], env=env, check=True)
            out[threads] = torch.load(path)
    for op in DRAWS:
        assert torch.equal(out["1"][op], out["2"][op]), op


def test_float32_normals_are_the_float64_draws_to_float_rounding():
    """float32 (and half) normals run Box-Muller in float: the same counters' float64 normals,
    to float's rounding of log and cos (sqrt(-2 log u) is off by up to ~3.5e-4, 7e-4 at std 2,
    where u rounds to float near 1; 9e-6 in this draw)."""
    a = _draw("normal_", 100_000, torch.float32).double()
    b = _draw("normal_", 100_000, torch.float64)
    assert torch.allclose(a, b, rtol=1e-5, atol=1e-3)
    assert (a - b).abs().max() > 0  # float32 really draws in float
