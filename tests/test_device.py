"""The tpu device as PyTorch sees it: registration, torch.tpu, torch.accelerator, chips."""
import os
import pathlib
import subprocess
import sys

import pytest
from together import run_together
import torch

import torch_tpu


def test_available_and_default_chip():
    assert torch.tpu.is_available()
    assert torch.tpu.device_count() == 1
    p = torch.tpu.get_device_properties(0)
    assert p.generation == "v6e" and p.total_memory == 32 << 30 and p.mxu_dim == 256
    assert torch.tpu.current_device() == 0
    assert torch._C._get_privateuse1_backend_name() == "tpu"


def test_tensor_lives_on_tpu():
    x = torch.randn(64, 128, device="tpu")
    assert x.device == torch.device("tpu", 0) and x.is_tpu
    assert torch.equal(x.cpu().to("tpu").cpu(), x.cpu())
    m = torch.nn.Linear(3, 4).tpu()
    assert m.weight.device.type == "tpu"


def test_accelerator_api():
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("tpu")
    assert torch.accelerator.device_count() == 1
    assert torch.accelerator.current_device_index() == 0
    torch.accelerator.synchronize()
    x = torch.empty(1024, device="tpu")
    assert torch.accelerator.memory_allocated() >= 4096
    del x


def test_our_dynamo_interface_won_over_pytorchs_stub():
    from torch._dynamo import device_interface as di

    from torch_tpu._dynamo_interface import TpuInterface

    assert di.get_interface_for_device("tpu") is TpuInterface
    assert di.get_interface_for_device("tpu:0") is TpuInterface


def test_autoload_without_explicit_import():
    code = "import torch; x = torch.ones(3, device='tpu'); print(x.device, hasattr(torch, 'tpu'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "tpu:0 True"


def test_slice_from_launch_env():
    code = ("import torch; p = torch.tpu.get_device_properties(7); "
            "print(torch.tpu.device_count(), p.generation, p.topology, p.total_memory)")
    env = {"TPU_ACCELERATOR_TYPE": "v5litepod-8", "PATH": "/usr/bin:/bin"}
    visible = "import torch; print(torch.tpu.device_count(), torch.tpu.get_device_properties(0).global_index)"
    whole, one = run_together([(["-c", code], env), (["-c", visible], dict(env, TPU_VISIBLE_CHIPS="3"))])
    assert whole.stdout.split() == ["8", "v5e", "2x4", "17179869184"], whole.stderr[-3000:]
    assert one.stdout.split() == ["1", "3"], one.stderr[-3000:]


def test_device_context_and_invalid_index():
    with torch.tpu.device(0):
        assert torch.tpu.current_device() == 0
    with pytest.raises((ValueError, RuntimeError)):
        torch.tpu.set_device(5)


def test_info_cli():
    out = subprocess.run([sys.executable, "-m", "torch_tpu", "info"], capture_output=True, text=True,
                         check=True).stdout
    assert "v6e" in out and "tpu:0" in out and "HBM" in out


def test_info_lists_every_environment_variable_the_runtime_reads():
    import re
    runtime = pathlib.Path(__file__).resolve().parent.parent / "runtime" / "src"
    for f in runtime.rglob("*.c"):  # the runtime reads the environment only through its table
        assert "getenv(" not in f.read_text() or f.name == "chip.c", f
    table = {name for name, _, _ in torch_tpu._C._environment()}
    header = (runtime.parent / "include" / "tpurt.h").read_text()  # TPU_* names and the launcher's (LOCAL_RANK)
    read = set(re.findall(r'"((?:TORCH_)?TPU_[A-Z_]+)"', header)) | set(re.findall(r'X\(TPURT_ENV_\w+, "(\w+)"', header))
    assert table == read and "TPU_NUM_THREADS" in table
    env = dict(os.environ, TPU_NUM_THREADS="3")
    out = subprocess.run([sys.executable, "-m", "torch_tpu", "info"], capture_output=True, text=True, check=True,
                         env=env).stdout
    for name in table:
        assert name in out
    assert re.search(r"TPU_NUM_THREADS\s+3\s", out) and re.search(r"TPU_HBM_BYTES\s+\(unset\)", out)


def test_pinned_memory():
    x = torch.ones(16).pin_memory("tpu")
    assert x.is_pinned("tpu")
    assert torch.equal(x.to("tpu", non_blocking=True).cpu(), torch.ones(16))


def test_module_to_keeps_tied_weights_tied():
    emb = torch.nn.Embedding(10, 4)
    head = torch.nn.Linear(4, 10, bias=False)
    head.weight = emb.weight
    m = torch.nn.ModuleDict({"emb": emb, "head": head}).to("tpu")
    assert m["emb"].weight is m["head"].weight and m["emb"].weight.device.type == "tpu"
    p = torch.nn.Parameter(torch.ones(3))
    q = torch.nn.Module()
    q.p = p
    q.to("tpu")
    assert q.p is p  # parameters are converted in place, as on CUDA


def test_python_reads_the_runtimes_tables():
    """Modes, precisions and native dtypes come from the runtime's lists, not copies of them."""
    from torch._dynamo.device_interface import get_interface_for_device
    assert torch_tpu._C._eager_modes() == {"strict": 0, "debug": 1, "fused": 2}
    assert torch_tpu._C._matmul_precisions() == {"default": 1, "high": 3, "highest": 6}
    native = torch_tpu._C._native_dtypes()
    assert "complex64" in native and "float64" in native and "complex128" not in native
    iface = get_interface_for_device("tpu")
    assert iface.is_dtype_supported(torch.complex64) and iface.is_dtype_supported(torch.bfloat16)
    assert not iface.is_dtype_supported(torch.uint16) and iface.is_dtype_supported(torch.uint16, including_emulation=True)
    assert not iface.is_dtype_supported(torch.qint8, including_emulation=True)
    for name in torch_tpu._C._matmul_precisions():
        with torch.tpu.precision(name):
            assert torch.tpu.get_matmul_precision() == name
    with pytest.raises(ValueError, match="expected one of default, high, highest"):
        torch.tpu.set_matmul_precision("bf16")


def test_attention_backend_is_the_runtimes_plan():
    """scaled_dot_product_attention takes the fused kernel when the runtime's plan takes the
    call (GQA heads, no dropout, 4-D, float32/bf16/f16), and PyTorch's math path otherwise,
    matching CPU."""
    import torch.nn.functional as F
    q, k, v = torch.randn(2, 4, 8, 16), torch.randn(2, 2, 8, 16), torch.randn(2, 2, 8, 16)
    v1 = torch.randn(2, 1, 8, 16)
    cases = [((q, k, v), dict(enable_gqa=True), "sdpa_fused"), ((q, q, q), {}, "sdpa_fused"),
             ((q[0], q[0], q[0]), {}, "bmm"), ((q, q, q), dict(dropout_p=0.5), "bmm"),
             # key and value with different head counts (a Tier 1 model): each is repeated on its
             # own, which the fused kernel's one kv head per group cannot do. It read value head
             # h // 2 where CPU reads h // 4: a silent wrong result
             ((q, k, v1), dict(enable_gqa=True), "bmm"), ((q, v1, k), dict(enable_gqa=True), "bmm")]
    for args, kw, kernel in cases:
        torch.tpu.metrics.reset()
        with torch.tpu.precision("highest"):  # the math path's matmuls in f32, as CPU's
            got = F.scaled_dot_product_attention(*(a.tpu() for a in args), **kw)
        torch.tpu.synchronize()
        assert kernel in torch.tpu.metrics.executed_ops(), (kw, torch.tpu.metrics.executed_ops())
        if "dropout_p" not in kw:
            torch.testing.assert_close(got.cpu(), F.scaled_dot_product_attention(*args, **kw), rtol=1e-5, atol=1e-5)
    # float64 takes the math path (the fused kernel computes in float32: it gave float64 callers
    # float32's accuracy, 5e-8 off, silently)
    q64 = q.double()
    torch.tpu.metrics.reset()
    got = F.scaled_dot_product_attention(q64.tpu(), q64.tpu(), q64.tpu(), is_causal=True)
    torch.tpu.synchronize()
    assert "sdpa_fused" not in torch.tpu.metrics.executed_ops()
    torch.testing.assert_close(got.cpu(), F.scaled_dot_product_attention(q64, q64, q64, is_causal=True),
                               rtol=1e-12, atol=1e-12)


def test_counters_read_while_ops_are_queued_count_them():
    torch.tpu.metrics.reset()
    x = torch.randn(128, 128, device="tpu")
    for _ in range(50):
        x = torch.tanh(x @ x)
    queued = torch.tpu.metrics.counters()["ops_executed"]  # no synchronize before reading
    assert queued >= 101 and "ops executed: " + f"{queued:,}" in torch.tpu.metrics.short_report()
    torch.tpu.synchronize()
    assert torch.tpu.metrics.counters()["ops_executed"] == queued
