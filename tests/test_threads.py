"""The runtime's worker pool (TPU_NUM_THREADS) and the strict-mode launch path: results are
bit-identical whatever the thread count (every output element is computed by one thread
in a fixed order, or, for reductions into a few outputs, in fixed blocks merged in order), small ops run inline on an idle stream keep issue order with queued big
ops, and failures stay asynchronous."""
import os
import subprocess
import sys

import pytest
import torch


# Big enough that every op is split over the pool (>= 64K elements / 1 MFLOP per block).
SCRIPT = r"""
import sys, torch, torch_tpu
g = torch.Generator().manual_seed(0)
a = torch.randn(300, 517, generator=g)
b = torch.randn(517, 263, generator=g)
x = torch.randn(64, 3000, generator=g)
y = torch.randn(3, 300_001, generator=g)
out = {}
ta, tb, tx, ty = a.to("tpu"), b.to("tpu"), x.to("tpu"), y.to("tpu")
for p in ("highest", "high", "default"):
    with torch.tpu.precision(p):
        out["mm_" + p] = (ta @ tb).cpu()
        out["mmT_" + p] = (ta.t().contiguous().t() @ tb).cpu()
# few rows, many columns (a convolution's per-sample GEMM): the columns are cut across threads too
few, wide = torch.randn(40, 700, generator=g).to("tpu"), torch.randn(700, 2000, generator=g).to("tpu")
out["mm_few_rows"] = (few @ wide).cpu()
out["bmm"] = torch.bmm(tx.view(8, 8, 3000), tx.view(8, 3000, 8)).cpu()
out["gelu"] = torch.nn.functional.gelu(tx).cpu()
out["add_bcast"] = (tx + tx[:1]).cpu()
out["sum_rows"] = tx.sum(1).cpu()
out["sum_cols"] = tx.sum(0).cpu()
out["mean_outer_dims"] = tx.view(8, 8, 3000).mean((0, 1)).cpu()
out["var"] = tx.var(1).cpu()
for name, f in {"sum": torch.sum, "mean": torch.mean, "var": torch.var, "amax": torch.amax,
                "argmin": torch.argmin, "norm": torch.linalg.vector_norm}.items():
    out[name + "_split_all"] = f(ty).cpu()  # one output: blocks over the pool
    out[name + "_split_rows"] = f(ty, 1).cpu()
out["softmax"] = torch.softmax(tx, 1).cpu()
out["softmax0"] = torch.softmax(tx, 0).cpu()
out["layer_norm"] = torch.nn.functional.layer_norm(tx, (3000,)).cpu()
# layer norm backward: fixed blocks of rows (here 8 of 171 rows) summing grad_weight/grad_bias
ln = [t.to("tpu").requires_grad_() for t in (torch.randn(40, 30, 96, generator=g), torch.randn(96, generator=g),
                                             torch.randn(96, generator=g))]
torch.nn.functional.layer_norm(ln[0], (96,), ln[1], ln[2]).backward(torch.randn(40, 30, 96, generator=g).to("tpu"))
for name, t in zip(("dx", "dw", "db"), ln):
    out["layer_norm_" + name] = t.grad.cpu()
# a bias gradient: columns over two leading dims, in narrowed column blocks
out["sum_tokens"] = torch.randn(8, 128, 768, generator=g).to("tpu").sum((0, 1)).cpu()
# fused attention: query-row blocks and key/value heads cut across tasks, GQA, a short last block
qkv = [torch.randn(2, h, 67, 40, generator=g).to("tpu").requires_grad_() for h in (4, 2, 2)]
att = torch.nn.functional.scaled_dot_product_attention(*qkv, is_causal=True, enable_gqa=True)
att.backward(torch.randn(att.shape, generator=g).to("tpu"))
out["sdpa"] = att.detach().cpu()
for name, t in zip("qkv", qkv):
    out["sdpa_d" + name] = t.grad.cpu()
torch.save(out, sys.argv[1])
"""


def run_with_threads(tmp_path, n):
    path = tmp_path / f"out_{n}.pt"
    env = dict(os.environ, TPU_NUM_THREADS=str(n))
    subprocess.run([sys.executable, "-c", SCRIPT, str(path)], check=True, env=env, timeout=600)
    return torch.load(path)


@pytest.mark.once
def test_results_do_not_depend_on_thread_count(tmp_path):
    one, three = run_with_threads(tmp_path, 1), run_with_threads(tmp_path, 3)
    for name in one:
        assert torch.equal(one[name], three[name]), name


def test_inline_small_ops_keep_order_with_queued_big_ops():
    with torch.tpu.eager_mode("strict"):
        big = torch.zeros(1 << 20, device="tpu")
        small = torch.zeros(4, device="tpu")
        for i in range(50):
            big += 1  # queued on the worker
            small += big[:4].sum() * 0 + 1  # depends on the queued work: waits for nothing, stays ordered
        assert torch.equal(big.cpu(), torch.full((1 << 20,), 50.0))
        assert torch.equal(small.cpu(), torch.full((4,), 50.0))


def test_small_op_failure_is_raised_at_the_next_synchronization():
    with torch.tpu.eager_mode("strict"):
        # (indexing, integer division and linalg raise from the call, as CPU does: not one of these)
        x, target = torch.randn(2, 3, device="tpu"), torch.tensor([0, 5], device="tpu")
        torch.nn.functional.nll_loss(x, torch.zeros_like(target))  # a signature's first call runs blocking
        y = torch.nn.functional.nll_loss(x, target)  # out-of-range target: fails on the device, asynchronously
        with pytest.raises(IndexError, match="asynchronous.*out of bounds"):
            torch.tpu.synchronize()
        del y
        torch.tpu.synchronize()  # the failure was raised once


@pytest.mark.parametrize("name", ["sum", "mean", "nansum", "var", "std", "amax", "amin", "argmax", "argmin",
                                  "norm", "norm_inf"])
def test_split_reductions_match_cpu(name):
    # >= 2 blocks of 64K elements per output: the reduction is cut in blocks merged in order
    x = torch.randn(3, 300_001, generator=torch.Generator().manual_seed(1), dtype=torch.float64).float()
    x[1, 200_000] = float("nan") if name == "nansum" else x[1, 200_000]
    x[2, 7] = x[2, 250_000] = x[2].max() + 1  # ties: the first index wins
    norms = {"norm": 2.0, "norm_inf": float("inf")}
    fn = (lambda t, *d: torch.linalg.vector_norm(t, norms[name], *d)) if name in norms else getattr(torch, name)
    for dims in ((), (1,)):
        want, got = fn(x.double(), *dims), fn(x.to("tpu"), *dims).cpu()
        if want.dtype == torch.int64:
            assert torch.equal(got, fn(x, *dims)), (name, dims)
        else:
            torch.testing.assert_close(got, want.float(), rtol=1e-6, atol=1e-6, msg=f"{name} {dims}")
