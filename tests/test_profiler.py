"""torch.profiler on tpu: device ops on their own timeline (one track per stream) with the time
the emulator spent on them, linked to the op that issued them, in key_averages() and in the
exported chrome trace; nothing recorded without ProfilerActivity.PrivateUse1; the same under
TPU_LAUNCH_BLOCKING=1; the legacy autograd profiler's device column."""
import json
import os
import subprocess
import sys

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

import torch_tpu  # noqa: F401

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def forward():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).to("tpu")
    x, bias = torch.randn(16, 32, device="tpu"), torch.randn(16, 8, device="tpu")
    with profile(activities=ACTIVITIES) as prof:
        (model(x) + bias).sum().item()
    return prof


def device_events(prof):
    return [e for e in prof.events() if e.device_type == DeviceType.PrivateUse1]


def test_device_ops_have_positive_times_in_stream_order():
    prof = forward()
    events = device_events(prof)
    names = [e.name for e in events]
    assert names.count("addmm") == 2 and "add" in names and "relu" in names, names
    assert all(e.time_range.end > e.time_range.start for e in events)
    assert {(e.device_index, e.device_resource_id) for e in events} == {(0, 0)}  # tpu:0, default stream
    ordered = sorted(events, key=lambda e: e.time_range.start)
    assert all(b.time_range.start >= a.time_range.end for a, b in zip(ordered, ordered[1:]))
    # linked to the op that launched them: their time is the op's device time
    ops = {e.key: e for e in prof.key_averages()}
    assert ops["aten::addmm"].self_device_time_total > 0 and ops["aten::add"].self_device_time_total > 0
    assert ops["aten::linear"].device_time_total >= ops["aten::addmm"].self_device_time_total
    assert ops["aten::addmm"].self_device_time_total == ops["addmm"].self_device_time_total


def test_table_shows_tpu_time():
    table = forward().key_averages().table(sort_by="self_device_time_total", row_limit=30)
    assert "Self TPU" in table and "TPU total" in table
    for name in ("aten::addmm", "addmm", "aten::add", "relu", "device-to-host copy"):
        assert name in table, name


def test_chrome_trace_has_a_track_per_stream(tmp_path):
    path = tmp_path / "trace.json"
    forward().export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    track = next((e["pid"], e["tid"]) for e in events
                 if e.get("ph") == "M" and e["name"] == "thread_name" and e["args"]["name"] == "tpu:0 stream 0")
    process = next(e["args"]["name"] for e in events
                   if e.get("ph") == "M" and e["name"] == "process_name" and e["pid"] == track[0])
    assert process == "tpu:0"
    kernels = [e for e in events if e.get("ph") == "X" and (e["pid"], e["tid"]) == track]
    assert {"addmm", "add", "relu", "sum"} <= {e["name"] for e in kernels}
    cpu_ids = {e["args"]["External id"] for e in events if e.get("cat") == "cpu_op"}
    for e in kernels:
        assert e["dur"] > 0 and e["ts"] > 0 and e["args"]["emulator_us"] > 0
        assert e["args"]["External id"] in cpu_ids  # the op that issued it
    assert sorted(e["args"]["flops"] for e in kernels if e["name"] == "addmm") == [2 * 16 * 64 * 8, 2 * 16 * 32 * 64]
    # each kernel's estimated time on the chip's generation (v6e): the cost model's roofline
    import torch_tpu
    for e in kernels:
        if "flops" in e["args"]:  # an op call (copies carry no cost)
            assert e["args"]["estimated_tpu_us"] > 0
    addmm = min((e for e in kernels if e["name"] == "addmm"), key=lambda e: e["args"]["flops"])
    padded = 2 * 16 * 256 * 256 / (torch_tpu._C._generation_info("v6e")["bf16_tflops"] * 1e12) * 1e6
    assert addmm["args"]["estimated_tpu_us"] >= padded


def test_nothing_recorded_without_device_activity():
    x = torch.randn(256, 256, device="tpu")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        (x @ x).sum().item()
    assert device_events(prof) == [] and "Self TPU" not in prof.key_averages().table()
    (x + x).cpu()  # not profiled: the next trace starts empty
    with profile(activities=ACTIVITIES) as prof:
        (x * 2).cpu()
    assert [e.name for e in device_events(prof)] == ["mul", "device-to-host copy"]


def test_side_stream_has_its_own_track():
    x = torch.randn(512, 512, device="tpu")
    s = torch.tpu.Stream()
    with profile(activities=ACTIVITIES) as prof:
        with torch.tpu.stream(s):
            y = x @ x
        torch.tpu.current_stream().wait_stream(s)
        (y + 1).cpu()
    streams = {e.name: e.device_resource_id for e in device_events(prof)}
    assert streams["mm"] == s.stream_id and streams["add"] == 0


def test_fused_chain_is_one_device_event():
    x = torch.randn(100000, device="tpu")
    (torch.sigmoid(x) * x).exp().cpu()  # the first calls of each signature run blocking, unfused
    with torch.tpu.eager_mode("fused"), profile(activities=ACTIVITIES) as prof:
        (torch.sigmoid(x) * x).exp().cpu()
    names = [e.name for e in device_events(prof)]
    assert names == ["fused chain: sigmoid, mul, exp", "device-to-host copy"], names


def test_launch_blocking_records_ops_run_where_they_are_issued():
    code = (
        "import json, torch, torch_tpu\n"
        "from torch.profiler import profile, ProfilerActivity as A\n"
        "assert torch.tpu.get_eager_mode() == 'debug'\n"
        "x = torch.randn(64, 64, device='tpu')\n"
        "with profile(activities=[A.CPU, A.PrivateUse1]) as prof:\n"
        "    (x @ x + x).cpu()\n"
        "ops = {e.key: e.self_device_time_total for e in prof.key_averages()}\n"
        "print(json.dumps([ops['aten::mm'], ops['aten::add'], ops['mm'], ops['add']]))\n")
    env = dict(os.environ, TPU_LAUNCH_BLOCKING="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env,
                         timeout=300).stdout
    mm_op, add_op, mm, add = json.loads(out.strip().splitlines()[-1])
    assert mm > 0 and add > 0 and mm_op == mm and add_op == add


def test_legacy_profiler_times_ops_with_events():
    x = torch.randn(256, 256, device="tpu")
    (x @ x).cpu()
    with torch.autograd.profiler.profile(use_device="tpu") as prof:
        (x @ x).cpu()
    ops = {e.key: e for e in prof.key_averages()}
    assert ops["aten::mm"].device_time_total > 0
    assert "Self TPU" in prof.key_averages().table()
