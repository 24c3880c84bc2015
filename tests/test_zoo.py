"""The zoo's machinery on a few real transformers architectures (the full sweeps are
`python zoo/tier1.py` and `python zoo/tier2.py`): tiny random models must PASS forward,
backward + SGD step and greedy generate against PyTorch CPU (Tier 1); small ones must match
CPU's logits, loss, every gradient and a 5-step AdamW loss curve (Tier 2); both with no CPU
fallbacks."""
import pathlib
import sys

import pytest

transformers = pytest.importorskip("transformers")
sys.path.insert(0, str(pathlib.Path(__file__).parent.parent / "zoo"))
import tier2  # noqa: E402
from tier1 import run_one  # noqa: E402
from tiny import make_inputs, model_classes, shrink  # noqa: E402


@pytest.mark.parametrize("model_type", ["gpt2", "bert", "llama"])
def test_tier1_model_passes(model_type):
    rec = run_one(model_type)
    assert rec["verdict"] == "PASS", rec
    assert rec["fallbacks"] == {}, rec["fallbacks"]
    assert all(v is True for v in rec["stages"].values()), rec["stages"]


def test_unbuildable_type_is_reported_not_raised():
    rec = run_one("no-such-architecture")
    assert rec["verdict"] == "NOT_BUILDABLE" and "config" in rec["reason"]


@pytest.mark.parametrize("model_type", ["swin", "convnext", "gptj", "deepseek_v3"])
def test_shrunk_config_stays_consistent(model_type):
    """Derived attributes (Swin's hidden_size, DeepSeek's qk_head_dim), per-stage lists and
    rotary sizes shrink together, so the tiny model runs on CPU."""
    cfg = shrink(transformers.AutoConfig.for_model(model_type))
    mapping, cls = model_classes(model_type)[0]
    model = cls(cfg).eval()
    out = model(**make_inputs(model, mapping))
    assert out.logits.isfinite().all()


@pytest.mark.parametrize("model_type", tier2.CI_SUBSET)
def test_tier2_model_passes(model_type):
    rec = tier2.run_one(model_type)
    assert rec["verdict"] == "PASS", rec
    assert rec["fallbacks"] == {}, rec["fallbacks"]
    assert rec["loss"] == "head" and set(rec["errors"]) == {"logits", "loss", "grad", "loss_curve"}


def test_summary_names_the_code_its_records_ran_on():
    """A committed summary must say which commit made its figures, and a resumed sweep's
    records from other commits are named, not claimed for this one."""
    from harness import summary_sections

    from torch_tpu import provenance
    here = provenance.stamp()
    _, lines = summary_sections([{"verdict": "PASS", "commit": here["commit"]},
                                 {"verdict": "PASS", "commit": "0123456789ab"}])
    assert f"torch {here['torch']}" in lines[0] and f"tpu build {here['isa']}" in lines[0]
    assert "0123456789ab" in lines[0]
    if here["commit"]:   # the wheel suite runs outside any checkout
        assert here["commit"] in lines[0]


@pytest.mark.once
def test_bounded_dynamism_serves_every_prompt_length_with_one_graph():
    """zoo/dynamism.py's check on one model: 20 prompt lengths in [2, 64], one graph, 0 recompiles,
    logits equal to eager tpu's."""
    import dynamism

    rec = dynamism.run_one("llama")
    assert rec["verdict"] == "PASS", rec
    assert rec["graphs"] == 1 and rec["recompiles"] == 0 and rec["fallbacks"] == {}, rec


@pytest.mark.once
def test_tier2_compiled_training_matches_cpu():
    """zoo/tier2.py --compile on one model: 5 AdamW steps with forward and backward compiled by
    torch.compile(backend="tpu") match CPU eager at HIGHEST's tolerances, in two graphs."""
    rec = tier2.run_one("llama", "highest", compiled=True)
    assert rec["verdict"] == "PASS", rec
    assert rec["compile"]["graphs_compiled"] == 2 and rec["compile"]["recompiles"] == 0, rec["compile"]
