"""The benchmarks notice a PyTorch CPU reference that collapsed under load (more threads
slower than one) instead of printing a ratio against it."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))
from bench_gpt import reference_collapsed  # noqa: E402


def result(cpu_ms, one_thread_ms):
    return {"ms_per_step": {"cpu": cpu_ms, "tpu": 100.0}, "cpu_one_thread_ms": one_thread_ms}


def test_collapsed_reference_is_flagged():
    assert reference_collapsed(result(4120.1, 498.3))  # seen on a busy 2-core host


def test_healthy_reference_is_not():
    assert not reference_collapsed(result(138.0, 240.0))  # two threads faster than one
    assert not reference_collapsed(result(250.0, 240.0))  # within the slack
    assert not reference_collapsed(result(250.0, None))  # CPU ran on one thread: nothing to compare
