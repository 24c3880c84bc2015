"""HBM accounting, the caching allocator's statistics, OOM and recovery."""
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
    assert total == 32_000_000_000 and 0 < free <= total


def test_cached_block_is_reused():
    x = torch.empty(1000, device="tpu")
    ptr = x.data_ptr()
    del x
    y = torch.empty(1000, device="tpu")
    assert y.data_ptr() == ptr


def test_oom_names_request_capacity_and_use_and_recovers():
    keep = torch.empty(1 << 20, device="tpu")
    with pytest.raises(torch.OutOfMemoryError) as e:
        torch.empty(10_000_000_000, device="tpu")  # 40 GB of float32 on a 32 GB v6e
    msg = str(e.value)
    assert "Tried to allocate 37.25 GiB" in msg and "HBM capacity 29.80 GiB" in msg and "allocated" in msg
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
