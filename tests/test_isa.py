"""One build of the runtime per instruction set (runtime/Makefile), picked when torch_tpu is
imported: TPU_ISA forces one, the default is the widest the host runs. The builds with FMA
(avx512, avx2) give the same bits for the same inputs, and so does avx512bf16 (their bf16
products as dot products) while no value is subnormal; the portable build rounds its contracted
multiply-adds twice, so it only matches within rounding (ARCHITECTURE.md)."""
import os
import subprocess
import sys

import pytest
from together import run_together
import torch

import torch_tpu._runtime

HERE = os.path.dirname(os.path.abspath(__file__))
RUNS = torch_tpu._runtime.host_runs()


def _run(code, **env):
    env = dict({k: v for k, v in os.environ.items() if k != "TPU_ISA"}, **env)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout


def test_the_default_is_the_widest_build_the_host_runs():
    assert RUNS[-1] == "portable" and RUNS == [n for n in torch_tpu._runtime.builds() if n in RUNS]
    assert torch_tpu._runtime.load() == RUNS[0] or os.environ.get("TPU_ISA")


MAPS = """
import torch, torch_tpu._runtime
torch.ones(3, device="tpu").sum().item()
libs = sorted({l.split()[-1].rsplit("/", 1)[-1] for l in open("/proc/self/maps") if "libtpurt" in l})
print(torch_tpu._runtime.load(), *libs)
"""


@pytest.mark.parametrize("isa", RUNS)
def test_a_forced_build_is_the_only_runtime_in_the_process(isa):
    """The extension links to libtpurt.so: it must get the build that was loaded, not a second copy."""
    assert _run(MAPS, TPU_ISA=isa).split() == [isa, *sorted(["libtpurt-isa.so", torch_tpu._runtime.library_file(isa)])]


def test_a_build_the_host_lacks_or_an_unknown_name_is_a_clear_error_at_first_use():
    code = ("import torch\ntry:\n    torch.ones(1, device='tpu')\nexcept ValueError as e:\n    print(e)\n")
    assert "TPU_ISA='avx9': expected one of amx, avx512bf16, avx512, avx2, portable" in _run(code, TPU_ISA="avx9")
    lacking = [n for n in torch_tpu._runtime.builds() if n not in RUNS]
    for isa in lacking:
        assert f"TPU_ISA='{isa}': this host's CPU lacks" in _run(code, TPU_ISA=isa)
    if len(RUNS) > 1:  # changed after import: the loaded build stays, and the error says why
        late = f"import os, torch\nos.environ['TPU_ISA'] = 'portable'\n{code.split(chr(10), 1)[1]}"
        assert "read when torch_tpu is imported" in _run(late)


@pytest.fixture(scope="module")
def per_build(tmp_path_factory):
    out, procs = {}, {}
    for isa in RUNS:
        path = tmp_path_factory.mktemp(isa) / "results.pt"
        procs[isa] = (path, subprocess.Popen([sys.executable, os.path.join(HERE, "isa_ops.py"), str(path)],
                                             env=dict(os.environ, TPU_ISA=isa), stderr=subprocess.PIPE, text=True))
    for isa, (path, proc) in procs.items():
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
        saved = torch.load(path)
        assert saved["isa"] == isa
        out[isa] = saved["results"]
    return out


@pytest.mark.once
@pytest.mark.skipif(not {"avx512", "avx2"} <= set(RUNS), reason="needs a host with AVX-512")
def test_avx512_and_avx2_builds_give_the_same_bits(per_build):
    a, b = per_build["avx512"], per_build["avx2"]
    assert a.keys() == b.keys()
    differ = [n for n in a if not torch.equal(a[n].view(-1).view(torch.uint8), b[n].view(-1).view(torch.uint8))]
    assert not differ, differ


@pytest.mark.once
@pytest.mark.skipif(not {"avx512bf16", "avx512"} <= set(RUNS), reason="needs a host with AVX512-BF16")
def test_the_avx512bf16_build_gives_the_avx512_builds_bits(per_build):
    """Its dot products add each pair's products in K order, as the FMA path does, and a bf16
    product is exact in f32: the same bits, products of bf16 values included."""
    a, b = per_build["avx512bf16"], per_build["avx512"]
    assert a.keys() == b.keys()
    differ = [n for n in a if not torch.equal(a[n].view(-1).view(torch.uint8), b[n].view(-1).view(torch.uint8))]
    assert not differ, differ


SUBNORMAL = """
import torch, torch_tpu
a = torch.full((40, 70), 2.0 ** -70)
b = torch.full((70, 50), 2.0 ** -70)
out = {}
for p in ("default", "high", "highest"):
    with torch.tpu.precision(p):
        out[p] = (a.to("tpu") @ b.to("tpu")).cpu()
want = (a.double() @ b.double()).float()
print(torch_tpu._runtime.load(), *(int(torch.equal(out[p], want)) for p in out), int(bool((out["default"] == 0).all())))
"""


@pytest.mark.skipif("avx512bf16" not in RUNS, reason="needs a host with AVX512-BF16")
def test_the_avx512bf16_build_flushes_subnormal_products_as_a_tpu_does():
    """2^-70 x 2^-70 is below f32's normal range: the dot products flush it (a TPU's MXU does
    too) where the FMA path keeps it; HIGHEST stays f32 on the FMA path in every build. This
    also shows the products ran on the dot-product path."""
    assert _run(SUBNORMAL, TPU_ISA="avx512bf16").split() == ["avx512bf16", "0", "0", "1", "1"]
    assert _run(SUBNORMAL, TPU_ISA="avx512").split() == ["avx512", "1", "1", "1", "0"]


# What the amx build computes on the matrix unit: products of bf16 values (DEFAULT precision's
# f32 matmuls, bf16 ones), HIGH precision's bf16 parts, and the convolutions built on the same
# GEMM core.
ON_THE_UNIT = {f"{op}_{p}" for op in ("mm", "mm_t", "bmm", "addmm") for p in ("default", "high")} | {
    "mm_bf16", "mm_large", "conv", "conv_dx", "conv_dw"}


@pytest.mark.once
@pytest.mark.skipif("amx" not in RUNS, reason="needs a host with AMX-BF16 that Linux lets this process use")
def test_the_amx_build_differs_from_avx512_only_in_products_on_the_unit(per_build):
    """The unit sums each group of 32 products with its own rounding (ARCHITECTURE.md): those
    results match within rounding, everything else (HIGHEST matmuls included) bit for bit; and
    the products did run there (their bits differ)."""
    amx, avx512 = per_build["amx"], per_build["avx512"]
    differ = {n for n in amx if not torch.equal(amx[n].view(-1).view(torch.uint8), avx512[n].view(-1).view(torch.uint8))}
    assert differ <= ON_THE_UNIT and {"mm_default", "mm_high"} <= differ, differ
    for name in differ:
        # rounding of sums whose partial sums reach the largest result: a few of its ulps (an
        # element that cancels to near zero differs by the same absolute amount)
        got, want = amx[name].double(), avx512[name].double()
        ulp = torch.finfo(amx[name].dtype).eps
        assert (got - want).abs().max() <= 8 * ulp * want.abs().max(), name


# The op tests of the kernels whose code the instruction set changes most (vector loops, fused
# multiply-adds, the GEMM tile); `make test-isa` runs all of them on every build.
VECTOR_HEAVY = "mm or conv or softmax or gelu or layer_norm or attention or adam or lerp"


@pytest.mark.once
def test_op_tests_pass_on_the_other_builds():
    """The default build runs every op test in the suite; the others run the vector-heavy ones,
    except avx512 where avx512bf16 is the default: a test above holds the two to the same bits."""
    others = [isa for isa in RUNS[1:] if not (isa == "avx512" and RUNS[0] == "avx512bf16")]
    runs = run_together([(["-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", VECTOR_HEAVY,
                           os.path.join(HERE, "test_ops.py")], dict(os.environ, TPU_ISA=isa)) for isa in others],
                        timeout=900)
    for isa, p in zip(others, runs):
        assert p.returncode == 0, (isa, p.stdout[-3000:])
        assert " passed" in p.stdout.splitlines()[-1], isa


@pytest.mark.once
def test_the_portable_build_matches_within_rounding(per_build):
    # against the widest build with FMA: the amx one rounds its unit's sums its own way too
    ref, port = per_build[next((n for n in RUNS if n != "amx"), RUNS[0])], per_build["portable"]
    for name, t in port.items():
        r = ref[name]
        tol = {"atol": 1e-2, "rtol": 1e-2} if t.dtype in (torch.bfloat16, torch.float16) else {"atol": 1e-5, "rtol": 1e-4}
        torch.testing.assert_close(t, r, **tol, msg=lambda m, n=name: f"{n}: {m}")
