"""Ray (issue #18 item 4): demo/ray_tpu.py on a local one-node Ray cluster advertising the 4 chips of
an emulated v6e-4 as the resource "TPU": (a) 4 actors of {"TPU": 1}, each seeing its own chip as
tpu:0 through the TPU_VISIBLE_CHIPS Ray sets, run SGD steps that match CPU; (b) a Ray Train
TorchTrainer, 4 workers of one chip each, DDP over tpu_dist, trains to the parameters
single-process float64 training on CPU reaches.

The demo runs in its own process (its Ray driver, raylet and workers are not this pytest
process's), with a 100 MB object store and the dashboard off."""
import json
import os
import signal
import subprocess
import sys

import pytest

pytest.importorskip("ray")
pytest.importorskip("ray.train.torch")  # ray[train]: pyarrow, pandas, tensorboardX

pytestmark = [pytest.mark.once, pytest.mark.slow]

DEMO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "demo", "ray_tpu.py")
LAUNCH = ("TPU_", "TORCH_TPU_", "CLOUD_TPU_", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "RANK", "WORLD_SIZE", "MASTER_")


def test_actors_and_torchtrainer_on_an_emulated_v6e_4(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCH)}
    env.update(TPU_ACCELERATOR_TYPE="v6e-4", TPU_NUM_THREADS="1", OMP_NUM_THREADS="1",
               # Ray's memory monitor kills workers when the whole machine is short of memory, whoever uses it
               RAY_memory_monitor_refresh_ms="0", RAY_DEDUP_LOGS="0")
    cmd = [sys.executable, DEMO, "--num-cpus", "4", "--object-store-mb", "100", "--steps", "3",
           "--storage-path", str(tmp_path), "--json"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=420)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the demo's session: its Ray processes too
        out, err = proc.communicate()
        pytest.fail(f"timed out:\n{out[-3000:]}\n{err[-3000:]}")
    lines = [line for line in out.splitlines() if line.startswith("{")]
    assert proc.returncode == 0 and lines, f"exit {proc.returncode}:\n{out[-4000:]}\n{err[-6000:]}"
    report = json.loads(lines[-1])
    assert report["slice"]["pod_type"] == "v6e-4" and report["slice"]["chips"] == 4, report["slice"]

    # (a) each actor: Ray's chip id, TPU_VISIBLE_CHIPS and torch_tpu's tpu:0 are the same chip, all distinct
    pool = report["pool"]
    workers = pool["workers"]
    assert sorted(w["chip"] for w in workers) == [0, 1, 2, 3], workers
    for w in workers:
        assert w["device_count"] == 1 and [w["env"]["TPU_VISIBLE_CHIPS"]] == w["ray_tpu_ids"] == [str(w["chip"])], w
    assert len({w["pid"] for w in workers}) == 4
    assert sorted(r["seed"] for r in pool["results"]) == list(range(8))
    assert {r["chip"] for r in pool["results"]} <= {0, 1, 2, 3} and all(r["device"] == "tpu:0" for r in pool["results"])
    assert pool["max_error"] <= 1e-5 and pool["ok"], pool

    # (b) the TorchTrainer: 4 ranks on 4 chips, tpu_dist carrying DDP's all_reduces, CPU's parameters
    trainer = report["trainer"]
    m = trainer["metrics"]
    assert m["backend"] == "tpu_dist" and m["device"] == "tpu:0", m  # Ray's default for use_tpu
    assert sorted(m["chips"]) == [0, 1, 2, 3] and m["env"]["WORLD_SIZE"] == "4", m
    assert m["tpu_dist_all_reduces"] >= 3 * 2, m  # per step: DDP's gradient bucket and the loss
    assert len(m["losses"]) == 3
    assert trainer["param_error"] <= 1e-5 and trainer["loss_error"] <= 2e-5 and trainer["ok"], trainer
