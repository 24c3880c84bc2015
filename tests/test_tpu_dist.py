"""tpu_dist, one process per chip: torchrun jobs on an emulated v6e-4 run every collective against
CPU references, DDP/FSDP2/tensor-parallel/MPMD training against single-process training, and a
torch.distributed.checkpoint save from 4 ranks loaded into 2; failing ranks (killed, silent,
calling the wrong collective) make every other rank raise, naming the collective and the rank,
and leave no shared memory behind."""
import glob
import json
import os
import socket
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def _env(**extra):
    env = dict(os.environ, **{"TPU_ACCELERATOR_TYPE": "v6e-4", "OMP_NUM_THREADS": "1", **extra})
    env.pop("TPU_VISIBLE_CHIPS", None)
    return env


def _segments():
    return set(glob.glob("/dev/shm/tpu_dist.*"))


def torchrun(nproc, *args, timeout=300):
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}", "--standalone", *args]
    r = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=timeout, cwd=HERE)
    assert r.returncode == 0, f"{' '.join(args)} failed:\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}"
    return r.stdout


def test_collectives_and_training_on_four_ranks():
    before = _segments()
    out = torchrun(4, "dist_checks.py")
    for section in ("collectives", "metrics", "ddp", "fsdp2", "tp", "mpmd"):
        assert f"ok {section}" in out, out
    assert _segments() <= before, "shared memory left behind"


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.once
def test_two_hosts_every_collective_and_training_through_gloo():
    """Two emulated hosts of a v5p-16 (two torchrun launches on this machine, TPU_WORKER_ID 0 and 1),
    two ranks each: every collective (counted by torch.tpu.metrics) and the DDP/FSDP2/TP/MPMD
    training cross the hosts, hierarchically (shared memory within a host, Gloo between them)."""
    before, port = _segments(), _free_port()
    hosts = [subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nnodes=2", f"--node_rank={i}",
                               "--nproc_per_node=2", "--master_addr=127.0.0.1", f"--master_port={port}",
                               "dist_checks.py", "collectives", "metrics", "ddp", "fsdp2", "tp", "mpmd"],
                              env=_env(TPU_ACCELERATOR_TYPE="v5p-16", TPU_WORKER_ID=str(i),
                                       TPU_WORKER_HOSTNAMES="localhost,localhost"),
                              cwd=HERE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
    outs = [h.communicate(timeout=400) for h in hosts]
    for h, (out, err) in zip(hosts, outs):
        assert h.returncode == 0, f"{out[-3000:]}\n{err[-6000:]}"
    for section in ("collectives", "metrics", "ddp", "fsdp2", "tp", "mpmd"):
        assert f"ok {section}" in outs[0][0], outs[0][0]
    assert _segments() <= before, "shared memory left behind"


@pytest.mark.once
def test_hosts_of_uneven_sizes_with_interleaved_ranks():
    """Ranks 0 and 2 on one emulated host, rank 1 on another: all_reduce and broadcast still run
    hierarchically (a root that is not its host's first rank included), all_gather and
    reduce_scatter through every rank's Gloo group; every collective, DDP, FSDP2 and MPMD pass."""
    before, port = _segments(), _free_port()
    host_of, local_rank = [0, 1, 0], [0, 0, 1]
    procs = [subprocess.Popen([sys.executable, "dist_checks.py", "collectives", "metrics", "ddp", "fsdp2", "mpmd"],
                              env=_env(RANK=str(r), WORLD_SIZE="3", LOCAL_RANK=str(local_rank[r]),
                                       LOCAL_WORLD_SIZE=str(host_of.count(host_of[r])), MASTER_ADDR="127.0.0.1",
                                       MASTER_PORT=str(port), TPU_ACCELERATOR_TYPE="v5p-16",
                                       TPU_WORKER_ID=str(host_of[r]), TPU_WORKER_HOSTNAMES="localhost,localhost"),
                              cwd=HERE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(3)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, f"{out[-3000:]}\n{err[-6000:]}"
    for section in ("collectives", "metrics", "ddp", "fsdp2", "mpmd"):
        assert f"ok {section}" in outs[0][0], outs[0][0]
    assert _segments() <= before, "shared memory left behind"


@pytest.mark.once
def test_hosts_calling_different_collectives_raise_on_every_rank():
    """Two emulated hosts whose ranks agree within each host but not between them (all_reduce of
    64 MiB on one, of 32 bytes on the other): the hosts' first ranks compare the calls before any
    data moves, and every rank raises at once, naming both calls, instead of hanging in Gloo."""
    before = _segments()
    for r, (code, report, err) in _run_faulty("sizes", hosts=2).items():
        assert code == 0 and report, f"rank {r} exit {code}:\n{err}"
        error = report["error"]
        assert error and "mismatched collectives across hosts" in error, f"rank {r}: {error}"
        assert "16777216 elements" in error and "8 elements" in error and "all_reduce #2" in error, error
        assert report["elapsed"] < 5, f"rank {r} raised after {report['elapsed']:.1f} s"
    assert _segments() <= before, "shared memory left behind"


def test_ranks_of_one_host_share_memory_and_worker_ids_tell_hosts_apart(monkeypatch):
    from torch_tpu.distributed.backend import host_id

    monkeypatch.setenv("TPU_WORKER_ID", "0")
    here = host_id()
    assert host_id() == here
    monkeypatch.setenv("TPU_WORKER_ID", "1")
    assert host_id() != here


@pytest.mark.once
@pytest.mark.slow
def test_checkpoint_saved_by_four_ranks_loads_into_two(tmp_path):
    torchrun(4, "dist_dcp.py", "save", str(tmp_path))
    assert len(glob.glob(str(tmp_path / "*.distcp"))) == 4
    out = torchrun(2, "dist_dcp.py", "load", str(tmp_path))
    assert "ok loaded" in out, out


@pytest.mark.slow
def test_llama_debug_model_with_fsdp2_and_tensor_parallel_matches_one_process():
    """demo/llama_fsdp_tp.py --check: mesh dp=2 x tp=2; losses against float64 single-process training."""
    r = subprocess.run([sys.executable, os.path.join(HERE, "..", "demo", "llama_fsdp_tp.py"), "--steps", "3", "--check"],
                       env=_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "ok: FSDP2 + TP matches" in r.stdout, f"{r.stdout[-3000:]}\n{r.stderr[-4000:]}"


def _run_faulty(scenario, hosts):
    """Four ranks on one host, or two emulated hosts (TPU_WORKER_ID) of two ranks each."""
    port, per_host = _free_port(), 4 // hosts
    where = {} if hosts == 1 else dict(TPU_ACCELERATOR_TYPE="v5p-16", TPU_WORKER_HOSTNAMES="localhost,localhost")
    procs = [subprocess.Popen([sys.executable, os.path.join(HERE, "dist_faults.py"), scenario],
                              env=_env(RANK=str(r), WORLD_SIZE="4", LOCAL_RANK=str(r % per_host),
                                       LOCAL_WORLD_SIZE=str(per_host), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                                       TPU_WORKER_ID=str(r // per_host), **where),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(4)]
    results = {}
    for r, p in enumerate(procs):
        out, err = p.communicate(timeout=120)
        lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        results[r] = (p.returncode, lines[0] if lines else None, err[-2000:])
    return results


@pytest.mark.once
@pytest.mark.parametrize("hosts", [1, 2])  # 2: the hierarchical path; the failure crosses hosts through the store
@pytest.mark.parametrize("scenario, culprit, wait_s", [
    ("kill", 3, (0, 5)),        # SIGKILL inside a 64 MiB all_reduce, with a 10-minute timeout
    ("silent", 1, (2.9, 10)),   # stops calling: the others raise at the 3 s timeout
    ("mismatch", 2, (0, 5)),    # broadcast while the others all_reduce
])
def test_a_failing_rank_makes_every_other_rank_raise(scenario, culprit, wait_s, hosts):
    before = _segments()
    results = _run_faulty(scenario, hosts)
    for r, (code, report, err) in results.items():
        if r == culprit and scenario != "mismatch":
            continue
        assert code == 0 and report, f"rank {r} exit {code}:\n{err}"
        error, elapsed = report["error"], report["elapsed"]
        # DistBackendError from a later collective call; RuntimeError from the next use of the result
        assert error and error.split(":")[0] in ("DistBackendError", "RuntimeError"), f"rank {r}: {error}"
        # the killed rank may finish a call or two first: which one it dies in varies
        collective = "all_reduce #" if scenario == "kill" else "#2"
        assert f"rank {culprit}" in error and collective in error, f"names the rank and the collective: {error}"
        assert wait_s[0] <= elapsed < wait_s[1], f"rank {r} raised after {elapsed:.1f} s: {error}"
    if scenario == "kill":
        assert results[culprit][0] == -9
    assert _segments() <= before, "shared memory left behind"
