"""HBM accounting, the caching allocator's statistics, OOM and recovery."""
import gc
import os
import subprocess
import sys

import pytest
import torch


def test_allocated_peak_reserved():
    torch.tpu.synchronize()
    base = torch.tpu.memory_allocated()
    torch.tpu.reset_peak_memory_stats()
    x = torch.empty(1 << 20, device="tpu")  # 4 MiB
    assert torch.tpu.memory_allocated() - base == 4 << 20
    assert torch.tpu.max_memory_allocated() >= base + (4 << 20)
    assert torch.tpu.memory_reserved() >= torch.tpu.memory_allocated()
    del x
    assert torch.tpu.memory_allocated() == base
    assert torch.tpu.memory_reserved() >= base + (4 << 20)  # cached
    torch.tpu.empty_cache()
    assert torch.tpu.memory_reserved() == torch.tpu.memory_allocated()
    free, total = torch.tpu.mem_get_info()
    assert total == 32 << 30 and 0 < free <= total


def test_cached_block_is_reused():
    x = torch.empty(1000, device="tpu")
    ptr = x.data_ptr()
    del x
    y = torch.empty(1000, device="tpu")
    assert y.data_ptr() == ptr


def test_oom_names_request_capacity_and_use_and_recovers():
    keep = torch.empty(1 << 20, device="tpu")
    with pytest.raises(torch.OutOfMemoryError) as e:
        torch.empty(10_000_000_000, device="tpu")  # 40 GB of float32 on a 32 GiB v6e
    msg = str(e.value)
    assert "Tried to allocate 37.25 GiB" in msg and "HBM capacity 32.00 GiB" in msg and "allocated" in msg
    assert torch.tpu.memory_stats()["num_ooms"] >= 1
    torch.tpu.empty_cache()
    y = torch.ones(1000, device="tpu")
    assert y.cpu().sum().item() == 1000
    del keep


def test_memory_stats_keys():
    s = torch.tpu.memory_stats()
    for k in ("allocated_bytes.all.current", "allocated_bytes.all.peak", "reserved_bytes.all.current",
              "num_ooms", "allocation.all.allocated"):
        assert k in s
    assert "MiB" in torch.tpu.memory_summary()


def test_convolution_peak_includes_its_temporaries():
    """Kernel temporaries are HBM like tensors: a convolution's peak has them on top of its
    output: at stride 1, the zero-padded image its columns are read from and the product over
    padded positions; in bfloat16, the stored column matrix (C_in * kh * kw rows by
    H_out * W_out columns, 8-byte slots)."""
    x = torch.randn(1, 8, 32, 32, device="tpu")
    w = torch.randn(16, 8, 3, 3, device="tpu")
    for dtype, temps in ((torch.float32, 8 * 34 * 34 * 4 + 16 * (31 * 34 + 32) * 4),
                         (torch.bfloat16, 8 * 3 * 3 * 32 * 32 * 8)):
        xd, wd = x.to(dtype), w.to(dtype)
        torch.tpu.synchronize()
        base = torch.tpu.memory_allocated()
        torch.tpu.reset_peak_memory_stats()
        with torch.tpu.precision("highest"):  # f32 products, to compare with CPU's
            y = torch.nn.functional.conv2d(xd, wd, padding=1)
        torch.tpu.synchronize()
        out_bytes = y.numel() * y.element_size()
        assert torch.tpu.max_memory_allocated() - base >= out_bytes + temps, dtype
        assert torch.tpu.memory_allocated() - base == out_bytes  # the temporaries went back
        del y
    with torch.tpu.precision("highest"):
        y = torch.nn.functional.conv2d(x, w, padding=1)
    torch.testing.assert_close(y.cpu(), torch.nn.functional.conv2d(x.cpu(), w.cpu(), padding=1), rtol=1e-4, atol=1e-4)


def _peak_of(fn):
    gc.collect()  # tensors of earlier tests freed now, not during fn
    torch.tpu.synchronize()
    base = torch.tpu.memory_allocated()
    torch.tpu.reset_peak_memory_stats()
    y = fn()
    torch.tpu.synchronize()
    return torch.tpu.max_memory_allocated() - base, y


@pytest.mark.parametrize("op", ["mm", "addmm", "bmm"])
def test_out_matmul_writes_its_output_in_place(op):
    """A dense out= tensor is written directly (every matmul torch.compile emits is an out=
    call): its peak is the functional call's less the output the functional call allocates.
    Passed as an input too, it had been computed into a private copy of its size and copied."""
    g = torch.Generator().manual_seed(0)
    a, b, bias = (torch.randn(s, generator=g) for s in ((4, 64, 96), (4, 96, 80), (80,)))
    if op != "bmm":
        a, b = a[0], b[0]
    args = {"mm": (a, b), "addmm": (bias, a, b), "bmm": (a, b)}[op]
    targs = [t.to("tpu") for t in args]
    fn = getattr(torch, op)
    functional, ref = _peak_of(lambda: fn(*targs))
    out = torch.empty_like(ref)
    with_out, _ = _peak_of(lambda: fn(*targs, out=out))
    assert with_out <= functional - ref.numel() * ref.element_size(), (with_out, functional)
    assert torch.equal(out.cpu(), ref.cpu())
    with torch.tpu.precision("highest"):  # f32 products, to compare with CPU's
        torch.testing.assert_close(fn(*targs, out=out).cpu(), fn(*args), rtol=1e-4, atol=1e-4)
    strided = torch.empty(ref.shape[::-1] if op != "bmm" else ref.shape, device="tpu")
    strided = strided.t() if op != "bmm" else strided.transpose(1, 2).contiguous().transpose(1, 2)
    fn(*targs, out=strided)  # a strided out= keeps the private copy, which writes its strides
    assert torch.equal(strided.cpu(), ref.cpu())


def test_kernel_temporaries_run_out_of_hbm_as_oom():
    """A chip too small for a convolution's temporaries fails it with OutOfMemoryError, and recovers."""
    code = ("import torch, torch_tpu\n"
            "x = torch.randn(1, 8, 128, 128, device='tpu'); w = torch.randn(8, 8, 3, 3, device='tpu')\n"
            "try:  # at highest: the in-place path in every build (those with a bf16 unit pack at default)\n"
            "    with torch.tpu.precision('highest'): torch.nn.functional.conv2d(x, w, padding=1)\n"
            "    torch.tpu.synchronize(); print('ran')\n"
            "except torch.OutOfMemoryError as e:\n"
            "    print('oom', 'TPU out of memory' in str(e))\n"
            "print(torch.nn.functional.conv2d(x[:, :, :8, :8], w, padding=1).shape)\n")
    # 2 MiB: room for x, w and the output (512 KiB each) but not the temporaries (the padded
    # image 528 KiB, the product over padded positions 520 KiB, the accumulator 512 KiB)
    env = {**os.environ, "TPU_HBM_BYTES": str(1 << 21)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.splitlines()[:2] == ["oom True", "torch.Size([1, 8, 8, 8])"]
