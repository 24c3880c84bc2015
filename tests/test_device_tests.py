"""python -m torch_tpu.device_tests on a small device-generic test file of PyTorch's kind: the
tpu class is instantiated beside the CPU one, tests are paired across devices, and each
tpu-only failure is classified."""
import json
import textwrap

from torch_tpu import device_tests

SUITE = textwrap.dedent('''
    import unittest

    import torch
    from torch.testing._internal.common_device_type import instantiate_device_type_tests
    from torch.testing._internal.common_utils import TestCase, run_tests


    class TestToy(TestCase):
        def test_add(self, device):
            self.assertEqual(torch.ones(3, device=device) + 1, torch.full((3,), 2.0, device=device))

        def test_wrong_on_tpu(self, device):
            x = torch.ones(3, device=device)
            self.assertEqual(x.sum().item(), 3.0 if self.device_type == "cpu" else 4.0)

        def test_raises_on_tpu(self, device):
            if self.device_type != "cpu":
                raise NotImplementedError("not on this device")

        def test_check_missing_on_tpu(self, device):
            with self.assertRaises(RuntimeError):
                if self.device_type == "cpu":
                    raise RuntimeError("bad input")

        def test_fails_everywhere(self, device):
            self.assertEqual(1, 2)

        # marked broken on every device: tpu keeps the contract, CPU does not
        @unittest.expectedFailure
        def test_expected_failure_passing_on_tpu(self, device):
            self.assertNotEqual(self.device_type, "cpu")

        # marked broken on every device and broken on both: no difference
        @unittest.expectedFailure
        def test_expected_failure_everywhere(self, device):
            self.assertEqual(1, 2)


    instantiate_device_type_tests(TestToy, globals())

    if __name__ == "__main__":
        run_tests()
''')


def test_runs_tpu_beside_cpu_and_classifies(tmp_path, capsys):
    suite = tmp_path / "test_toy.py"
    suite.write_text(SUITE)
    out = tmp_path / "report"
    assert device_tests.main([str(suite), "--out", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())["summaries"][0]
    assert (report["tpu_passed"], report["tpu_failed"]) == (2, 5)
    assert (report["cpu_passed"], report["cpu_failed"]) == (4, 3)
    assert report["tpu_only_passed"] == 1
    diffs = report["differences"]
    assert diffs["wrong result"] == 1 and diffs["tpu error"] == 1 and diffs["missing check"] == 1
    assert sum(diffs.values()) == 3  # the test failing on CPU too is no difference
    printed = capsys.readouterr().out
    assert "| test_toy.py | 2 / 5 | 4 / 3 |" in printed and "v2.13" in printed
    assert "test_wrong_on_tpu" in (out / "report.md").read_text()


PRECISION_SUITE = textwrap.dedent('''
    import torch
    from torch.testing._internal.common_device_type import instantiate_device_type_tests
    from torch.testing._internal.common_utils import TestCase


    class TestMatmul(TestCase):
        def test_float32_mm_as_cpu_rounds(self, device):
            g = torch.Generator().manual_seed(0)
            a, b = torch.randn(64, 64, generator=g), torch.randn(64, 64, generator=g)
            self.assertEqual((a.to(device) @ b.to(device)).cpu(), a @ b)


    instantiate_device_type_tests(TestMatmul, globals())
''')


def test_matmul_precision_option_separates_tpu_numerics(tmp_path):
    # a float32 test written for CPU's rounding fails at a TPU's default one bf16 pass, and
    # passes at "highest": the option tells numerics by design from a wrong result
    suite = tmp_path / "test_mm.py"
    suite.write_text(PRECISION_SUITE)
    counts = {}
    for precision in ("default", "highest"):
        out = tmp_path / precision
        assert device_tests.main([str(suite), "--out", str(out), "--matmul-precision", precision]) == 0
        report = json.loads((out / "report.json").read_text())["summaries"][0]
        counts[precision] = (report["tpu_passed"], report["tpu_failed"])
    assert counts == {"default": (0, 1), "highest": (1, 0)}
