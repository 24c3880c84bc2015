"""Run PyTorch's device-generic test files against tpu, beside CPU, and compare.

PyTorch's suites (test_view_ops.py, test_ops.py, ...) instantiate one class per device type
found: with torch_tpu installed, `TestViewOpsPRIVATEUSE1` (or `...TPU`) runs beside `TestViewOpsCPU` in the
same process. The files are not part of the torch wheel: check out pytorch/pytorch at the tag
of the installed torch (`v2.13.0` for torch 2.13.0) and point this command at them:

    python -m torch_tpu.device_tests ~/pytorch/test/test_view_ops.py ~/pytorch/test/test_shape_ops.py

For each file it prints the tpu tests that passed and failed, CPU's result on the same tests,
and classifies every test that fails on tpu but passes on CPU: a wrong result (an assertEqual
between values failed), a missing check (CPU raised or warned, tpu did not, or not with the
message the test expects), a tpu error
(tpu raised where CPU did not), or a test that assumes CUDA or another device. The records
(one JSON line per test) and a markdown report go to --out.
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys
import time

import torch

# the tpu classes are named PRIVATEUSE1, or TPU once the backend's name is known
_DEVICE_CLASS = re.compile(r"(CPU|PRIVATEUSE1|TPU)$")
# What a test's body did: an expected failure counts by what its body did, since the file's
# expectedFailure marks are bookkeeping of CPU's and CUDA's known bugs.
PASSED, FAILED = ("passed", "xpassed"), ("failed", "error", "xfailed")
CLASSES = ("wrong result", "missing check", "tpu error", "assumes CUDA or another device", "tpu numerics by design",
           "fails by chance on either device",
           "crash or timeout")
_ASSUMES_DEVICE = re.compile(r"\bcuda\b|torch\.cuda|\bmps\b|\bxla\b|\bMTIA\b|TEST_CUDA|only runs on|requires .*GPU", re.I)
_WRONG_RESULT = re.compile(r"not close|not equal|mismatch|Tensor-likes|Scalars are|Booleans|!=|differ", re.I)
# CPU raised (or warned) and tpu did not, or raised with another message than the test expects
_MISSING_CHECK = re.compile(r"not raised|did not raise|not triggered|DID NOT RAISE|no warning|warning|does not match",
                            re.I)


def pair_key(test_id, device):
    """The test's id with its device taken out, so the CPU and tpu instances match."""
    path, _, rest = test_id.partition("::")
    cls, _, name = rest.partition("::")
    cls = _DEVICE_CLASS.sub("", cls)
    for suffix in ({"cpu": ("_cpu",), "tpu": ("_privateuse1", "_tpu")}[device]):
        # the last occurrence: instantiate names tests NAME_DEVICE[_DTYPE...]
        m = re.match(r"^(.*)" + re.escape(suffix) + r"((?:_|\[).*|)$", name)
        if m:
            name = f"{m.group(1)}_DEVICE{m.group(2)}"
            break
    return f"{os.path.basename(path)}::{cls}::{name}"


def device_of(test_id):
    cls = test_id.split("::")[1] if "::" in test_id else ""
    m = _DEVICE_CLASS.search(cls)
    return None if not m else "cpu" if m.group(1) == "CPU" else "tpu"


# Tests whose CUDA run skips what fails on tpu (read from the test's source): the device-type
# check is in the test, not in the message. Keyed by file::class::test (device suffixes off).
ASSUMES_CUDA = {
    "test_sort_and_select.py::TestSortAndSelect::test_stable_sort_against_numpy":
        "returns early on cuda, before index_fill_ with a CPU index tensor (which CUDA refuses too)",
    "test_binary_ufuncs.py::TestBinaryUfuncs::test_fmod_remainder_by_zero_integral":
        "expects CUDA's undefined values for an integer division by zero on every device but CPU (tpu raises "
        "ZeroDivisionError, as CPU)",
    "test_binary_ufuncs.py::TestBinaryUfuncs::test_complex_scalar_pow_tensor":
        "expects complex32 pow on every device but CPU (CUDA has it; tpu runs complex32 on the CPU fallback)",
    "test_binary_ufuncs.py::TestBinaryUfuncs::test_pow":
        "expects complex32 pow (float16 with a complex exponent) on every device but CPU, as above",
    "test_binary_ufuncs.py::TestBinaryUfuncs::test_type_promotion__refs_copysign":
        "PyTorch's reference refuses a CPU scalar divisor on any non-CPU device (cuda too); its skip names "
        "an older class, TestBinaryUfuncsDevice",
    "test_convolution.py::TestConvolutionNNDeviceType::test_conv_backend_*":
        "asserts the backend CPU and CUDA select (slow2d, ...); PyTorch selects Overrideable for every "
        "PrivateUse1 device. With that one assertion relaxed, the rest of each test (forward AD, gradcheck and "
        "gradgradcheck of the convolution on tpu) passes: 144 of 144",
    "test_embedding.py::TestEmbeddingNNDeviceType::test_EmbeddingBag_per_sample_weights_failures":
        "expects CUDA's words for a per_sample_weights dtype unlike weight's ('expected scalar type') on every "
        "device but CPU; tpu raises CPU's RuntimeError and words",
}


# Tests that pin CPU's rounding where tpu's result is the more exact one by design (read from the
# test's source and checked against float64); the reason is the report's answer.
TPU_NUMERICS = {
    **{f"test_reductions.py::TestReductions::test_ref_extremal_values_{op}":
       "complex64 sums accumulate in double on tpu: with an inf real part the comparison is exact, and the "
       "imaginary part (0.65731859) is float64's rounded, where numpy's and CPU's float32 sums give 0.65731812"
       for op in ("sum", "_refs_sum", "masked_sum")},
    "test_reductions.py::TestReductions::test_ref_extremal_values_mean":
        "mean of complex64 with an inf: tpu divides the sum by the real count (C99 Annex G, as CUDA does), "
        "inf+0.131j; numpy and CPU divide by the complex count 5+0j, whose inf*0 makes the imaginary part NaN",
    "test_linalg.py::TestLinalg::test_linalg_solve_triangular_broadcasting":
        "float32 triangular systems with diagonals down to 1e-6: tpu solves in double and rounds (X within 0.5 "
        "ulp of float64's solution of the same system; CPU's float32 solve within 1e-6 relative); the test "
        "compares A @ X with B, whose rounding error grows with |X| on both devices (CPU's reaches 0.03 of the "
        "0.01 allowed on other draws)",
    "test_embedding.py::TestEmbeddingNNDeviceType::test_EmbeddingBag_per_sample_weights_and_new_offsets":
        "float16/bfloat16 bags: tpu's sum of weight x per_sample_weight is the correctly rounded one (float64 "
        "decides, 600 of 600 draws); the test's reference rounds every product first, and CPU's kernel differs from "
        "tpu's in 47 of 600 draws (ties); either device misses the reference by one ulp on about 1 draw in 20 "
        "(CPU 31, tpu 28 of 600)",
}

# Statistical tests whose bound fails by chance on either device (measured over many draws): the
# devices' random streams differ, so which draws fail differs too.
BY_CHANCE = {
    "test_dropout.py::TestDropoutNNDeviceType::test_Dropout1d":
        "the kept fraction of 100-225 channels must be within 0.05 of 0.8: 2,000 draws of 12 x 12 channels "
        "fail 15.1% on CPU and 14.3% on tpu (mean 0.7999 and standard deviation 0.033 on both)",
}


def _listed(table, key):
    """Whether a test (its key without the device and dtype suffixes) is in a table; a key ending
    in '*' lists every test whose name starts with it."""
    base = key.split("[")[0].rsplit("_DEVICE", 1)[0]
    return base in table or any(k.endswith("*") and base.startswith(k[:-1]) for k in table)


def classify(record):
    message = f"{record['exception']}: {record['message']}"
    key = pair_key(record["test"], "tpu")
    if _listed(ASSUMES_CUDA, key):
        return "assumes CUDA or another device"
    if _listed(TPU_NUMERICS, key):
        return "tpu numerics by design"
    if _listed(BY_CHANCE, key):
        return "fails by chance on either device"
    if record["outcome"] == "crash":
        return "crash or timeout"
    if _ASSUMES_DEVICE.search(message) or _ASSUMES_DEVICE.search(record["test"].split("::")[-1]):
        return "assumes CUDA or another device"
    if record["exception"] == "AssertionError":
        if _MISSING_CHECK.search(message):
            return "missing check"
        if _WRONG_RESULT.search(message):
            return "wrong result"
        return "wrong result"
    if record["exception"] in ("Failed",) and _MISSING_CHECK.search(message):
        return "missing check"
    return "tpu error"


def _records(log):
    if not os.path.exists(log):
        return []
    with open(log) as f:
        return [json.loads(line) for line in f if line.strip()]


def read_records(path, out_dir, *_):
    """The records an earlier run of `path` left in out_dir (--report-only)."""
    name = os.path.splitext(os.path.basename(path))[0]
    return {"file": os.path.basename(path), "records": _records(os.path.join(out_dir, f"{name}.jsonl")),
            "returncode": None, "crashed": False, "seconds": 0}


def run_file(path, out_dir, timeout, pytest_args, matmul_precision="default"):
    name = os.path.splitext(os.path.basename(path))[0]
    log = os.path.join(out_dir, f"{name}.jsonl")
    if os.path.exists(log):
        os.remove(log)
    env = dict(os.environ, TORCH_TPU_DEVICE_TESTS_LOG=log, PYTHONUNBUFFERED="1",
               TORCH_TPU_DEVICE_TESTS_PRECISION=matmul_precision)
    cmd = [sys.executable, "-m", "pytest", path, "-p", "torch_tpu._device_tests_plugin", "-q", "-p",
           "no:cacheprovider", "--tb=line", "-k", "CPU or PRIVATEUSE1 or TPU", *pytest_args]
    start = time.time()
    with open(os.path.join(out_dir, f"{name}.out"), "w") as console:
        try:
            rc = subprocess.run(cmd, cwd=os.path.dirname(os.path.abspath(path)), env=env, stdout=console,
                                stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    records = _records(log)
    crashed = rc not in (0, 1)  # pytest: 0 all passed, 1 some failed; else it did not finish
    return {"file": os.path.basename(path), "records": records, "returncode": rc, "crashed": crashed,
            "seconds": round(time.time() - start, 1)}


def summarize(result):
    by_device = {"cpu": {}, "tpu": {}}
    for r in result["records"]:
        dev = device_of(r["test"])
        if dev:
            by_device[dev][pair_key(r["test"], dev)] = r
    tpu, cpu = by_device["tpu"], by_device["cpu"]
    count = lambda recs, outcomes: sum(1 for r in recs if r["outcome"] in outcomes)  # noqa: E731
    same_cpu = [cpu[k] for k in tpu if k in cpu]
    diffs = collections.defaultdict(list)
    for k, r in tpu.items():
        c = cpu.get(k)
        if r["outcome"] in FAILED and (c is None or c["outcome"] in PASSED):
            diffs[classify(r)].append(r)
    return {
        "file": result["file"],
        "tpu_passed": count(tpu.values(), PASSED),
        "tpu_failed": count(tpu.values(), FAILED),
        "tpu_skipped": count(tpu.values(), ("skipped",)),
        "cpu_passed": count(same_cpu, PASSED),
        "cpu_failed": count(same_cpu, FAILED),
        # tests whose body passes on tpu and fails on CPU: most are expected failures of every
        # device (an out= contract CPU and CUDA break) that tpu keeps
        "tpu_only_passed": sum(1 for k, r in tpu.items() if r["outcome"] in PASSED and k in cpu and
                               cpu[k]["outcome"] in FAILED),
        "differences": {c: len(diffs[c]) for c in CLASSES},
        "examples": {c: [(r["test"], f"{r['exception']}: {r['message'][:300]}") for r in diffs[c][:20]] for c in CLASSES},
        "crashed": result["crashed"],
        "returncode": result["returncode"],
        "seconds": result["seconds"],
    }


def table(summaries):
    head = ("| file (tpu classes) | tpu pass / fail | CPU pass / fail, same tests | " + " | ".join(CLASSES) +
            " | pass on tpu only |")
    lines = [head, "|" + "---|" * (4 + len(CLASSES))]
    for s in summaries:
        note = " (did not finish)" if s["crashed"] else ""
        lines.append(f"| {s['file']}{note} | {s['tpu_passed']} / {s['tpu_failed']} | {s['cpu_passed']} / "
                     f"{s['cpu_failed']} | " + " | ".join(str(s["differences"][c]) for c in CLASSES) +
                     f" | {s.get('tpu_only_passed', 0)} |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m torch_tpu.device_tests", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+", help="PyTorch test files (test/test_*.py of pytorch/pytorch)")
    p.add_argument("--out", default="device_tests_report", help="folder for records and the report")
    p.add_argument("--timeout", type=float, default=4 * 3600, help="seconds per file before it is stopped")
    p.add_argument("--jobs", type=int, default=1, help="files run at once")
    p.add_argument("--matmul-precision", default="default", choices=("default", "high", "highest"),
                   help="tpu's float32 matmul precision in the tests (torch.tpu.set_matmul_precision): "
                        "'default' is a TPU's one bf16 pass, which float32 tests written for CPU's rounding "
                        "fail by design; 'highest' separates those from wrong results")
    p.add_argument("--report-only", action="store_true",
                   help="no run: summarize the records an earlier run left in --out")
    p.epilog = (p.epilog or "") + "Arguments after -- go to pytest (e.g. -- -x -k view)."
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    args = p.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    os.makedirs(args.out, exist_ok=True)
    version = torch.__version__.split("+")[0]
    print(f"torch {torch.__version__}: the test files should come from pytorch/pytorch at tag v{version}")
    missing = [f for f in args.files if not os.path.isfile(f) and not args.report_only]
    if missing:
        p.error(f"no such test file: {', '.join(missing)}")
    from concurrent.futures import ThreadPoolExecutor
    out = os.path.abspath(args.out)
    run = read_records if args.report_only else run_file
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        futures = [pool.submit(run, os.path.abspath(f), out, args.timeout, extra, args.matmul_precision)
                   for f in args.files]
        summaries = []
        for f, fut in zip(args.files, futures):
            s = summarize(fut.result())
            summaries.append(s)
            print(f"{s['file']}: tpu {s['tpu_passed']} passed / {s['tpu_failed']} failed; CPU on the same tests "
                  f"{s['cpu_passed']} / {s['cpu_failed']} ({s['seconds']} s)", flush=True)
    report = table(summaries)
    print()
    print(report)
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump({"torch": torch.__version__, "summaries": summaries}, f, indent=1)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(f"torch {torch.__version__}; test files of pytorch/pytorch v{version}\n\n{report}\n")
        for s in summaries:
            for c in CLASSES:
                if s["examples"][c]:
                    f.write(f"\n## {s['file']}: {c} ({s['differences'][c]})\n\n")
                    for test, msg in s["examples"][c]:
                        f.write(f"- `{test}`: {msg.splitlines()[0] if msg else ''}\n")
    print(f"\nrecords and report.md in {out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
