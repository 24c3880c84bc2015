"""bench/serving.py at its smallest: a tiny Llama served by Hugging Face's continuous batching
on tpu and on CPU generates the same tokens with no CPU fallbacks, and the dry run prices it on
each generation."""
import os
import sys

import pytest

pytest.importorskip("transformers")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))
import serving  # noqa: E402

pytestmark = pytest.mark.once


def test_continuous_batching_serves_the_same_tokens_as_cpu():
    report = serving.main(["--requests", "6", "--slots", "3", "--prompt-min", "3", "--prompt-max", "20",
                           "--new-tokens", "5", "--layers", "1", "--hidden", "64", "--heads", "4",
                           "--vocab", "256", "--json"])
    assert report["same_tokens"] == "6/6"
    assert report["fallback_ops"] == {}
    for device in ("cpu", "tpu"):
        m = report["measured"][device]
        assert m["tokens"] == 6 * 5
        assert 0 < m["ttft_p50_s"] <= m["latency_p50_s"] <= m["wall_s"]
    assert set(report["dry_run"]) == set(serving.GENERATIONS)
    v5e, v6e = report["dry_run"]["v5e-1"], report["dry_run"]["v6e-1"]
    assert v6e["tokens_per_s_per_chip"] > v5e["tokens_per_s_per_chip"] > 0  # v6e: 4.7x the bf16 FLOP/s
    assert v5e["usd_per_mtok"] > 0 and report["dry_run"]["v7-8"]["usd_per_mtok"] is None  # no public v7 price
