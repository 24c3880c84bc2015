"""Several Python threads driving the device at once: on one chip and on several, on their own
streams and the default one, handing results over with events. Every result equals the same
work done by one thread, and the memory statistics come back to where they started once the
threads have joined and their tensors are gone."""
import json
import os
import subprocess
import sys

SCRIPT = r"""
import json, threading, torch

def work(seed, device, stream=None):
    g = torch.Generator().manual_seed(seed)
    a, b = torch.randn(96, 80, generator=g), torch.randn(80, 64, generator=g)
    ctx = torch.tpu.stream(stream) if stream is not None else torch.tpu.device(device)
    with torch.tpu.device(device), ctx:
        x, y = a.to(device), b.to(device)
        for _ in range(20):
            x = torch.softmax(x @ y @ y.t() / 8, dim=-1) + x
        return x.sum(0), x

def reference(seeds, device):
    return [work(s, device)[0].cpu() for s in seeds]

def run_threads(jobs):
    out, errors = {}, []
    def body(key, fn):
        try:
            out[key] = fn()
        except Exception as e:  # the assertion below names it
            errors.append(repr(e))
    ts = [threading.Thread(target=body, args=(k, f)) for k, f in jobs]
    [t.start() for t in ts]
    [t.join() for t in ts]
    return out, errors

result = {}
chips = torch.tpu.device_count()
torch.tpu.synchronize()
before = [torch.tpu.memory_allocated(d) for d in range(chips)]
ref = reference(range(8), "tpu:0")

# eight threads on one chip: four on their own streams, four on the default stream
streams = [torch.tpu.Stream(device=0) for _ in range(4)]
jobs = [(s, (lambda s=s: work(s, "tpu:0", streams[s] if s < 4 else None)[0])) for s in range(8)]
out, errors = run_threads(jobs)
torch.tpu.synchronize()
result["one_chip_errors"] = errors
result["one_chip_equal"] = all(torch.equal(out[s].cpu(), ref[s]) for s in range(8))

# one thread per chip
jobs = [(d, (lambda d=d: work(d, f"tpu:{d}")[0])) for d in range(chips)]
out, errors = run_threads(jobs)
for d in range(chips):
    torch.tpu.synchronize(d)
result["chips_errors"] = errors
result["chips_equal"] = all(torch.equal(out[d].cpu(), work(d, "tpu:0")[0].cpu()) for d in range(chips))

# a producer thread records an event; consumers on other streams wait for it, with no host sync
produced, ready = {}, threading.Event()
def producer():
    s = torch.tpu.Stream(device=0)
    with torch.tpu.stream(s):
        _, x = work(100, "tpu:0")
        ev = torch.tpu.Event()
        ev.record(s)
    produced["x"], produced["event"] = x, ev
    ready.set()
def consumer(i):
    ready.wait()
    s = torch.tpu.Stream(device=0)
    s.wait_event(produced["event"])
    with torch.tpu.stream(s):
        return (produced["x"] * (i + 1)).sum()
jobs = [("producer", producer)] + [(i, (lambda i=i: consumer(i))) for i in range(4)]
out, errors = run_threads(jobs)
torch.tpu.synchronize()
want = work(100, "tpu:0")[1]  # the same work by this thread alone, on the default stream
result["events_errors"] = errors
result["events_equal"] = all(torch.equal(out[i].cpu(), (want * (i + 1)).sum().cpu()) for i in range(4))

del out, produced, jobs, want
torch.tpu.synchronize()
for d in range(chips):
    torch.tpu.synchronize(d)
result["memory"] = [before, [torch.tpu.memory_allocated(d) for d in range(chips)]]
result["memory_back"] = result["memory"][1] == before
result["stats"] = [torch.tpu.memory_stats(d)["allocated_bytes.all.current"] for d in range(chips)]
print(json.dumps(result))
"""


def test_threads_on_streams_chips_and_events_match_one_thread():
    env = dict(os.environ, TPU_ACCELERATOR_TYPE="v6e-4")
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    r = json.loads(done.stdout.strip().splitlines()[-1])
    assert r["one_chip_errors"] == [] and r["chips_errors"] == [] and r["events_errors"] == [], r
    assert r["one_chip_equal"] and r["chips_equal"] and r["events_equal"], r
    assert r["memory_back"], r
