"""A small ResNet-style CNN (conv-bn-relu-maxpool, a residual block, a strided and a
transposed conv, adaptive average pooling, linear) trains on tpu like PyTorch CPU at
HIGHEST precision, forward and backward, with zero CPU fallbacks."""
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_tpu


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        return F.relu(x + self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))))


class SmallResNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 5, stride=2, padding=2, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                                  nn.MaxPool2d(3, stride=2, padding=1))
        self.block = Block(16)
        self.down = nn.Conv2d(16, 32, 3, stride=2, padding=1, groups=2)
        self.up = nn.ConvTranspose2d(32, 32, 2, stride=2)
        self.head = nn.Linear(32, classes)

    def forward(self, x, y):
        h = self.block(self.stem(x))
        h = F.relu(self.down(h))
        h = self.up(h) + F.interpolate(h, scale_factor=2, mode="nearest")
        h = F.adaptive_avg_pool2d(h, 1).flatten(1)
        return F.cross_entropy(self.head(h), y)


def train(model, data, device, opt_cls=torch.optim.SGD):
    model = copy.deepcopy(model).to(device)
    opt = opt_cls(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for x, y in data:
        loss = model(x.to(device), y.to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, model


def test_small_resnet_trains_like_cpu_without_fallbacks():
    torch.manual_seed(0)
    model = SmallResNet()
    g = torch.Generator().manual_seed(1)
    data = [(torch.randn(4, 3, 32, 32, generator=g), torch.randint(0, 10, (4,), generator=g)) for _ in range(3)]
    torch_tpu.metrics.reset()
    with torch.tpu.precision("highest"):
        tpu_losses, tpu_model = train(model, data, "tpu")
    fallbacks = torch_tpu.metrics.fallback_ops()
    ran = torch_tpu.metrics.executed_ops()
    cpu_losses, cpu_model = train(model, data, "cpu")
    assert not fallbacks, f"ops fell back to CPU: {fallbacks}"
    for k in ("convolution", "convolution_backward", "max_pool2d", "max_pool2d_backward", "upsample_nearest2d"):
        assert k in ran, f"kernel {k} did not run ({ran})"
    torch.testing.assert_close(tpu_losses, cpu_losses, rtol=1e-4, atol=1e-4)
    for (name, p_tpu), p_cpu in zip(tpu_model.named_parameters(), cpu_model.parameters()):
        torch.testing.assert_close(p_tpu.detach().cpu(), p_cpu.detach(), rtol=1e-3, atol=1e-4, msg=name)
