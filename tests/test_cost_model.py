"""The cost model's Python face: the generation table generated from the specs file, one ATen
call's cost from fake tensors equal to the same call's cost from real ones, attention's
causal skip, bad names refused. The formulas themselves: runtime/tests/test_cost.c."""
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import torch_tpu

ROOT = Path(__file__).resolve().parent.parent


def test_generation_table_is_generated_from_the_specs():
    r = subprocess.run([sys.executable, str(ROOT / "runtime" / "gen_generations.py"), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_hbm_capacities_are_binary():
    assert torch_tpu._C._generation_info("v5e")["hbm_bytes"] == 16 * 2**30
    assert torch_tpu._C._generation_info("v6e-256")["hbm_bytes"] == 32 * 2**30
    assert torch.tpu.get_device_properties(0).total_memory == 32 * 2**30  # the default emulated v6e chip


def test_fake_and_real_tensors_cost_the_same():
    a = torch.randn(96, 200, device="tpu", dtype=torch.bfloat16)
    b = torch.randn(200, 300, device="tpu", dtype=torch.bfloat16)
    real = torch_tpu._C._op_cost("mm", "default", (a, b), {}, a @ b, "v6e")
    with FakeTensorMode():
        fa = torch.empty(96, 200, device="tpu", dtype=torch.bfloat16)
        fb = torch.empty(200, 300, device="tpu", dtype=torch.bfloat16)
        fake = torch_tpu._C._op_cost("mm", "default", (fa, fb), {}, torch.ops.aten.mm(fa, fb), "v6e")
    assert real == fake
    assert fake["flops"] == 2 * 96 * 200 * 300
    assert fake["mxu_flops"] == 2 * 96 * 256 * 512  # k and n padded to v6e's 256-wide MXU


def test_out_variant_costs_what_the_functional_call_costs():
    """out= is the output, not also an input read: the bytes of a, b and the result, once."""
    a, b = torch.randn(64, 96, device="tpu"), torch.randn(96, 80, device="tpu")
    out = torch.empty(64, 80, device="tpu")
    functional = torch_tpu._C._op_cost("mm", "default", (a, b), {}, a @ b, "v6e")
    with_out = torch_tpu._C._op_cost("mm", "out", (a, b), {"out": out}, torch.mm(a, b, out=out), "v6e")
    assert with_out["hbm_bytes"] == functional["hbm_bytes"] == (64 * 96 + 96 * 80 + 64 * 80) * 4
    assert with_out["flops"] == functional["flops"]


def test_causal_attention_does_half_the_work():
    q = torch.randn(1, 2, 128, 64, device="tpu")
    args = (q, q, q, None, 0.0)
    costs = []
    for causal in (False, True):
        outs = torch.ops.aten._scaled_dot_product_fused_attention_overrideable(q, q, q, None, 0.0, causal)
        costs.append(torch_tpu._C._op_cost("_scaled_dot_product_fused_attention_overrideable", "default",
                                           args + (causal,), {}, outs, "v5e"))
    assert costs[0]["flops"] == 2 * 2 * 128 * 128 * (64 + 64)
    assert costs[1]["flops"] == costs[0]["flops"] / 2


def test_ops_outside_the_table_and_bad_generations():
    x = torch.randn(4, device="tpu")
    assert torch_tpu._C._op_cost("no_such_op", "default", (x,), {}, x, "v6e") is None
    with pytest.raises(ValueError, match="not a TPU generation"):
        torch_tpu._C._op_cost("add", "Tensor", (x, x), {}, x + x, "v99")
    with pytest.raises(ValueError, match="unknown collective"):
        torch_tpu._C._collective_cost("v6e", "all_sum", 8, [4], [1])
    with pytest.raises(NotImplementedError, match="not published"):
        torch_tpu._C._collective_cost("v4", "all_reduce", 8, [4], [1])
