"""A rank of a tpu_dist job that fails on purpose (tests/test_tpu_dist.py starts four of these
without torchrun, whose agent would stop the others itself). Prints one JSON line per
surviving rank: the exception its collective (or the first use of its result) raised and how
long that took.

Usage: python tests/dist_faults.py kill|silent|mismatch|sizes (RANK, WORLD_SIZE, MASTER_* set)."""
import datetime
import json
import os
import signal
import sys
import threading
import time

import torch
import torch.distributed as dist

SCENARIO = sys.argv[1]
RANK = int(os.environ["RANK"])
TIMEOUT_S = 3 if SCENARIO == "silent" else 600

dist.init_process_group("tpu_dist", timeout=datetime.timedelta(seconds=TIMEOUT_S))
x = torch.ones(16 << 20, device="tpu")  # 64 MiB: an all_reduce of many rounds
dist.all_reduce(x[:4])

start = time.monotonic()
try:
    if SCENARIO == "kill" and RANK == 3:
        threading.Timer(0.05, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()
        for _ in range(100):
            dist.all_reduce(x)
    elif SCENARIO == "silent" and RANK == 1:
        time.sleep(2 * TIMEOUT_S)  # never calls: the others time out
        sys.exit(0)
    elif SCENARIO == "mismatch" and RANK == 2:
        dist.broadcast(x[:8], src=0)
    elif SCENARIO == "sizes" and RANK >= 2:  # as two hosts: the second host's ranks agree with each other
        dist.all_reduce(x[:8])
    else:
        for _ in range(100):
            dist.all_reduce(x)
    x[:1].item()  # collectives are asynchronous (as NCCL's): a failure also surfaces at the next use
    error = None
except Exception as e:  # noqa: BLE001 - reported to the test
    error = f"{type(e).__name__}: {e}"
print(json.dumps({"rank": RANK, "error": error, "elapsed": time.monotonic() - start}), flush=True)
