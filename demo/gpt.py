"""A small GPT-2-style model and a byte-level corpus that needs no download: the Python
standard library's own sources. Used by the demo, the tests and the benchmarks."""
import dataclasses
import os
import pathlib

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclasses.dataclass
class GPTConfig:
    vocab: int = 256
    seq: int = 128
    layers: int = 4
    d: int = 128
    heads: int = 4
    dropout: float = 0.1


class Block(nn.Module):
    def __init__(self, c: GPTConfig):
        super().__init__()
        self.heads, self.dropout = c.heads, c.dropout
        self.ln1, self.ln2 = nn.LayerNorm(c.d), nn.LayerNorm(c.d)
        self.qkv, self.proj = nn.Linear(c.d, 3 * c.d), nn.Linear(c.d, c.d)
        self.fc, self.out = nn.Linear(c.d, 4 * c.d), nn.Linear(4 * c.d, c.d)
        self.drop = nn.Dropout(c.dropout)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.dropout if self.training else 0.0)
        x = x + self.drop(self.proj(a.transpose(1, 2).reshape(b, t, d)))
        return x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh")))


class GPT(nn.Module):
    def __init__(self, c: GPTConfig):
        super().__init__()
        self.config = c
        self.tok, self.pos = nn.Embedding(c.vocab, c.d), nn.Embedding(c.seq, c.d)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.layers))
        self.ln = nn.LayerNorm(c.d)
        self.head = nn.Linear(c.d, c.vocab, bias=False)
        self.head.weight = self.tok.weight  # tied, as in GPT-2
        self.drop = nn.Dropout(c.dropout)
        self.apply(self._init)

    @staticmethod
    def _init(m):
        """GPT-2's initialisation: small normal weights, zero biases."""
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, idx, targets=None):
        t = idx.shape[1]
        x = self.drop(self.tok(idx) + self.pos(torch.arange(t, device=idx.device)))
        for blk in self.blocks:
            x = blk(x)
        logits = self.head(self.ln(x))
        if targets is None:
            return logits
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def stdlib_corpus(max_bytes: int = 4_000_000) -> torch.Tensor:
    """Bytes of the Python standard library's .py files (sorted, so runs are reproducible)."""
    root = pathlib.Path(os.__file__).parent
    chunks, total = [], 0
    for path in sorted(root.glob("*.py")):
        data = path.read_bytes()
        chunks.append(data)
        total += len(data)
        if total >= max_bytes:
            break
    return torch.frombuffer(bytearray(b"".join(chunks)[:max_bytes]), dtype=torch.uint8).long()


def batches(data: torch.Tensor, batch: int, seq: int, seed: int = 0):
    """Endless random (input, target) windows of the corpus, reproducible from the seed."""
    g = torch.Generator().manual_seed(seed)
    while True:
        ix = torch.randint(len(data) - seq - 1, (batch,), generator=g)
        x = torch.stack([data[i:i + seq] for i in ix.tolist()])
        y = torch.stack([data[i + 1:i + seq + 1] for i in ix.tolist()])
        yield x, y
