"""Installing torch_tpu changes nothing of PyTorch's meta and FakeTensor behaviour: every shape
function torch_tpu has for an op PyTorch already answers on meta tensors runs on the tpu path
only, and the ones it registers as Meta kernels are for ops PyTorch ships none for."""
import json
import os
import pathlib
import subprocess
import sys

import pytest
import torch_tpu.meta

SCRIPT = pathlib.Path(__file__).with_name("meta_isolation_script.py")
NO_META = "there was no fake impl or Meta kernel registered"


def run_script(*args, autoload):
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="1" if autoload else "0")
    code = f"import sys; sys.argv = {[str(SCRIPT), *args]!r}; "
    code += ("import torch_tpu; " if autoload else "") + f"exec(open({str(SCRIPT)!r}).read())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.once
def test_meta_and_fake_results_identical_with_and_without_torch_tpu():
    without = run_script(autoload=False)
    with_tpu = run_script(autoload=True)
    assert without.keys() == with_tpu.keys()
    def lacks_meta(key):  # the call reaches an op PyTorch has no Meta kernel for, which now has ours
        ref = without[key.rsplit(":", 1)[0] + ":meta"]
        return isinstance(ref, list) and ref[:1] == ["NotImplementedError"] and NO_META in ref[1]

    compared = [key for key in without if not lacks_meta(key)]
    assert len(compared) > 50
    for key in compared:
        assert with_tpu[key] == without[key], key


def test_every_tpu_only_shape_function_is_sampled():
    tpu_only = {n for n, where in torch_tpu.meta.REGISTERED.items() if where == "tpu"}
    assert tpu_only, "expected shape functions that stand in for PyTorch's Meta kernels on tpu"
    assert tpu_only <= set(run_script("names", autoload=False))


def test_meta_registrations_only_for_ops_pytorch_answers_nothing_for():
    registered = sorted(n for n, where in torch_tpu.meta.REGISTERED.items() if where == "Meta")
    assert registered
    code = (f"import json, torch; print(json.dumps([n for n in {registered!r} if any("
            f"torch._C._dispatch_has_kernel_for_dispatch_key('aten::' + n, k) for k in {torch_tpu.meta._META_ANSWERING_KEYS!r})]))")
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")  # a process PyTorch alone set up
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout) == []
