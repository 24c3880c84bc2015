"""One process per chip: the TPU launch variables torch.tpu.distributed.set_tpu_launch_env and
`python -m torch.tpu.distributed.environment` fill from the emulated slice, the chip a process
started by a launcher (LOCAL_RANK, LOCAL_WORLD_SIZE) sees, and set_device(LOCAL_RANK)."""
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from torch_tpu.distributed import environment

LAUNCH = ("TPU_", "TORCH_TPU_", "CLOUD_TPU_", "LOCAL_RANK", "LOCAL_WORLD_SIZE")


def _clean_env(extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCH)}
    env.update(extra)
    return env


@pytest.fixture
def launch():
    """Makes `extra` this process's only launch variables (nothing here touches the device, so the
    runtime's configuration, read once, does not matter); the environment is restored after."""
    saved = dict(os.environ)

    def set_env(**extra):
        os.environ.clear()
        os.environ.update({k: v for k, v in saved.items() if not k.startswith(LAUNCH)}, **extra)

    yield set_env
    os.environ.clear()
    os.environ.update(saved)


@pytest.mark.parametrize("slice_name, nproc, process_bounds", [
    ("v6e-8", 1, "1,1,1"), ("v6e-8", 2, "2,1,1"), ("v6e-8", 4, "2,2,1"), ("v6e-8", 8, "2,4,1"),
    ("v6e-4", 1, "1,1,1"), ("v6e-4", 2, "2,1,1"), ("v6e-4", 4, "2,2,1"),
])
def test_one_host(launch, slice_name, nproc, process_bounds):
    launch(TPU_ACCELERATOR_TYPE=slice_name)
    env = environment.launch_env(nproc)
    assert env == {
        "TPU_ACCELERATOR_TYPE": slice_name,
        "TPU_TOPOLOGY": {"v6e-8": "2x4", "v6e-4": "2x2"}[slice_name],
        "TPU_HOST_BOUNDS": "1,1,1",
        "TPU_CHIPS_PER_HOST_BOUNDS": {"v6e-8": "2,4,1", "v6e-4": "2,2,1"}[slice_name],
        "TPU_PROCESS_BOUNDS": process_bounds,
        "TPU_CHIPS_PER_PROCESS_BOUNDS": "1,1,1",
        "TPU_PROCESS_ADDRESSES": ",".join(f"localhost:{8476 + r}" for r in range(nproc)),
        "TPU_WORKER_ID": "0",
        "TPU_WORKER_HOSTNAMES": "localhost",
        "TPU_SKIP_MDS_QUERY": "1",
    }
    # under a launcher: the rank's own chip, port and task id as well
    launch(TPU_ACCELERATOR_TYPE=slice_name, LOCAL_RANK=str(nproc - 1), LOCAL_WORLD_SIZE=str(nproc))
    got = torch.tpu.distributed.set_tpu_launch_env()
    assert got == dict(env, TPU_VISIBLE_CHIPS=str(nproc - 1), TPU_PROCESS_PORT=str(8476 + nproc - 1),
                       CLOUD_TPU_TASK_ID=str(nproc - 1))
    assert all(os.environ[k] == v for k, v in got.items())


def test_the_variables_are_the_specs_launch_env(launch):
    launch(LOCAL_RANK="0", LOCAL_WORLD_SIZE="1")
    specs = json.loads(environment._SPECS.read_text())["launch_env"]
    assert list(torch.tpu.distributed.set_tpu_launch_env()) == [k for k in specs if k != "source"]
    assert os.environ["TPU_ACCELERATOR_TYPE"] == "v6e-1"  # the runtime's default slice, written out


@pytest.mark.parametrize("slice_name, hosts, host_bounds, process_bounds", [
    ("v5p-16", "h0,h1", "1,1,2", "2,2,2"),  # 8 chips as 2x2x2, hosts of 2x2x1
    ("v6e-16", "h0,h1", "2,1,1", "4,4,1"),  # 16 chips as 4x4, hosts of 2x4
])
def test_two_hosts(launch, slice_name, hosts, host_bounds, process_bounds):
    launch(TPU_ACCELERATOR_TYPE=slice_name, TPU_WORKER_ID="1", TPU_WORKER_HOSTNAMES=hosts, LOCAL_RANK="1",
           LOCAL_WORLD_SIZE={"v5p-16": "4", "v6e-16": "8"}[slice_name])
    env = torch.tpu.distributed.set_tpu_launch_env()
    n = int(os.environ["LOCAL_WORLD_SIZE"])
    assert env["TPU_HOST_BOUNDS"] == host_bounds and env["TPU_PROCESS_BOUNDS"] == process_bounds
    assert env["TPU_PROCESS_ADDRESSES"] == ",".join(f"{h}:{8476 + r}" for h in ("h0", "h1") for r in range(n))
    assert (env["TPU_WORKER_ID"], env["TPU_WORKER_HOSTNAMES"]) == ("1", hosts)
    assert (env["TPU_VISIBLE_CHIPS"], env["TPU_PROCESS_PORT"], env["CLOUD_TPU_TASK_ID"]) == ("1", "8477", str(n + 1))


def test_a_multi_host_slice_needs_its_hostnames(launch):
    launch(TPU_ACCELERATOR_TYPE="v5p-16", TPU_WORKER_ID="1")
    with pytest.raises(ValueError, match="TPU_WORKER_HOSTNAMES is unset: v5p-16 has 2 hosts"):
        environment.launch_env()
    launch(TPU_ACCELERATOR_TYPE="v5p-16", TPU_WORKER_HOSTNAMES="h0,h1,h2")
    with pytest.raises(ValueError, match="TPU_WORKER_HOSTNAMES='h0,h1,h2'"):
        environment.launch_env()


@pytest.mark.parametrize("slice_name, nproc, valid", [
    ("v6e-8", 3, "1, 2, 4, 8"), ("v6e-8", 16, "1, 2, 4, 8"), ("v6e-8", 0, "1, 2, 4, 8"),
    ("v6e-4", 8, "1, 2, 4"), ("v5p-8", 8, "1, 2, 4"), ("v6e-1", 2, "1"),
])
def test_counts_a_host_cannot_hold_are_refused_with_the_valid_ones(launch, slice_name, nproc, valid):
    launch(TPU_ACCELERATOR_TYPE=slice_name)
    with pytest.raises(ValueError, match=f"nproc_per_node={nproc}: .*{slice_name}.*valid counts: {valid}$"):
        torch.tpu.distributed.set_tpu_launch_env(nproc_per_node=nproc)
    assert "TPU_PROCESS_BOUNDS" not in os.environ  # nothing set


def test_the_launchers_count_and_nproc_per_node_must_agree(launch):
    launch(TPU_ACCELERATOR_TYPE="v6e-8", LOCAL_RANK="0", LOCAL_WORLD_SIZE="4")
    with pytest.raises(ValueError, match="nproc_per_node=2, but the launcher started LOCAL_WORLD_SIZE=4"):
        torch.tpu.distributed.set_tpu_launch_env(nproc_per_node=2)


def test_explicit_values_win(launch):
    launch(TPU_ACCELERATOR_TYPE="v6e-8", LOCAL_RANK="1", LOCAL_WORLD_SIZE="2", TPU_VISIBLE_CHIPS="6")
    assert torch.tpu.distributed.set_tpu_launch_env()["TPU_VISIBLE_CHIPS"] == "6"
    assert os.environ["TPU_PROCESS_PORT"] == "8477"


def test_cli_prints_export_lines_a_shell_evaluates(launch):
    cmd = 'eval "$(python -m torch.tpu.distributed.environment --nproc_per_node=4)"; env'
    env = _clean_env({"TPU_ACCELERATOR_TYPE": "v6e-8", "PATH": os.path.dirname(sys.executable) + ":" + os.environ["PATH"]})
    runs = [subprocess.Popen(["bash", "-c", cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env),
            subprocess.Popen([sys.executable, "-m", "torch.tpu.distributed.environment", "--nproc_per_node=3"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)]
    out, err = runs[0].communicate(timeout=120)
    assert runs[0].returncode == 0 and "Warning" not in err, err
    exported = dict(line.split("=", 1) for line in out.splitlines() if line.startswith(LAUNCH))
    launch(TPU_ACCELERATOR_TYPE="v6e-8")
    assert exported == environment.launch_env(4)  # job-wide only: the per-rank ones come from LOCAL_RANK
    assert not set(environment.PER_RANK) & set(exported)
    out, err = runs[1].communicate(timeout=120)
    assert runs[1].returncode == 2 and "valid counts: 1, 2, 4, 8" in err, err


PROBE = """
import json, os, torch
try:
    if os.environ.get("SET_LAUNCH_ENV"):
        torch.tpu.distributed.set_tpu_launch_env()
    total = torch.ones(3, device="tpu").sum().item()  # the first use: a bad configuration raises here
    rank = int(os.environ["LOCAL_RANK"])
    torch.tpu.set_device(rank)  # what DeviceMesh and most scripts call: the rank's own chip
    bad = None
    try:
        torch.tpu.set_device(rank + 1)
    except ValueError as e:
        bad = str(e)
    print(json.dumps({"count": torch.tpu.device_count(), "current": torch.tpu.current_device(),
                      "chip": torch.tpu.get_device_properties(0).global_index,
                      "sum": total, "bad": bad}))
except Exception as e:
    print(json.dumps({"error": [type(e).__name__, str(e)]}))
"""


LAUNCHED = [  # (environment, the global chip its tpu:0 is, or the configuration error's text)
    ({"TPU_ACCELERATOR_TYPE": "v6e-8", "LOCAL_RANK": "5", "LOCAL_WORLD_SIZE": "8"}, 5),
    ({"TPU_ACCELERATOR_TYPE": "v6e-8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}, 1),
    ({"TPU_ACCELERATOR_TYPE": "v5p-16", "TPU_WORKER_ID": "1", "LOCAL_RANK": "3", "LOCAL_WORLD_SIZE": "4"}, 7),
    ({"TPU_ACCELERATOR_TYPE": "v6e-8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "TPU_VISIBLE_CHIPS": "6"}, 6),
    ({"TPU_ACCELERATOR_TYPE": "v6e-4", "LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "4", "SET_LAUNCH_ENV": "1"}, 2),
    ({"TPU_ACCELERATOR_TYPE": "v6e-4", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "8"},
     "LOCAL_WORLD_SIZE='8': the launcher started 8 processes on this host, but a host of v6e-4 has 4 chips"),
    ({"TPU_ACCELERATOR_TYPE": "v6e-4", "LOCAL_RANK": "one", "LOCAL_WORLD_SIZE": "2"}, "LOCAL_RANK='one'"),
]


@pytest.mark.once
def test_a_launched_process_sees_its_own_chip_as_tpu0():
    runs = [(extra, chip, subprocess.Popen([sys.executable, "-c", PROBE], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                           text=True, env=_clean_env(extra))) for extra, chip in LAUNCHED]
    for extra, chip, proc in runs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, (extra, err[-2000:])
        got = json.loads(out.strip().splitlines()[-1])
        if isinstance(chip, str):  # a configuration error, raised from the first use of the device
            assert got["error"][0] == "ValueError" and chip in got["error"][1], (extra, got)
            continue
        assert got.get("error") is None, (extra, got)
        assert (got["count"], got["current"], got["chip"], got["sum"]) == (1, 0, chip, 3.0), (extra, got)
        assert "invalid device index" in got["bad"], (extra, got)  # any other index still raises


SCRIPT = """
import json, os, pathlib, sys, torch
env = torch.tpu.distributed.set_tpu_launch_env()
torch.tpu.set_device(int(os.environ["LOCAL_RANK"]))
pathlib.Path(sys.argv[1], os.environ["LOCAL_RANK"]).write_text(json.dumps({
    "count": torch.tpu.device_count(), "chip": torch.tpu.get_device_properties(0).global_index,
    "visible": env["TPU_VISIBLE_CHIPS"], "port": env["TPU_PROCESS_PORT"], "sum": torch.ones(2, device="tpu").sum().item()}))
"""


def test_torchrun_two_ranks(tmp_path):
    script = tmp_path / "rank.py"
    script.write_text(textwrap.dedent(SCRIPT))
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--standalone",
                          str(script), str(tmp_path)], capture_output=True, text=True, timeout=120,
                         env=_clean_env({"TPU_ACCELERATOR_TYPE": "v6e-4", "OMP_NUM_THREADS": "1"}))
    assert out.returncode == 0, out.stderr[-3000:]
    ranks = [json.loads((tmp_path / str(r)).read_text()) for r in range(2)]
    assert ranks == [{"count": 1, "chip": r, "visible": str(r), "port": str(8476 + r), "sum": 2.0} for r in range(2)]
