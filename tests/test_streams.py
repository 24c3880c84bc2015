"""Streams, events and the asynchronous (strict) / synchronous (debug) eager modes."""
import pytest
import torch

import torch_tpu


def test_streams_are_ordered_and_events_time():
    s = torch.tpu.Stream()
    assert s.device_index == 0 and s != torch.tpu.current_stream()
    start, end = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
    x = torch.ones(256, 256, device="tpu")
    with torch.tpu.stream(s):
        assert torch.tpu.current_stream() == s
        start.record()
        y = x + 1
        for _ in range(20):
            y = y + 1
        end.record()
    torch.tpu.current_stream().wait_stream(s)
    z = y + 0
    assert torch.equal(z.cpu(), torch.full((256, 256), 22.0))
    end.synchronize()
    assert start.elapsed_time(end) >= 0
    assert end.query()


def test_event_wait_orders_streams():
    s1, s2 = torch.tpu.Stream(), torch.tpu.Stream()
    a = torch.zeros(1 << 16, device="tpu")
    with torch.tpu.stream(s1):
        for _ in range(10):
            a.add_(1)
        ev = torch.tpu.Event()
        ev.record()
    with torch.tpu.stream(s2):
        ev.wait()
        b = a + 0
    s2.synchronize()
    assert b.cpu()[0].item() == 10


def test_default_mode_is_strict_and_asynchronous_error_surfaces_at_sync():
    assert torch.tpu.get_eager_mode() == "strict"
    p = torch.full((8,), 2.0, device="tpu")  # invalid probabilities: found only by reading data
    torch.empty(8, device="tpu").bernoulli_(torch.full((8,), 0.5, device="tpu"))  # a signature's first call blocks
    out = torch.empty(8, device="tpu").bernoulli_(p)  # returns at once
    with pytest.raises(RuntimeError, match="bernoulli"):
        torch.tpu.synchronize()
    torch.tpu.synchronize()  # reported once; the device carries on
    assert (torch.ones(2, device="tpu") + 1).cpu().tolist() == [2.0, 2.0]
    del out


def test_debug_mode_raises_at_the_issuing_line():
    p = torch.full((8,), 2.0, device="tpu")
    with torch.tpu.eager_mode("debug"):
        assert torch.tpu.get_eager_mode() == "debug"
        with pytest.raises(RuntimeError, match="p_in"):
            torch.empty(8, device="tpu").bernoulli_(p)
    assert torch.tpu.get_eager_mode() == "strict"
    with pytest.raises(ValueError):
        torch.tpu.set_eager_mode("fast")


def test_launch_blocking_env_selects_debug():
    import subprocess
    import sys

    code = "import torch; print(torch.tpu.get_eager_mode())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"TPU_LAUNCH_BLOCKING": "1", "PATH": "/usr/bin:/bin"}).stdout
    assert out.strip() == "debug"
