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
    """The report of source, the script named relative to the working directory as users do."""
    (tmp_path / "script.py").write_text(source)
    out = tmp_path / "report"
    run = subprocess.run([sys.executable, "-m", "torch_tpu", "port", "script.py", "--out", str(out)],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
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


def test_the_page_renders_in_a_real_browser(tmp_path):
    """Headless Chromium (make setup installs it) loads the page: its charts are in the DOM it
    built and the screenshot it takes is a picture, not a blank page."""
    import shutil
    import struct
    import zlib

    import pytest

    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("no Chromium: `make setup` installs Debian's chromium package")
    run, out = _port(tmp_path, PLANTED)
    assert run.returncode == 0, run.stderr
    url = (out / "report.html").resolve().as_uri()
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    dom = subprocess.run([browser, *flags, "--dump-dom", url], capture_output=True, text=True, timeout=120).stdout
    assert dom.count("<svg") >= 2 and "Porting report" in dom
    shot = tmp_path / "page.png"
    subprocess.run([browser, *flags, "--window-size=1100,1500", f"--screenshot={shot}", url], capture_output=True, timeout=120)
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", png[16:24]) == (1100, 1500)
    pixels, pos = b"", 8
    while pos < len(png):  # the image data: more than one colour on the page
        size, kind = struct.unpack(">I4s", png[pos:pos + 8])
        pixels += png[pos + 8:pos + 8 + size] if kind == b"IDAT" else b""
        pos += size + 12
    assert len(set(zlib.decompress(pixels))) > 16
