"""Llama 3 "debug model" (torchtitan's debugmodel sizes: dim 256, 6 layers, 16 heads, vocab 2048,
FFN 768, RoPE theta 500000) trained with FSDP2 + tensor parallelism on 4 emulated chips:

    python demo/llama_fsdp_tp.py                 # starts torchrun: 4 ranks on v6e-4, mesh dp=2 x tp=2
    python demo/llama_fsdp_tp.py --steps 20 --dp 1 --tp 4
    python demo/llama_fsdp_tp.py --check         # also trains the model on one CPU process (float64)
                                                 # on the same global batches and compares the losses

The structure is torchtitan's (models/llama3/infra/parallelize.py): `parallelize` applies tensor
parallelism to each block with `parallelize_module` (attention wq/wk/wv and FFN w1/w3 column-wise,
wo and w2 row-wise) over the mesh's "tp" dim, then `fully_shard`s each block and the root over "dp".
torchtitan itself does not run here: its releases pair with torch 2.14 (it calls
torch.distributed.set_timeout, absent in 2.13, and wants FlexAttention on the device).

The batches follow a learnable rule (each token determines the next), so the loss falls."""
import argparse
import os
import subprocess
import sys
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn


@dataclass
class LlamaArgs:  # torchtitan's llama3 "debugmodel"
    dim: int = 256
    n_layers: int = 6
    n_heads: int = 16
    vocab_size: int = 2048
    ffn_hidden: int = 768  # compute_ffn_hidden_dim(256, multiple_of=256)
    rope_theta: float = 500000.0
    norm_eps: float = 1e-5


def rope_tables(head_dim, seq, theta):
    freqs = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = torch.outer(torch.arange(seq, dtype=torch.float64), freqs)
    return torch.cos(angles).float(), torch.sin(angles).float()  # computed in float64, used in float32


def apply_rope(x, cos, sin):  # x: (batch, seq, heads, head_dim), pairs (even, odd) rotated
    x1, x2 = x[..., 0::2], x[..., 1::2]
    cos, sin = cos[None, :, None, :].to(x.dtype), sin[None, :, None, :].to(x.dtype)
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


class Attention(nn.Module):
    def __init__(self, a: LlamaArgs):
        super().__init__()
        self.head_dim = a.dim // a.n_heads
        self.wq, self.wk, self.wv = (nn.Linear(a.dim, a.dim, bias=False) for _ in range(3))
        self.wo = nn.Linear(a.dim, a.dim, bias=False)

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        # -1 heads: under tensor parallelism each rank holds its share of them
        q, k, v = (w(x).view(b, s, -1, self.head_dim) for w in (self.wq, self.wk, self.wv))
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        return self.wo(out.transpose(1, 2).reshape(b, s, -1))


class FeedForward(nn.Module):
    def __init__(self, a: LlamaArgs):
        super().__init__()
        self.w1 = nn.Linear(a.dim, a.ffn_hidden, bias=False)
        self.w2 = nn.Linear(a.ffn_hidden, a.dim, bias=False)
        self.w3 = nn.Linear(a.dim, a.ffn_hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, a: LlamaArgs):
        super().__init__()
        self.attention_norm = nn.RMSNorm(a.dim, eps=a.norm_eps)
        self.attention = Attention(a)
        self.ffn_norm = nn.RMSNorm(a.dim, eps=a.norm_eps)
        self.feed_forward = FeedForward(a)

    def forward(self, x, cos, sin):
        x = x + self.attention(self.attention_norm(x), cos, sin)
        return x + self.feed_forward(self.ffn_norm(x))


class Llama(nn.Module):
    def __init__(self, a: LlamaArgs, seq: int):
        super().__init__()
        self.args = a
        self.tok_embeddings = nn.Embedding(a.vocab_size, a.dim)
        self.layers = nn.ModuleList(Block(a) for _ in range(a.n_layers))
        self.norm = nn.RMSNorm(a.dim, eps=a.norm_eps)
        self.output = nn.Linear(a.dim, a.vocab_size, bias=False)
        self.cos, self.sin = rope_tables(a.dim // a.n_heads, seq, a.rope_theta)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.normal_(p, std=0.02)

    def forward(self, tokens):
        x = self.tok_embeddings(tokens)
        s = tokens.shape[1]
        cos, sin = self.cos[:s].to(x.device), self.sin[:s].to(x.device)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.output(self.norm(x))


def parallelize(model, mesh):
    """torchtitan's order: tensor parallelism inside each block over "tp", then FSDP2 over "dp"."""
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    if mesh["tp"].size() > 1:
        plan = {"attention.wq": ColwiseParallel(), "attention.wk": ColwiseParallel(), "attention.wv": ColwiseParallel(),
                "attention.wo": RowwiseParallel(), "feed_forward.w1": ColwiseParallel(),
                "feed_forward.w3": ColwiseParallel(), "feed_forward.w2": RowwiseParallel()}
        for block in model.layers:
            parallelize_module(block, mesh["tp"], plan)
    for block in model.layers:
        fully_shard(block, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model


def batch(step, dp_rank, batch_size, seq, vocab):
    """Tokens where each determines the next (t -> 5t + 3 mod vocab) from a random start."""
    g = torch.Generator().manual_seed(1000 * step + dp_rank)
    start = torch.randint(0, vocab, (batch_size, 1), generator=g)
    tokens = start.clone()
    for _ in range(seq):
        tokens = torch.cat([tokens, (tokens[:, -1:] * 5 + 3) % vocab], dim=1)
    return tokens[:, :-1], tokens[:, 1:]


def loss_of(model, x, y):
    logits = model(x)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1))


def reference_losses(args, dp):
    """The same model trained by one CPU process in float64 on the union of the dp ranks' batches."""
    torch.manual_seed(0)
    model = Llama(LlamaArgs(), args.seq).double()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    losses = []
    for step in range(args.steps):
        xs, ys = zip(*(batch(step, r, args.batch, args.seq, model.args.vocab_size) for r in range(dp)))
        loss = loss_of(model, torch.cat(xs), torch.cat(ys))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def train(args):
    from torch.distributed.device_mesh import init_device_mesh

    if args.check:  # f32 matmuls (a TPU's default is one bf16 pass): the comparison is then tight
        torch.tpu.set_matmul_precision("highest")
    dist.init_process_group("tpu_dist")
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.dp * args.tp != world:
        raise SystemExit(f"--dp {args.dp} x --tp {args.tp} must equal the {world} ranks")
    mesh = init_device_mesh("tpu", (args.dp, args.tp), mesh_dim_names=("dp", "tp"))
    torch.manual_seed(0)  # every rank builds the same weights; parallelize keeps its shards
    model = parallelize(Llama(LlamaArgs(), args.seq).to("tpu"), mesh)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    dp_rank = mesh["dp"].get_local_rank()
    losses = []
    t0 = time.perf_counter()
    for step in range(args.steps):
        x, y = batch(step, dp_rank, args.batch, args.seq, LlamaArgs.vocab_size)
        loss = loss_of(model, x.to("tpu"), y.to("tpu"))
        opt.zero_grad()
        loss.backward()
        opt.step()
        global_loss = loss.detach().clone()
        dist.all_reduce(global_loss, op=dist.ReduceOp.AVG, group=mesh["dp"].get_group())
        losses.append(global_loss.item())
        if rank == 0:
            print(f"step {step}: loss {losses[-1]:.4f}", flush=True)
    elapsed = time.perf_counter() - t0
    if rank == 0:
        tokens = args.steps * args.batch * args.seq * args.dp
        print(f"{args.steps} steps, mesh dp={args.dp} x tp={args.tp}: {tokens / elapsed:,.0f} tokens/s on the emulator")
        print(torch.tpu.metrics.short_report())
    if args.check and rank == 0:
        want = reference_losses(args, args.dp)
        worst = max(abs(g - w) / abs(w) for g, w in zip(losses, want))
        print(f"single-process float64 losses: {', '.join(f'{w:.4f}' for w in want)}; largest relative difference {worst:.2e}")
        if worst > 1e-4 or not losses[-1] < losses[0]:
            raise SystemExit("FAILED: FSDP2 + TP training differs from single-process training")
        print("ok: FSDP2 + TP matches single-process training")
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--dp", type=int, default=2)
    p.add_argument("--tp", type=int, default=2)
    p.add_argument("--batch", type=int, default=4, help="sequences per dp rank")
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--check", action="store_true")
    args = p.parse_args()
    if "RANK" in os.environ:
        return train(args)
    n = args.dp * args.tp
    env = dict(os.environ, TPU_ACCELERATOR_TYPE=os.environ.get("TPU_ACCELERATOR_TYPE", f"v6e-{n}"), OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={n}", "--standalone", __file__, *sys.argv[1:]]
    return subprocess.call(cmd, env=env)


if __name__ == "__main__":
    sys.exit(main())
