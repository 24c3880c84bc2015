"""torch.save / torch.load of tpu tensors, modules and optimizer state."""
import io

import torch


def roundtrip(obj, **load_kw):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, **load_kw)


def test_tensor_roundtrips_keep_device_and_values():
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4).to("tpu")
    y = roundtrip(x)
    assert y.device.type == "tpu" and torch.equal(y.cpu(), x.cpu())
    z = roundtrip(x, map_location="cpu")
    assert z.device.type == "cpu" and torch.equal(z, x.cpu())
    w = roundtrip(torch.ones(3), map_location="tpu")
    assert w.device.type == "tpu"
    v = roundtrip(x.t(), weights_only=True)  # non-contiguous view
    assert torch.equal(v.cpu(), x.cpu().t())


def test_state_dict_and_optimizer_state(tmp_path):
    torch.manual_seed(0)
    m = torch.nn.Linear(4, 3).to("tpu")
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    m(torch.randn(2, 4, device="tpu")).sum().backward()
    opt.step()
    path = tmp_path / "m.pt"
    torch.save({"model": m.state_dict(), "opt": opt.state_dict()}, path)
    ck = torch.load(path, map_location="cpu")
    assert all(t.device.type == "cpu" for t in ck["model"].values())
    m2 = torch.nn.Linear(4, 3)
    m2.load_state_dict(ck["model"])
    assert torch.equal(m2.weight, m.weight.detach().cpu())
    ck2 = torch.load(path)
    assert ck2["model"]["weight"].device.type == "tpu"
    buf = ck2["opt"]["state"][0]["momentum_buffer"]
    assert buf.device.type == "tpu"
