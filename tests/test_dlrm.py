"""demo/dlrm.py: a TorchRec-style DLRM (nn.EmbeddingBag tables over nested jagged ids, sum and mean
pooling, empty bags, pairwise dot interaction, BCE; SGD for the MLPs, Adagrad for the tables) trains
on tpu as on CPU in one process with no CPU fallback, and with its tables sharded table-wise over 4
tpu_dist ranks (ids and pooled embeddings, and their gradients, exchanged with all_to_all) as one
CPU process trains in float64. torchrec's own EmbeddingBagCollection over a KeyedJaggedTensor is
checked on tpu where torchrec is installed (it is not in requirements.txt: see demo/dlrm.py)."""
import pathlib
import sys

import pytest
import torch

import torch_tpu
from test_tpu_dist import _segments, torchrun

sys.path.insert(0, str(pathlib.Path(__file__).parent.parent / "demo"))
import dlrm  # noqa: E402

pytestmark = pytest.mark.once

STEPS, BATCH = 5, 32


def _train_on_tpu(cfg, sparse=dlrm.Tables):
    torch_tpu.metrics.reset()
    with torch.tpu.precision("highest"):  # f32 matmuls: the default rounds operands to bf16, as a TPU does
        losses, model = dlrm.train_one_process(cfg, dlrm.build(cfg, sparse), "tpu", STEPS, BATCH)
    assert torch_tpu.metrics.fallback_ops() == {}
    return losses, dlrm.params_of(model)


def _expect_like_cpu(cfg, losses, params):
    for dtype in (torch.float32, torch.float64):
        want_losses, want = dlrm.train_one_process(cfg, dlrm.build(cfg), "cpu", STEPS, BATCH, dtype)
        want = dlrm.params_of(want)
        assert losses == pytest.approx(want_losses, abs=1e-5), dtype
        for name in want:
            torch.testing.assert_close(params[name], want[name], rtol=0, atol=1e-5, msg=lambda m: f"{name} vs {dtype}: {m}")
    assert losses[-1] < losses[0]


def test_dlrm_trains_on_tpu_as_on_cpu():
    cfg = dlrm.Config()
    losses, params = _train_on_tpu(cfg)
    assert set(params) >= {f"table.{t}" for t in range(len(cfg.tables))}
    _expect_like_cpu(cfg, losses, params)


def test_torchrec_embedding_bag_collection_trains_on_tpu_as_on_cpu():
    pytest.importorskip("torchrec", reason=f"torchrec is not installed ({dlrm.INSTALL_TORCHREC})")
    cfg = dlrm.Config()
    losses, params = _train_on_tpu(cfg, dlrm.TorchrecTables)
    _expect_like_cpu(cfg, losses, params)


@pytest.mark.once
@pytest.mark.slow
def test_dlrm_with_tables_sharded_over_four_ranks_matches_one_cpu_process():
    before = _segments()
    out = torchrun(4, str(pathlib.Path(dlrm.__file__).resolve()), "--steps", str(STEPS), "--batch", "8")
    assert "ok: sharded DLRM matches single-process training" in out, out
    assert "fell back to CPU: none" in out, out
    assert _segments() <= before, "shared memory left behind"
