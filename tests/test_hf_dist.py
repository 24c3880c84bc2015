"""Hugging Face under torchrun and torch.compile: Trainer with 4 ranks on tpu_dist (an emulated
v6e-4), as DDP and as FSDP2 through accelerate, trains the parameters a single CPU process trains
on the same global batch; generate() with a static KV cache runs its decoding steps through
torch.compile(backend="tpu") and gives CPU eager's greedy tokens, with the recompiles counted."""
import os
import pathlib
import subprocess
import sys

import pytest
import torch

import torch_tpu

pytestmark = pytest.mark.once
transformers = pytest.importorskip("transformers")
HERE = pathlib.Path(__file__).resolve().parent
import hf_dist  # noqa: E402  (tests/, on sys.path: conftest.py)
import hf_trainer  # noqa: E402  (demo/, put on sys.path by hf_dist)
from test_tpu_dist import _segments  # noqa: E402


def _left_behind(before):
    """tpu_dist's shared memory (tpu_dist.<creator pid>.<random>) that appeared and whose creator is
    gone: other jobs on the host may hold their own meanwhile."""
    left = []
    for path in _segments() - before:
        try:
            os.kill(int(path.split(".")[1]), 0)
        except ProcessLookupError:
            left.append(path)
        except (PermissionError, ValueError):
            pass
    return left


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """tests/hf_dist.py under torchrun, 4 ranks: Trainer with DDP, then with FSDP2."""
    out = tmp_path_factory.mktemp("hf_dist")
    env = dict(os.environ, TPU_ACCELERATOR_TYPE="v6e-4", OMP_NUM_THREADS="1")
    env.pop("TPU_VISIBLE_CHIPS", None)
    before = _segments()
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={hf_dist.WORLD}", "--standalone",
                        str(HERE / "hf_dist.py"), str(out), "ddp", "fsdp2"],
                       env=env, capture_output=True, text=True, timeout=300, cwd=HERE)
    assert r.returncode == 0, f"{r.stdout[-3000:]}\n{r.stderr[-6000:]}"
    assert not _left_behind(before), "shared memory left behind"
    return {mode: torch.load(out / f"{mode}.pt") for mode in ("ddp", "fsdp2")}


@pytest.fixture(scope="module")
def reference():
    transformers.logging.set_verbosity_error()
    return hf_dist.train("cpu")  # this process: no launcher, so one process on the CPU


@pytest.mark.once
@pytest.mark.slow
@pytest.mark.parametrize("mode, kind, wrapper", [("ddp", "MULTI_GPU", "DistributedDataParallel"),
                                                  ("fsdp2", "FSDP", "FSDPLlamaForCausalLM")])
def test_trainer_on_four_ranks_trains_what_one_cpu_process_trains(trained, reference, mode, kind, wrapper):
    got = trained[mode]
    # accelerate chose by itself: the rank's chip, its multi-device type, tpu_dist; DDP / fully_shard
    assert (got["device"], got["args_device"], got["backend"]) == ("tpu:0", "tpu:0", "tpu_dist")
    assert (got["distributed_type"], got["wrapper"], got["world_size"]) == (kind, wrapper, hf_dist.WORLD)
    assert got["parallel_mode"] == "ParallelMode.DISTRIBUTED" and got["fallback_ops"] == {}
    assert reference["device"] == "cpu" and reference["distributed_type"] == "NO"
    assert len(got["logged"]) == hf_dist.STEPS
    torch.testing.assert_close(got["logged"], reference["logged"], rtol=1e-5, atol=1e-6)  # losses, gradient norms
    torch.testing.assert_close(got["eval_loss"], reference["eval_loss"], rtol=1e-5, atol=1e-6)
    initial = dict(hf_trainer.tiny_llama().named_parameters())
    assert got["params"].keys() == reference["params"].keys() == initial.keys()
    for name, want in reference["params"].items():
        torch.testing.assert_close(got["params"][name], want, rtol=1e-5, atol=1e-6, msg=name)
    moved = min((reference["params"][n] - p.detach()).abs().max().item() for n, p in initial.items())
    assert moved > 50e-6, "training moved every parameter tensor further than the tolerance"


# ---------------------------------------------------------------- generate, static cache, torch.compile
from test_hf import saved  # noqa: E402,F401  (the saved tiny Llama fixture)


def _greedy_on_two_prompt_lengths(model, cpu_model, **kwargs):
    for n in (6, 9):
        prompt = torch.randint(1, hf_trainer.VOCAB, (2, n), generator=torch.Generator().manual_seed(n))
        got = model.generate(prompt.to("tpu"), max_new_tokens=10, do_sample=False, cache_implementation="static", **kwargs)
        want = cpu_model.generate(prompt, max_new_tokens=10, do_sample=False)  # CPU eager, dynamic cache
        assert got.device.type == "tpu" and torch.equal(got.cpu(), want), n


@pytest.mark.parametrize("how", ["default", "fixed_cache_len"])
def test_generate_with_a_static_cache_compiles_with_backend_tpu_and_matches_cpu_eager(saved, how):
    """transformers compiles the decoding step itself when the cache is static: on tpu with
    torch_tpu's backend ("tpu", static shapes: CompileConfig(backend="tpu", dynamic=False)). The
    cache holds prompt + max_new_tokens - 1 positions, so a longer prompt recompiles once (the
    attention mask's length); max_cache_len sizes it for both: one graph, no recompile."""
    path, cpu_model = saved
    transformers.logging.set_verbosity_error()
    torch._dynamo.reset()
    torch_tpu.metrics.reset()
    model = transformers.AutoModelForCausalLM.from_pretrained(path, device_map="tpu").eval()
    kwargs = {} if how == "default" else {
        "max_cache_len": 18,  # the longer prompt's: the graph the default sizing compiled second
        "compile_config": transformers.CompileConfig(backend="tpu", fullgraph=True, dynamic=False, mode="default")}
    with torch.tpu.precision("highest"):
        _greedy_on_two_prompt_lengths(model, cpu_model, **kwargs)
    counters = torch_tpu.metrics.compile_counters()
    assert counters["graph_breaks"] == 0 and torch_tpu.metrics.fallback_ops() == {}
    if how == "default":
        assert (counters["graphs_compiled"], counters["recompiles"]) == (2, 1), counters
        (r,) = torch_tpu.metrics.recompiles()
        assert (r.input, r.dim, r.old, r.new) == ("L['kwargs']['attention_mask']", 3, 15, 18)
    else:
        assert (counters["graphs_compiled"], counters["recompiles"]) == (1, 0), counters
