"""Ops composed from native kernels in torch_tpu/composite.py (results that are Python
values, foreach scalars packed in a CPU tensor): same answers and exceptions as CPU, nothing
falls back."""
import copy
import re

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


def _unique_inputs():
    g = torch.Generator().manual_seed(0)
    ints = torch.randint(0, 4, (5, 3), generator=g)
    return [ints.float(), ints.float().t(), ints, ints.to(torch.uint8), ints > 1, ints.to(torch.bfloat16),
            torch.tensor([float("nan"), 1.0, float("nan"), 1.0, -0.0, 0.0]), torch.zeros(0, 3), torch.tensor(2.0),
            torch.randint(0, 2, (2, 5, 2), generator=g)]


UNIQUE = [
    lambda x: torch.unique(x),
    lambda x: torch.unique(x, sorted=False, return_inverse=True, return_counts=True),
    lambda x: torch.unique(x, dim=0, return_inverse=True, return_counts=True),
    lambda x: torch.unique(x, dim=-1, return_counts=True),
    lambda x: torch.unique_consecutive(x, return_inverse=True, return_counts=True),
    lambda x: torch.unique_consecutive(x, return_inverse=True, dim=0),
]


@pytest.mark.parametrize("fn", range(len(UNIQUE)))
def test_unique_matches_cpu(fn):
    f = UNIQUE[fn]
    for x in _unique_inputs():
        # dim= variants: no 0-dim input; NaN rows neither (CPU's row sort has no order for NaN)
        if fn in (2, 3, 5) and (x.dim() == 0 or (x.is_floating_point() and x.isnan().any())):
            continue
        torch_tpu.metrics.reset()
        try:
            want = f(x)
        except RuntimeError as e:
            with pytest.raises(RuntimeError, match="0 sized dimensions"):
                f(x.to("tpu"))
            assert "0 sized dimensions" in str(e)
            continue
        got = f(x.to("tpu"))
        want, got = (want, got) if isinstance(want, tuple) else ((want,), (got,))
        for w, g in zip(want, got):
            assert g.device.type == "tpu"
            torch.testing.assert_close(g.cpu(), w, equal_nan=True)
        assert not torch_tpu.metrics.fallback_ops()


PACKED = [torch.tensor([-0.3, 1.5, 2.0]), torch.tensor([2, -1, 3]), torch.tensor([0.5, 2.0, 1.0], dtype=torch.float64)]
# (lists' lengths, scalars): CPU's errors, in CPU's order of checks
BAD_PACKED = [((3, 2, 3), PACKED[0]), ((3, 3, 3), torch.tensor([0.1, 0.2])), ((3, 3, 3), torch.tensor([[0.1, 0.2, 0.3]])),
              ((3, 3, 3), torch.arange(6.0)[::2]), ((3, 3, 3), torch.tensor(0.5))]


@pytest.mark.parametrize("name", ["_foreach_addcdiv", "_foreach_addcdiv_", "_foreach_addcmul", "_foreach_addcmul_"])
def test_foreach_packed_scalars_run_the_scalar_list_kernel(name):
    # AdamW under torch.compile passes its step sizes this way: one kernel for the whole
    # list, as with a Scalar[], not one op per tensor
    fn = getattr(torch, name)
    lists = [[make(s, torch.float32, 0.5, 3, seed=7 * j + i) for i, s in enumerate(((3, 4), (5,), (2, 3)))]
             for j in range(3)]

    def run(dev, lens, scalars):
        args = [[t.clone().to(dev) for t in lst[:n]] for lst, n in zip(lists, lens)]
        out = fn(*args, scalars)
        return [t.cpu() for t in (args[0] if out is None else out)]

    for scalars in PACKED:
        want = run("cpu", (3, 3, 3), scalars)
        torch_tpu.metrics.reset()
        got = run("tpu", (3, 3, 3), scalars)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w)
        assert set(torch_tpu.metrics.executed_ops()) == {name.strip("_").replace("_foreach", "foreach")}
        assert not torch_tpu.metrics.fallback_ops()
    for lens, scalars in BAD_PACKED:
        with pytest.raises(RuntimeError) as want:
            run("cpu", lens, scalars)
        with pytest.raises(RuntimeError, match=re.escape(str(want.value))):
            run("tpu", lens, scalars)
    with pytest.raises(RuntimeError, match="Expected scalars to be on CPU, got tpu:0 instead"):
        run("tpu", (3, 3, 3), PACKED[0].to("tpu"))


WEIGHT_NORM = [((6, 3, 5), 0), ((6, 3, 5), 2), ((4, 7), 0), ((4, 7), 1), ((9,), 0)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("case", range(len(WEIGHT_NORM)))
def test_weight_norm_interface_matches_cpu(case, dtype):
    shape, dim = WEIGHT_NORM[case]
    v = make(shape, dtype)
    g = make([n if d == dim else 1 for d, n in enumerate(shape)], dtype)
    grad_w = make(shape, dtype)
    outs = {}
    for device in ("cpu", "tpu"):
        vd, gd = (t.detach().to(device).requires_grad_() for t in (v, g))
        w, norm = torch._weight_norm_interface(vd, gd, dim)
        w.backward(grad_w.to(device))
        outs[device] = (w, norm, vd.grad, gd.grad)
    tol = dict(atol=2e-2, rtol=2e-2) if dtype in (torch.bfloat16, torch.float16) else {}
    for c, t in zip(outs["cpu"], outs["tpu"]):
        assert t.dtype == c.dtype and t.shape == c.shape
        torch.testing.assert_close(t.cpu(), c, **tol)


def test_weight_norm_module_runs_native():
    torch.manual_seed(0)
    conv = torch.nn.utils.parametrizations.weight_norm(torch.nn.Conv1d(4, 6, 3), dim=2)
    x = torch.randn(2, 4, 9)
    ref = conv(x)
    ref.sum().backward()
    dev = torch.nn.utils.parametrizations.weight_norm(torch.nn.Conv1d(4, 6, 3), dim=2)
    dev.load_state_dict(conv.state_dict())
    dev.to("tpu")
    torch_tpu.metrics.reset()
    with torch.tpu.precision("highest"):  # the conv itself is compared at f32, not bf16 passes
        out = dev(x.to("tpu"))
        out.sum().backward()
    assert not torch_tpu.metrics.fallback_ops()
    torch.testing.assert_close(out.cpu(), ref, atol=1e-5, rtol=1e-5)
    for (n, p), q in zip(conv.named_parameters(), dev.parameters()):
        torch.testing.assert_close(q.grad.cpu(), p.grad, atol=1e-5, rtol=1e-5, msg=n)


@pytest.mark.parametrize("dim", [1, -1])
def test_weight_norm_interface_middle_dim_raises(dim):
    v, g = torch.ones(3, 4, 5), torch.ones(1, 4, 1)
    for device in ("cpu", "tpu"):
        with pytest.raises(RuntimeError, match="first or last dim"):
            torch._weight_norm_interface(v.to(device), g.to(device), dim)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("module", ["LSTM", "LSTMCell"])
def test_lstm_matches_cpu_without_fallback(module, bias):
    torch.manual_seed(0)
    cpu = getattr(torch.nn, module)(5, 7, bias=bias, **({"num_layers": 2, "batch_first": True} if module == "LSTM" else {}))
    x = torch.randn(3, 4, 5) if module == "LSTM" else torch.randn(3, 5)
    tpu = copy.deepcopy(cpu).to("tpu")
    ref = cpu(x)
    torch_tpu.metrics.reset()
    with torch.tpu.precision("highest"):
        out = tpu(x.to("tpu"))
        # both outputs feed the loss, so grad_hy and grad_cy both reach the cell's backward
        loss = lambda o: o[0].sum() + o[1][1].pow(2).sum() if module == "LSTM" else o[0].sum() + o[1].pow(2).sum()  # noqa: E731
        loss(out).backward()
    loss(ref).backward()
    assert not torch_tpu.metrics.fallback_ops()
    torch.testing.assert_close(out[0].cpu(), ref[0], atol=1e-5, rtol=1e-5)
    for (n, p), q in zip(cpu.named_parameters(), tpu.parameters()):
        torch.testing.assert_close(q.grad.cpu(), p.grad, atol=1e-5, rtol=1e-5, msg=n)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("module", ["GRU", "GRUCell"])
def test_gru_matches_cpu_in_float64_without_fallback(module, bias):
    # PyTorch's test_modules found nn.GRU raising on tpu: an accelerator's GRU calls the fused
    # cell, which CPU has no kernel for. create_graph takes PyTorch's differentiable backward.
    torch.manual_seed(0)
    kwargs = {"num_layers": 2, "bidirectional": True} if module == "GRU" else {}
    cpu = getattr(torch.nn, module)(5, 7, bias=bias, dtype=torch.float64, **kwargs)
    x = torch.randn(3, 4, 5, dtype=torch.float64) if module == "GRU" else torch.randn(3, 5, dtype=torch.float64)
    tpu = copy.deepcopy(cpu).to("tpu")
    for create_graph in (False, True):
        results = []
        for model, device in ((cpu, "cpu"), (tpu, "tpu")):
            model.zero_grad()
            torch_tpu.metrics.reset()
            xd = x.to(device).requires_grad_()
            out = model(xd)
            loss = (out[0] if module == "GRU" else out).pow(2).sum()
            grads = torch.autograd.grad(loss, [xd, *model.parameters()], create_graph=create_graph)
            if create_graph:  # a second derivative through the cell's backward
                grads = torch.autograd.grad(grads[0].pow(2).sum(), [xd, *model.parameters()])
            if device == "tpu":
                assert not torch_tpu.metrics.fallback_ops()
            results.append([g.cpu() for g in grads])
        for a, e in zip(*results[::-1]):
            torch.testing.assert_close(a, e, atol=1e-12, rtol=1e-10)


_PAD = torch.tensor([[False] * 5, [False] * 3 + [True] * 2, [False] * 4 + [True]])
_ENCODER_MASKS = {
    "none": (None, None),
    "src_mask": (torch.triu(torch.full((5, 5), float("-inf")), 1), None),
    "boolean src_mask": (torch.triu(torch.ones(5, 5, dtype=torch.bool), 1), None),
    "key padding": (None, _PAD),
    "both": (torch.triu(torch.full((5, 5), float("-inf")), 1), _PAD),
    "a sequence all padding (NaN, as CPU)": (None, torch.tensor([[False] * 5, [True] * 5, [False] * 4 + [True]])),
}


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("masks", sorted(_ENCODER_MASKS))
def test_transformer_encoder_inference_fast_path_matches_cpu(masks, activation, norm_first):
    # PyTorch's test_nn: an eval-mode TransformerEncoderLayer under no_grad takes its fast path
    # (_transformer_encoder_layer_fwd) on tpu as on CUDA; it ran on the CPU fallback
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 4, 32, batch_first=True, norm_first=norm_first,
                                             activation=activation).eval()
    x = torch.randn(3, 5, 16)
    src_mask, pad = _ENCODER_MASKS[masks]
    tpu_layer = copy.deepcopy(layer).to("tpu")
    with torch.no_grad():
        expected = layer(x, src_mask=src_mask, src_key_padding_mask=pad)
        torch_tpu.metrics.reset()
        with torch.tpu.precision("highest"):
            actual = tpu_layer(x.to("tpu"), src_mask=None if src_mask is None else src_mask.to("tpu"),
                               src_key_padding_mask=None if pad is None else pad.to("tpu"))
    assert not torch_tpu.metrics.fallback_ops()
    torch.testing.assert_close(actual.cpu(), expected, atol=2e-6, rtol=1e-5, equal_nan=True)


def test_transformer_encoder_nested_fast_path_explains_itself():
    # nn.TransformerEncoder packs a padded batch into a nested tensor, which tpu does not have:
    # a NotImplementedError that names the way out, which gives CPU's result but at the padding
    layer = torch.nn.TransformerEncoderLayer(16, 4, 32, batch_first=True)
    x = torch.randn(3, 5, 16)
    with torch.no_grad():
        expected = torch.nn.TransformerEncoder(layer, 2).eval()(x, src_key_padding_mask=_PAD)
        with pytest.raises(NotImplementedError, match="enable_nested_tensor=False"):
            torch.nn.TransformerEncoder(layer, 2).eval().to("tpu")(x.to("tpu"), src_key_padding_mask=_PAD.to("tpu"))
        encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval().to("tpu")
        with torch.tpu.precision("highest"):
            actual = encoder(x.to("tpu"), src_key_padding_mask=_PAD.to("tpu"))
    keep = ~_PAD
    torch.testing.assert_close(actual.cpu()[keep], expected[keep], atol=2e-6, rtol=1e-5)
