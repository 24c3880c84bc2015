"""The dry run: the calls it prices are the calls a real tpu step issues, it allocates nothing,
its command line keeps its contract, slices are read as Google names them."""
import json
import resource
import subprocess
import sys

import pytest
import torch

from torch_tpu import dryrun
from torch_tpu.cost import CostRecorder

TINY_LLAMA = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256}


def _step_calls(model, batch, seq):
    ids = torch.zeros(batch, seq, dtype=torch.long, device="tpu")
    rec = CostRecorder("v6e")
    with rec:
        model(input_ids=ids, labels=ids).loss.backward()
    return [(op.name, op.shapes) for op in rec.ops]


def test_fake_step_issues_the_calls_of_a_real_step():
    torch.manual_seed(0)
    with torch.device("tpu"):
        real = _step_calls(dryrun.build_model(TINY_LLAMA), 2, 16)
    with dryrun.fake_tpu():
        fake = _step_calls(dryrun.build_model(TINY_LLAMA), 2, 16)
    # The one difference: transformers reads a value on real tensors (its packed-sequence check,
    # a host sync) that fake tensors cannot give, and takes the same branch without it.
    sync = [("eq.Scalar", ((2,),)), ("all.default", ((2,),)), ("_local_scalar_dense.default", ((),))]
    i = real.index(sync[0])
    assert real[i:i + 3] == sync
    assert len(real) > 100 and real[:i] + real[i + 3:] == fake


def test_dry_run_allocates_nothing():
    before = torch.tpu.memory_allocated()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    config = dict(TINY_LLAMA, hidden_size=4096, intermediate_size=14336, num_hidden_layers=4, vocab_size=128256,
                  num_attention_heads=32, num_key_value_heads=8)  # 1.9 B parameters: 7.7 GB if they were real
    r = dryrun.estimate_training(config, "v6e-8", seq=2048, global_batch=16)
    assert torch.tpu.memory_allocated() == before
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss < 300 * 1024  # KiB: under 300 MB
    assert r["params"] > 1.9e9 and r["fits"] and 0 < r["mfu"] < 1


def test_estimates_follow_the_workload():
    small = dryrun.estimate_training(TINY_LLAMA, "v6e-4", seq=128, global_batch=8)
    double = dryrun.estimate_training(TINY_LLAMA, "v6e-4", seq=128, global_batch=16)
    assert double["step_time_s"] > small["step_time_s"]
    assert double["hbm_breakdown_bytes"]["activations"] == pytest.approx(2 * small["hbm_breakdown_bytes"]["activations"], rel=0.01)  # rotary tables do not grow
    none = dryrun.estimate_training(TINY_LLAMA, "v6e-4", seq=128, global_batch=8, remat="none")
    assert none["step_breakdown_s"]["recompute"] == 0 < small["step_breakdown_s"]["recompute"]
    serve = dryrun.estimate_serving(TINY_LLAMA, "v6e-4", batch=4, input_len=64, output_len=16)
    assert 0 < serve["tpot_s"] < serve["ttft_s"] and serve["tokens_per_s"] > 0


def test_slices_as_google_names_them():
    s = dryrun.Slice("tpu7x-16384")
    assert (s.chips, s.tensorcores, s.generation) == (8192, 16384, "v7")
    assert dryrun.Slice("v5p-512").chips == 256 and dryrun.Slice("v6e-256").dims == [16, 16]
    with pytest.raises(ValueError, match="not a TPU generation"):
        dryrun.Slice("v9-8")
    with pytest.raises(ValueError, match="multiple of 2"):
        dryrun.Slice("v5p-3")
    with pytest.raises(ValueError, match="largest v6e slice"):
        dryrun.Slice("v6e-512")


def test_command_line_contract():
    out = subprocess.run([sys.executable, "-m", "torch_tpu", "dryrun", "--config-json", json.dumps(TINY_LLAMA),
                          "--slice", "v6e-4", "--seq", "128", "--global-batch", "8", "--compare", "--json"],
                         capture_output=True, text=True, check=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    for key in ("step_time_s", "tokens_per_s_per_chip", "mfu", "hbm_per_chip_bytes", "fits", "usd_per_mtok"):
        assert key in result, key
    assert {g["accelerator"] for g in result["other_accelerators"]} == {"h100", "h200", "b200", "trn2"}
    bad = subprocess.run([sys.executable, "-m", "torch_tpu", "dryrun", "--config-json", "{}"], capture_output=True, text=True)
    assert bad.returncode == 2 and "model_type" in bad.stderr


def test_torchtitan_job_files(tmp_path):
    job = tmp_path / "llama3_8b.toml"
    job.write_text('[model]\nname = "llama3"\nflavor = "8B"\n[training]\nlocal_batch_size = 2\nseq_len = 4096\n'
                   '[parallelism]\ntensor_parallel_degree = 2\n[activation_checkpoint]\nmode = "selective"\n')
    config, kwargs, notes = dryrun.titan_workload(job, chips=8)
    # torchtitan's FeedForward width for 8B: 1.3 x 8/3 x 4096 rounded up to 1024s, as Llama 3 8B's 14336
    assert config["intermediate_size"] == 14336 and config["num_key_value_heads"] == 8
    assert kwargs == {"seq": 4096, "global_batch": 2 * 4, "tp": 2, "remat": "full"} and "selective" in notes[0]
    bad = tmp_path / "other.toml"
    bad.write_text('[model]\nname = "deepseek_v3"\nflavor = "16B"\n')
    with pytest.raises(ValueError, match="llama3 flavors"):
        dryrun.titan_workload(bad, chips=8)
