"""Checkpoints: torch.save/torch.load across cpu and chips (map_location, weights_only),
safetensors, and a training run resumed in a new process that must match an uninterrupted
one bit for bit. Run as a script, this file is that training run (see `main`)."""
import os
import pathlib
import subprocess
import sys

import pytest
from test_serialization import roundtrip
from together import run_together
import torch

TESTS = pathlib.Path(__file__).resolve().parent


def run_python(*runs, tpu_env=None):
    """Runs python in new processes, started together, that import the installed torch_tpu (and these
    tests' helpers); one list of arguments per process. Returns their outputs."""
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    env.update(tpu_env or {})
    done = run_together([(args, env) for args in runs])
    for d in done:
        assert d.returncode == 0, d.stderr[-3000:]
    return [d.stdout for d in done]


# ---------------------------------------------------------------- map_location across chips
TWO_CHIPS = r"""
import io, torch
def roundtrip(obj, **kw):
    buf = io.BytesIO(); torch.save(obj, buf); buf.seek(0); return torch.load(buf, **kw)
ref = torch.arange(24, dtype=torch.float32).reshape(4, 6)
on1 = {"w": ref.to("tpu:1"), "t": ref.to("tpu:1").t(), "i": torch.arange(5).to("tpu:1")}
cases = [
    (on1, {}, "tpu:1"), (on1, {"weights_only": True}, "tpu:1"),
    (on1, {"map_location": "tpu:0"}, "tpu:0"), (on1, {"map_location": {"tpu:1": "tpu:0"}}, "tpu:0"),
    (on1, {"map_location": "cpu", "weights_only": True}, "cpu"),
    ({k: v.cpu() for k, v in on1.items()}, {"map_location": torch.device("tpu", 1)}, "tpu:1"),
    (on1, {"map_location": lambda storage, loc: storage}, "cpu"),
]
for obj, kw, where in cases:
    got = roundtrip(obj, **kw)
    for k, v in got.items():
        assert str(v.device) == where, (kw, k, v.device)
        assert torch.equal(v.cpu(), obj[k].cpu()), (kw, k)
assert got["t"].stride() == (1, 6)
try:
    roundtrip(on1, map_location="tpu:2")
except RuntimeError as e:
    print("error:", e)
"""


def test_map_location_between_cpu_and_two_chips():
    out, = run_python(["-c", TWO_CHIPS], tpu_env={"TPU_ACCELERATOR_TYPE": "v6e-4", "TPU_VISIBLE_CHIPS": "0,1"})
    # Like CUDA: loading onto a chip the slice does not have names the chip count.
    assert "error:" in out and "device 2" in out


def test_weights_only_load_of_model_optimizer_and_rng_state():
    torch.manual_seed(0)
    m = torch.nn.Linear(5, 3).to("tpu")
    opt = torch.optim.AdamW(m.parameters(), lr=0.01)
    m(torch.randn(4, 5, device="tpu")).square().sum().backward()
    opt.step()
    ck = {"model": m.state_dict(), "opt": opt.state_dict(), "rng_tpu": torch.tpu.get_rng_state(),
          "rng_cpu": torch.get_rng_state(), "step": 1}
    got = roundtrip(ck, weights_only=True)
    assert got["model"]["weight"].device.type == "tpu"
    assert torch.equal(got["model"]["weight"].cpu(), m.weight.detach().cpu())
    state = got["opt"]["state"][0]
    assert state["exp_avg"].device.type == "tpu" and state["exp_avg_sq"].device.type == "tpu"
    assert torch.equal(state["exp_avg_sq"].cpu(), opt.state[m.weight]["exp_avg_sq"].cpu())
    assert torch.equal(got["rng_tpu"], torch.tpu.get_rng_state())
    # The loaded optimizer state drives the next step exactly as the original does.
    m2 = torch.nn.Linear(5, 3).to("tpu")
    m2.load_state_dict(got["model"])
    opt2 = torch.optim.AdamW(m2.parameters(), lr=0.01)
    opt2.load_state_dict(got["opt"])
    x = torch.randn(4, 5, device="tpu")
    for model, o in ((m, opt), (m2, opt2)):
        o.zero_grad()
        model(x).square().sum().backward()
        o.step()
    assert torch.equal(m2.weight.detach().cpu(), m.weight.detach().cpu())


def test_safetensors_save_and_load_on_tpu(tmp_path):
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    torch.manual_seed(0)
    ref = {"w": torch.randn(3, 4), "b": torch.randn(4).to(torch.bfloat16), "i": torch.arange(6)}
    path = tmp_path / "t.safetensors"
    save_file({k: v.to("tpu") for k, v in ref.items()}, path)
    for device, where in (("tpu", "tpu:0"), ("tpu:0", "tpu:0"), ("cpu", "cpu")):
        got = load_file(path, device=device)
        assert set(got) == set(ref)
        for k, v in got.items():
            assert str(v.device) == where and v.dtype == ref[k].dtype and torch.equal(v.cpu(), ref[k])
    with safe_open(path, framework="pt", device="tpu") as f:
        assert str(f.get_tensor("w").device) == "tpu:0"
        part = f.get_slice("w")[1:, :2]
        assert str(part.device) == "tpu:0" and torch.equal(part.cpu(), ref["w"][1:, :2])


def test_safetensors_model_state_dict_roundtrip(tmp_path):
    from safetensors.torch import load_model, save_model

    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 2)).to("tpu")
    save_model(m, tmp_path / "m.safetensors")
    m2 = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 2)).to("tpu")
    load_model(m2, tmp_path / "m.safetensors", device="tpu")
    for a, b in zip(m.parameters(), m2.parameters()):
        assert b.device.type == "tpu" and torch.equal(a.detach().cpu(), b.detach().cpu())


@pytest.mark.once
@pytest.mark.parametrize("first", ["safetensors.torch", "accelerate", "transformers", "diffusers"])
def test_a_library_imported_before_torch_loads_torch_tpu(first, tmp_path):
    """`import safetensors.torch` as a script's first line imports torch (and so torch_tpu) while
    it is itself half-imported: that once failed the whole import."""
    pytest.importorskip(first)
    code = (f"import {first}, safetensors.torch, torch\n"
            f"safetensors.torch.save_file({{'w': torch.arange(6.0)}}, {str(tmp_path / 'w.st')!r})\n"
            f"print(safetensors.torch.load_file({str(tmp_path / 'w.st')!r}, device='tpu')['w'].device)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "tpu:0", r.stderr[-3000:]


@pytest.mark.once
def test_an_availability_check_before_the_import_keeps_the_hook():
    """transformers and diffusers ask importlib.util.find_spec("safetensors") before importing it:
    the spec they drop must not use up the hook, or safe_open(device="tpu") stays refused."""
    code = ("import importlib.util, torch\n"
            "importlib.util.find_spec('safetensors')\n"
            "import safetensors\n"
            "print(safetensors.safe_open.__module__)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "torch_tpu._safetensors", r.stdout + r.stderr[-3000:]


# ---------------------------------------------------------------- resume in a new process
def build():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Dropout(0.3),
        torch.nn.Linear(32, 32), torch.nn.Dropout(0.3), torch.nn.Linear(32, 4)).to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    torch.tpu.manual_seed(1)
    return model, opt


def train(model, opt, steps):
    """Each step draws its batch from both generators: the batch order from the CPU one, the
    inputs and the dropout masks from the tpu one."""
    model.train()
    for _ in range(steps):
        rows = torch.randperm(64)[:8]
        x = torch.randn(64, 16, device="tpu")[rows.to("tpu")]
        loss = torch.nn.functional.cross_entropy(model(x), (rows % 4).to("tpu"))
        opt.zero_grad()
        loss.backward()
        opt.step()


def main(phase, out, checkpoint=None):
    """phase: "first" (5 steps), "uninterrupted" (10 steps), "resume" (5 steps from
    `checkpoint`) or "resume_cpu_rng_only" (the same, leaving the tpu generator as seeded)."""
    model, opt = build()
    if checkpoint:
        ck = torch.load(checkpoint, weights_only=True)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        torch.set_rng_state(ck["rng_cpu"])
        if phase == "resume":
            torch.tpu.set_rng_state(ck["rng_tpu"])
    train(model, opt, 10 if phase == "uninterrupted" else 5)
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "rng_cpu": torch.get_rng_state(),
                "rng_tpu": torch.tpu.get_rng_state()}, out)


@pytest.mark.once
def test_resume_in_new_process_matches_uninterrupted_run(tmp_path):
    ck, whole = tmp_path / "step5.pt", tmp_path / "step10.pt"
    resumed, stale = tmp_path / "resumed.pt", tmp_path / "stale.pt"
    run_python([__file__, "first", str(ck)], [__file__, "uninterrupted", str(whole)])
    run_python([__file__, "resume", str(resumed), str(ck)], [__file__, "resume_cpu_rng_only", str(stale), str(ck)])
    first, a, b, c = (torch.load(p, map_location="cpu") for p in (ck, resumed, whole, stale))
    assert not torch.equal(first["model"]["0.weight"], a["model"]["0.weight"])
    for k in b["model"]:
        assert torch.equal(a["model"][k], b["model"][k]), k
    for i, state in b["opt"]["state"].items():
        for k in state:
            assert torch.equal(a["opt"]["state"][i][k], state[k]), (i, k)
    assert torch.equal(a["rng_tpu"], b["rng_tpu"]) and torch.equal(a["rng_cpu"], b["rng_cpu"])
    # The tpu generator's state matters: without it the resumed run departs from the whole one.
    assert not torch.equal(c["model"]["0.weight"], b["model"]["0.weight"])


if __name__ == "__main__":
    main(*sys.argv[1:])
