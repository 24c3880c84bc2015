"""`python -m torch_tpu port`: a planted script's every porting hazard is found at its line."""
import html.parser
import subprocess
import sys
import textwrap

PLANTED = textwrap.dedent("""\
    import torch
    from torch import nn

    try:
        import apex
    except ImportError:
        apex = None

    device = "tpu"
    model = nn.Sequential(nn.Linear(100, 64), nn.ReLU(), nn.Linear(64, 1)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    if False:
        model.cuda()
    for step in range(3):
        x = torch.randn(8 if step < 2 else 5, 100, device=device)
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        print(step, loss.item())
    wide = torch.ones(3, dtype=torch.float64, device=device)
    values = torch.linalg.eig(torch.randn(4, 4, device=device))
""")


def _port(tmp_path, source):
    (tmp_path / "script.py").write_text(source)
    out = tmp_path / "report"
    run = subprocess.run([sys.executable, "-m", "torch_tpu", "port", str(tmp_path / "script.py"), "--out", str(out)],
                         capture_output=True, text=True, timeout=120)
    return run, out


def _row(md, section, needle):
    """The table row of `section` that contains needle."""
    body = md.split(f"## {section}")[1].split("\n## ")[0]
    return next((line for line in body.splitlines() if line.startswith("|") and needle in line), None)


class _Tags(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)


def test_planted_hazards_are_found_at_their_lines(tmp_path):
    run, out = _port(tmp_path, PLANTED)
    assert run.returncode == 0, run.stderr
    md = (out / "report.md").read_text()
    assert md in run.stdout
    assert "script.py:5 | import apex" in _row(md, "Hard-coded CUDA", "apex")
    assert "script.py:13 | model.cuda()" in _row(md, "Hard-coded CUDA", ".cuda()")
    assert "script.py:22" in _row(md, "CPU fallbacks", "aten::linalg_eig")
    assert "script.py:21" in _row(md, "float64 on tpu", "float64")
    assert _row(md, "Host syncs", "aten::_local_scalar_dense").startswith("| script.py:20 |")
    recompile = _row(md, "Shapes that recompile", "script.py:16")
    assert "5x100" in recompile and "8x100" in recompile
    waste = _row(md, "MXU padding waste", "8x100 100x64")
    assert float(waste.split("|")[4].strip().rstrip("%")) > 0
    page = (out / "report.html").read_text()
    tags = _Tags()
    tags.feed(page)
    assert tags.tags.count("svg") >= 2 and "script" not in tags.tags and "link" not in tags.tags


def test_a_script_that_raises_is_reported(tmp_path):
    run, out = _port(tmp_path, "import torch\nx = torch.ones(2, device='tpu')\nraise ValueError('planted')\n")
    assert run.returncode != 0
    md = (out / "report.md").read_text()
    assert "ValueError: planted" in _row(md, "Run", "exception")
    assert "script.py:3" in _row(md, "Run", "raised at")
