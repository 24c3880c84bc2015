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


def test_bench_rows_say_when_they_measured_nothing(monkeypatch):
    """bench/run.py marks a case NOISY when PyTorch CPU's rounds spread too far or other
    processes took the CPUs while it ran, instead of printing its ratio as a result."""
    import subprocess
    import time

    import run

    # a quiet host, as /proc reads it: every busy jiffy since `start` was this process's (the
    # real host may be busy now: CI runs another suite beside this one)
    with monkeypatch.context() as m:
        m.setattr(run, "_cpu_jiffies", lambda: (1030, 130))
        start, t0 = (1000, 100), time.perf_counter() - 0.3
        assert run.noise({"cpu": [1.0, 1.05, 0.98], "tpu": [2.0, 2.0, 2.1]}, start, t0) == ""
        assert "reference rounds spread" in run.noise({"cpu": [1.0, 1.9, 1.1], "tpu": [2.0, 2.0, 2.0]}, start, t0)
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
    try:
        start, t0 = run._cpu_jiffies(), time.perf_counter()
        time.sleep(1.0)
        why = run.noise({"cpu": [1.0, 1.0, 1.0]}, start, t0)
    finally:
        for h in hogs:
            h.kill()
    assert "other processes used" in why, why
    assert "NOISY" in run.noisy_note(why) and run.noisy_note("") == ""
