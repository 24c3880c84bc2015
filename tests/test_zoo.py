"""Tier 1's machinery on a few real transformers architectures (the full sweep is
`python zoo/tier1.py`): tiny random models must PASS forward, backward + SGD step and
greedy generate against PyTorch CPU, with no CPU fallbacks."""
import pathlib
import sys

import pytest

pytest.importorskip("transformers")
sys.path.insert(0, str(pathlib.Path(__file__).parent.parent / "zoo"))
from tier1 import run_one  # noqa: E402


@pytest.mark.parametrize("model_type", ["gpt2", "bert", "llama"])
def test_tier1_model_passes(model_type):
    rec = run_one(model_type)
    assert rec["verdict"] == "PASS", rec
    assert rec["fallbacks"] == {}, rec["fallbacks"]
    assert all(v is True for v in rec["stages"].values()), rec["stages"]


def test_unbuildable_type_is_reported_not_raised():
    rec = run_one("no-such-architecture")
    assert rec["verdict"] == "NOT_BUILDABLE" and "config" in rec["reason"]
