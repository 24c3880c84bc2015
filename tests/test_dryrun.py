"""The dry run: the calls it prices are the calls a real tpu step issues, it allocates nothing,
its command line keeps its contract, slices are read as Google names them."""
import json
import resource
import subprocess
import sys

import pytest
from together import run_together
import torch

from torch.optim.optimizer import register_optimizer_step_post_hook

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
    good, bad = run_together([(["-m", "torch_tpu", "dryrun", "--config-json", json.dumps(TINY_LLAMA), "--slice", "v6e-4",
                                "--seq", "128", "--global-batch", "8", "--compare", "--json"], None),
                               (["-m", "torch_tpu", "dryrun", "--config-json", "{}"], None)])
    assert good.returncode == 0, good.stderr[-3000:]
    result = json.loads(good.stdout.strip().splitlines()[-1])
    for key in ("step_time_s", "tokens_per_s_per_chip", "mfu", "hbm_per_chip_bytes", "fits", "usd_per_mtok"):
        assert key in result, key
    assert {g["accelerator"] for g in result["other_accelerators"]} == {"h100", "h200", "b200", "trn2"}
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


# ---------------------------------------------------------------- a user's own script
SCRIPT = '''
import argparse, torch
ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=100)
ap.add_argument("--width", type=int, default=200)
ap.add_argument("--build-on", default="cpu")
a = ap.parse_args()
torch.manual_seed(0)


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(96, 64)
        self.fc, self.out = torch.nn.Linear(64, a.width), torch.nn.Linear(a.width, 96, bias=False)
        self.head = torch.nn.Linear(64, 96, bias=False)
        self.head.weight = self.emb.weight  # tied


    def forward(self, x):
        h = self.emb(x)
        return self.head(h) + self.out(torch.relu(self.fc(h)))


with torch.device(a.build_on):
    model = Model()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)  # built before the move, as some scripts do
model.to("tpu")
for step in range(a.steps):
    x = torch.randint(0, 96, (4, 24))
    loss = torch.nn.functional.cross_entropy(model(x.to("tpu")).flatten(0, 1), x.flatten().to("tpu"))
    loss.backward()
    opt.step()
    opt.zero_grad()
    print("loss", loss.item())
'''


def _line(text, code):
    return next(i for i, line in enumerate(text.splitlines(), 1) if code in line)


def _real_step_calls(path, steps):
    """The calls a real tpu run of the script issues, cut at its optimizer steps."""
    from torch_tpu.port import run_script

    rec, ends = CostRecorder("v6e"), []
    hook = register_optimizer_step_post_hook(lambda *_: ends.append(len(rec.ops)))
    try:
        assert run_script(str(path), ["--steps", str(steps)], rec) is None
    finally:
        hook.remove()
    return rec.ops, ends


def test_script_dry_run_issues_the_calls_of_a_real_run(tmp_path):
    from torch_tpu.dryrun_script import run

    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    real, real_ends = _real_step_calls(path, 3)
    rec, error, _ = run(path, ["--steps", "100"], "v6e", steps=3)
    assert error is None and rec.step_ends == real_ends  # stopped after 3 of the script's 100 steps
    real = real[:real_ends[-1]]  # the dry run ends at the last step it was asked for
    assert [(o.name, o.shapes) for o in rec.ops] == [(o.name, o.shapes) for o in real]
    assert [o.seconds for o in rec.ops] == [o.seconds for o in real]
    # the tie survived the move: one embedding matrix, updated once per step
    (params, grads, state), = {m for m in rec.step_memory}
    assert params == (96 * 64 + 64 * 200 + 200 + 200 * 96) * 4 and grads == params and state == 2 * params
    assert rec.host_reads == {f"{path}:{_line(SCRIPT, 'loss.item()')}": 2}  # the loss logged after the first two steps


def test_script_dry_run_measures_the_peak_a_real_run_reaches(tmp_path):
    from torch_tpu.dryrun_script import estimate_script

    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    torch.tpu.synchronize()
    torch.tpu.empty_cache()
    torch.tpu.reset_peak_memory_stats()
    base = torch.tpu.memory_allocated()
    from torch_tpu.port import run_script

    # 8192 wide: the large tensors are whole MiB, which the device's allocator does not round up
    assert run_script(str(path), ["--steps", "3", "--width", "8192"], CostRecorder("v6e")) is None
    real_peak = torch.tpu.max_memory_allocated() - base
    r = estimate_script(path, ["--steps", "100", "--width", "8192"], "v6e-8", steps=3, tokens_per_step=96)
    assert r["error"] is None and r["steps_recorded"] == 3 and r["steps_priced"] == 2
    assert r["hbm_per_chip_bytes"] == pytest.approx(real_peak, rel=0.001)
    assert r["fits"] and r["step_breakdown_s"]["gradient_all_reduce"] > 0
    assert r["step_time_s"] > 0 and 0 < r["mfu"] < 1 and r["usd_per_mtok"] > 0


def test_script_built_on_the_device_allocates_nothing(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    code = ("import resource, sys, torch\n"
            "from torch_tpu.dryrun_script import estimate_script\n"
            "before = torch.tpu.memory_allocated()\n"
            "rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
            f"r = estimate_script({str(path)!r}, ['--width', '400000', '--build-on', 'tpu'], 'v6e-1', steps=2)\n"
            "print(r['error'], torch.tpu.memory_allocated() - before,"
            " resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss, r['hbm_per_chip_bytes'], r['fits'])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    error, device, rss_kib, hbm, fits = out[-5:]
    # 400,000 wide: 64 M parameters, 1 GiB with AdamW's state if real
    assert error == "None" and int(device) < 4096 and int(rss_kib) < 200 * 1024
    assert int(hbm) > 2**30 and fits == "True"


def test_script_command_line(tmp_path):
    path = tmp_path / "train.py"
    text = SCRIPT + "x = torch.ones(3, device='tpu')\nprint(x[x > 0])\n"
    path.write_text(text)
    run = subprocess.run([sys.executable, "-m", "torch_tpu", "dryrun", "--script", str(path), "--slice", "v5p-8",
                          "--steps", "5", "--json", "--", "--steps", "2"], capture_output=True, text=True)
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert run.returncode == 1 and result["steps_recorded"] == 2 and result["chips"] == 4
    # the script's boolean mask after its loop: no dry run knows that shape, and it says where
    assert "aten::index" in result["error"] and f"{path}:{_line(text, 'x[x > 0]')}" in result["error"]
    for key in ("step_time_s", "mfu", "hbm_per_chip_bytes", "fits", "usd_per_step"):
        assert key in result, key
