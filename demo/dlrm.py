"""A small DLRM (TorchRec-style recommendation model) trained on the emulated TPU, in one process and
with its embedding tables sharded table-wise over 4 ranks of tpu_dist:

    python demo/dlrm.py                  # one process: trains on tpu and on CPU (float32 and float64)
                                         # from the same weights, compares losses and parameters
    python demo/dlrm.py --torchrec       # the same, with the sparse part a torchrec EmbeddingBagCollection
                                         # fed a KeyedJaggedTensor on tpu (needs torchrec, see below)
    python demo/dlrm.py --ranks 4        # starts torchrun: 4 ranks on v6e-4, each owning some of the
                                         # tables, ids and pooled embeddings exchanged with all_to_all;
                                         # checked against one CPU process training in float64

The model is DLRM's (facebookresearch/dlrm): a bottom MLP over the dense features, one
nn.EmbeddingBag per sparse feature (mode sum or mean) pooling a jagged bag of ids per sample, the
pairwise dot products of the bottom output and the pooled embeddings, a top MLP and a BCE loss.
The ids of a batch come as torch.nested jagged tensors (layout=torch.jagged, one per table) whose
values() and offsets() feed nn.EmbeddingBag(include_last_offset=True) directly; bags may be empty.
The dense MLPs train with SGD, the tables with Adagrad.

Distributed (--ranks N), as torchrec's table-wise sharded EmbeddingBagCollection does it: table t
lives on rank t % N only; the global batch is split over the ranks (data parallel: the dense
gradients are summed with one all_reduce). Each step the ranks send the lengths, then the ids of
their samples to each table's owner (all_to_all_single, "input dist"), the owners pool them and send
the pooled embeddings back ("output dist", an all_to_all_single inside an autograd Function whose
backward sends the gradients of the pooled embeddings to the owners by the reverse all_to_all).

torchrec: torchrec 1.9.2 requires `fbgemm-gpu`, which pip resolves to the 498 MB CUDA wheel (its
`fbgemm_gpu` package would overwrite fbgemm-gpu-cpu's), and fbgemm-gpu-cpu 1.9.0 does not load with
torch 2.13.0: its libraries are built against another torch (fbgemm_gpu_tbe_index_select.so:
undefined symbol torch::autograd::_wrap_outputs(...), whose signature differs in 2.13). What works
beside torch 2.13.0: `pip install fbgemm-gpu-cpu==1.8.0 tensordict torchmetrics==1.0.3
pyre-extensions` then `pip install --no-deps torchrec==1.9.2`; its EmbeddingBagCollection and
KeyedJaggedTensor then run on tpu natively (--torchrec). torchrec's sharded modules compute with
fbgemm's table-batched kernels, which have no tpu kernels (they would run as CPU fallbacks), so the
sharding here is ours. Without torchrec, --torchrec stops with the command above."""
import argparse
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn


@dataclass
class Config:
    dense: int = 8                       # dense features
    dim: int = 8                         # embedding dimension
    tables: list = field(default_factory=lambda: [(40, "sum"), (24, "mean"), (64, "sum"),
                                                  (16, "mean"), (32, "sum"), (48, "mean")])  # (rows, pooling)
    bottom: int = 16                     # hidden width of the bottom MLP
    top: int = 16                        # hidden width of the top MLP
    max_bag: int = 4                     # ids per bag: 0 .. max_bag


INSTALL_TORCHREC = ("pip install fbgemm-gpu-cpu==1.8.0 tensordict torchmetrics==1.0.3 pyre-extensions && "
                    "pip install --no-deps torchrec==1.9.2")


# ---------------------------------------------------------------- data
def teacher(cfg):
    """The hidden rule that decides the clicks: a weight per dense feature and a score per id."""
    g = torch.Generator().manual_seed(1234)
    return torch.randn(cfg.dense, generator=g), [torch.randn(rows, generator=g) for rows, _ in cfg.tables]


def make_batch(cfg, step, part, n):
    """Part `part` of step `step`'s global batch: n samples of dense features (n, dense), per table a
    list of n id tensors (jagged: 0 .. max_bag ids, popular ids likelier) and the clicks (n,).
    Deterministic: seeded by (step, part), so any process can build any rank's batch."""
    g = torch.Generator().manual_seed(1000 * step + part)
    dense = torch.randn(n, cfg.dense, generator=g)
    w, scores = teacher(cfg)
    logit = dense @ w / cfg.dense ** 0.5
    ids = []
    for (rows, mode), s in zip(cfg.tables, scores):
        lengths = torch.randint(0, cfg.max_bag + 1, (n,), generator=g)
        bags = [(rows * torch.rand(int(k), generator=g) ** 2).long() for k in lengths]  # skewed to low ids
        ids.append(bags)
        logit = logit + torch.stack([s[b].sum() if mode == "sum" else s[b].mean() if len(b) else s.new_zeros(())
                                     for b in bags]) * 0.5
    return dense, ids, (logit > 0).float()


def global_batch(cfg, step, parts, n):
    """The union of the parts' batches, in part order: what one process trains on."""
    batches = [make_batch(cfg, step, p, n) for p in parts]
    dense = torch.cat([b[0] for b in batches])
    ids = [sum((b[1][t] for b in batches), []) for t in range(len(cfg.tables))]
    return dense, ids, torch.cat([b[2] for b in batches])


def jagged(bags, device):
    """A list of 1-d id tensors as a nested jagged tensor on `device`."""
    return torch.nested.nested_tensor(bags, layout=torch.jagged, dtype=torch.int64).to(device)


# ---------------------------------------------------------------- model
def mlp(sizes, last_relu):
    layers = []
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        layers.append(nn.Linear(a, b))
        if last_relu or i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def make_tables(cfg):
    tables = nn.ModuleList(nn.EmbeddingBag(rows, cfg.dim, mode=mode, include_last_offset=True) for rows, mode in cfg.tables)
    for t, (rows, _) in zip(tables, cfg.tables):  # DLRM's initialization
        nn.init.uniform_(t.weight, -rows ** -0.5, rows ** -0.5)
    return tables


class Tables(nn.Module):
    """All tables in this process: nested jagged ids per table -> pooled embeddings (batch, tables, dim)."""

    def __init__(self, tables):
        super().__init__()
        self.tables = tables

    def forward(self, ids):
        return torch.stack([table(nt.values(), nt.offsets()) for table, nt in zip(self.tables, ids)], dim=1)


class TorchrecTables(nn.Module):
    """The same tables as a torchrec EmbeddingBagCollection (weights copied), fed a KeyedJaggedTensor."""

    def __init__(self, cfg, tables):
        super().__init__()
        from torchrec import EmbeddingBagCollection, EmbeddingBagConfig, PoolingType

        self.keys = [f"f{t}" for t in range(len(cfg.tables))]
        configs = [EmbeddingBagConfig(name=f"t{t}", embedding_dim=cfg.dim, num_embeddings=rows, feature_names=[key],
                                      pooling=PoolingType.SUM if mode == "sum" else PoolingType.MEAN)
                   for t, ((rows, mode), key) in enumerate(zip(cfg.tables, self.keys))]
        self.ebc = EmbeddingBagCollection(tables=configs, device=torch.device("cpu"))
        with torch.no_grad():
            for t, table in enumerate(tables):
                self.ebc.embedding_bags[f"t{t}"].weight.copy_(table.weight)
        self.dim = cfg.dim

    def forward(self, ids):
        from torchrec import KeyedJaggedTensor

        kjt = KeyedJaggedTensor(keys=self.keys, values=torch.cat([nt.values() for nt in ids]),
                                lengths=torch.cat([nt.offsets().diff() for nt in ids]))
        pooled = self.ebc(kjt)  # a KeyedTensor: (batch, tables * dim) in key order
        return pooled.values().view(pooled.values().shape[0], len(self.keys), self.dim)

    def weights(self):
        return [self.ebc.embedding_bags[f"t{t}"].weight for t in range(len(self.keys))]


class DLRM(nn.Module):
    def __init__(self, cfg, sparse):
        super().__init__()
        n = len(cfg.tables) + 1
        self.bottom = mlp([cfg.dense, cfg.bottom, cfg.dim], last_relu=True)
        self.sparse = sparse
        self.top = mlp([cfg.dim + n * (n - 1) // 2, cfg.top, 1], last_relu=False)
        i, j = torch.triu_indices(n, n, offset=1)
        self.register_buffer("pairs", i * n + j, persistent=False)  # (i < j) in the flattened n x n

    def forward(self, dense, ids):
        x = self.bottom(dense)
        f = torch.cat([x[:, None], self.sparse(ids)], dim=1)                 # (batch, 1 + tables, dim)
        dots = torch.bmm(f, f.transpose(1, 2)).flatten(1)[:, self.pairs]    # pairwise interactions
        return self.top(torch.cat([x, dots], dim=1)).squeeze(1)


def build(cfg, sparse=Tables):
    """The model every process starts from (CPU, float32, seeded)."""
    torch.manual_seed(0)
    tables = make_tables(cfg)
    model = DLRM(cfg, Tables(tables))
    if sparse is not Tables:
        model.sparse = sparse(cfg, tables)
    return model


def dense_params(model):
    return [p for name, p in model.named_parameters() if not name.startswith("sparse.")]


def table_weights(model):
    s = model.sparse
    return s.weights() if hasattr(s, "weights") else [t.weight for t in s.tables]


def optimizers(model, lr_dense=0.3, lr_sparse=0.1):
    return (torch.optim.SGD(dense_params(model), lr=lr_dense),
            torch.optim.Adagrad([p for name, p in model.named_parameters() if name.startswith("sparse.")], lr=lr_sparse))


# ---------------------------------------------------------------- one process
def train_one_process(cfg, model, device, steps, batch, dtype=torch.float32, parts=1):
    """Trains `model` (moved to device/dtype) on the global batches (`parts` ranks' batches of
    `batch` each); returns the losses and the model."""
    model = model.to(device=device, dtype=dtype)
    opts = optimizers(model)
    losses = []
    for step in range(steps):
        dense, ids, clicks = global_batch(cfg, step, range(parts), batch)
        logits = model(dense.to(device, dtype), [jagged(b, device) for b in ids])
        loss = F.binary_cross_entropy_with_logits(logits, clicks.to(device, dtype))
        for o in opts:
            o.zero_grad()
        loss.backward()
        for o in opts:
            o.step()
        losses.append(loss.item())
    return losses, model


def params_of(model):
    """Name -> CPU float64 copy of every parameter, tables named table.t whatever holds them."""
    out = {f"dense.{name}": p.detach().cpu().double() for name, p in model.named_parameters() if not name.startswith("sparse.")}
    out.update({f"table.{t}": w.detach().cpu().double() for t, w in enumerate(table_weights(model))})
    return out


def max_diff(a, b):
    return max((a[k] - b[k]).abs().max().item() for k in a)


def one_process(args, cfg):
    sparse = Tables
    if args.torchrec:
        try:
            import torchrec  # noqa: F401
        except ImportError as e:
            raise SystemExit(f"--torchrec: {e}; install it beside torch 2.13 with\n    {INSTALL_TORCHREC}")
        sparse = TorchrecTables
    import torch_tpu

    torch_tpu.metrics.reset()
    t0 = time.perf_counter()
    with torch.tpu.precision("highest"):  # f32 matmuls (the default is one bf16 pass, as on a TPU)
        tpu_losses, tpu_model = train_one_process(cfg, build(cfg, sparse), "tpu", args.steps, args.batch)
    elapsed = time.perf_counter() - t0
    fallbacks = torch_tpu.metrics.fallback_ops()
    cpu_losses, cpu_model = train_one_process(cfg, build(cfg), "cpu", args.steps, args.batch)
    f64_losses, f64_model = train_one_process(cfg, build(cfg), "cpu", args.steps, args.batch, torch.float64)
    what = "torchrec EmbeddingBagCollection + KeyedJaggedTensor" if args.torchrec else "nn.EmbeddingBag over nested jagged ids"
    print(f"DLRM, {len(cfg.tables)} tables ({what}), batch {args.batch}, {args.steps} steps on tpu in {elapsed:.1f} s")
    print("losses tpu: " + ", ".join(f"{x:.5f}" for x in tpu_losses))
    print("losses cpu: " + ", ".join(f"{x:.5f}" for x in cpu_losses))
    mine = params_of(tpu_model)
    loss32 = max(abs(a - b) for a, b in zip(tpu_losses, cpu_losses))
    loss64 = max(abs(a - b) for a, b in zip(tpu_losses, f64_losses))
    p32, p64 = max_diff(mine, params_of(cpu_model)), max_diff(mine, params_of(f64_model))
    print(f"largest difference vs CPU float32: loss {loss32:.2e}, parameters {p32:.2e}; "
          f"vs CPU float64: loss {loss64:.2e}, parameters {p64:.2e}")
    print(f"CPU fallbacks on tpu: {fallbacks or 'none'}")
    ok = max(loss32, loss64) < 1e-5 and max(p32, p64) < 1e-5 and not fallbacks and tpu_losses[-1] < tpu_losses[0]
    print("ok: tpu training matches CPU" if ok else "FAILED: tpu training differs from CPU")
    return 0 if ok else 1


# ---------------------------------------------------------------- table-wise sharded, N ranks
class PooledAllToAll(torch.autograd.Function):
    """all_to_all_single of rows whose backward is the reverse exchange (torchrec's output dist)."""

    @staticmethod
    def forward(ctx, rows, send, recv):
        ctx.send, ctx.recv = send, recv
        out = rows.new_empty((sum(recv),) + rows.shape[1:])
        dist.all_to_all_single(out, rows.contiguous(), output_split_sizes=recv, input_split_sizes=send)
        return out

    @staticmethod
    def backward(ctx, grad):
        out = grad.new_empty((sum(ctx.send),) + grad.shape[1:])
        dist.all_to_all_single(out, grad.contiguous(), output_split_sizes=ctx.send, input_split_sizes=ctx.recv)
        return out, None, None


class ShardedTables(nn.Module):
    """Table-wise sharding: this rank keeps the tables t with t % world == rank (the others are
    dropped); forward takes this rank's samples' ids for every table and returns their pooled
    embeddings (batch, tables, dim), looked up by the owners."""

    def __init__(self, tables, rank, world):
        super().__init__()
        self.rank, self.world, self.n = rank, world, len(tables)
        self.owned = {p: [t for t in range(self.n) if t % world == p] for p in range(world)}
        self.tables = nn.ModuleDict({str(t): tables[t] for t in self.owned[rank]})

    def forward(self, ids):
        b, dev, mine = ids[0].offsets().numel() - 1, ids[0].values().device, self.owned[self.rank]
        # input dist: lengths, then ids, of each owner's tables (KJTAllToAll)
        lengths = torch.cat([ids[t].offsets().diff() for p in range(self.world) for t in self.owned[p]])
        got_lengths = torch.empty(self.world * len(mine) * b, dtype=torch.int64, device=dev)
        dist.all_to_all_single(got_lengths, lengths, output_split_sizes=[len(mine) * b] * self.world,
                               input_split_sizes=[len(self.owned[p]) * b for p in range(self.world)])
        send = [sum(ids[t].values().numel() for t in self.owned[p]) for p in range(self.world)]
        got_lengths = got_lengths.view(self.world, len(mine), b)
        recv = got_lengths.sum((1, 2)).tolist()
        got_ids = torch.empty(sum(recv), dtype=torch.int64, device=dev)
        dist.all_to_all_single(got_ids, torch.cat([ids[t].values() for p in range(self.world) for t in self.owned[p]]),
                               output_split_sizes=recv, input_split_sizes=send)
        # lookups: per owned table, the bags of every rank's samples (rank-major)
        per_table = got_lengths.sum(2)                                     # (world, owned tables)
        chunks = got_ids.split(per_table.flatten().tolist())               # rank-major, then table
        pooled = []
        for k, t in enumerate(mine):
            values = torch.cat([chunks[r * len(mine) + k] for r in range(self.world)])
            offsets = F.pad(got_lengths[:, k].flatten().cumsum(0), (1, 0))
            pooled.append(self.tables[str(t)](values, offsets).view(self.world, b, -1))
        # output dist: to each rank its samples' pooled embeddings, (owned tables, b, dim) per owner
        rows = torch.stack(pooled, 1).flatten(0, 2)
        got = PooledAllToAll.apply(rows, [len(mine) * b] * self.world, [len(self.owned[p]) * b for p in range(self.world)])
        parts = got.split([len(self.owned[p]) * b for p in range(self.world)])
        by_table = {}
        for p in range(self.world):
            for k, t in enumerate(self.owned[p]):
                by_table[t] = parts[p].view(len(self.owned[p]), b, -1)[k]
        return torch.stack([by_table[t] for t in range(self.n)], dim=1)


def train_sharded(cfg, steps, batch):
    """This rank's training: local batch part `rank`; returns the global losses and the model."""
    rank, world = dist.get_rank(), dist.get_world_size()
    model = build(cfg)
    if world > len(cfg.tables):
        raise SystemExit(f"{world} ranks for {len(cfg.tables)} tables: a rank would own none")
    model.sparse = ShardedTables(model.sparse.tables, rank, world)
    model = model.to("tpu")
    opts = optimizers(model)
    dense = dense_params(model)
    losses = []
    for step in range(steps):
        x, ids, clicks = make_batch(cfg, step, rank, batch)
        logits = model(x.to("tpu"), [jagged(b, "tpu") for b in ids])
        # the global loss is the mean over world * batch samples: each rank's share is its sum over that
        loss = F.binary_cross_entropy_with_logits(logits, clicks.to("tpu"), reduction="sum") / (world * batch)
        for o in opts:
            o.zero_grad()
        loss.backward()
        grads = torch.cat([p.grad.flatten() for p in dense])   # data parallel: one all_reduce of the dense grads
        dist.all_reduce(grads)
        for p, g in zip(dense, grads.split([p.numel() for p in dense])):
            p.grad.copy_(g.view_as(p))
        for o in opts:
            o.step()
        total = loss.detach().clone()
        dist.all_reduce(total)
        losses.append(total.item())
    return losses, model


def gather_params(cfg, model):
    """Every parameter, on every rank: the dense ones are replicated, each table comes from its owner."""
    rank, world = dist.get_rank(), dist.get_world_size()
    out = {f"dense.{name}": p.detach().cpu().double() for name, p in model.named_parameters() if not name.startswith("sparse.")}
    for t, (rows, _) in enumerate(cfg.tables):
        w = model.sparse.tables[str(t)].weight.detach().clone() if t % world == rank else torch.empty(rows, cfg.dim, device="tpu")
        dist.broadcast(w, src=t % world)
        out[f"table.{t}"] = w.cpu().double()
    return out


def distributed(args, cfg):
    torch.tpu.set_matmul_precision("highest")  # f32 matmuls: the comparison with float64 is then tight
    dist.init_process_group("tpu_dist")
    rank, world = dist.get_rank(), dist.get_world_size()
    t0 = time.perf_counter()
    losses, model = train_sharded(cfg, args.steps, args.batch)
    elapsed = time.perf_counter() - t0
    got = gather_params(cfg, model)
    status = 0
    if rank == 0:
        # one CPU process, float64, on the union of the ranks' batches
        want_losses, ref = train_one_process(cfg, build(cfg), "cpu", args.steps, args.batch, torch.float64, parts=world)
        want = params_of(ref)
        dl = max(abs(a - b) for a, b in zip(losses, want_losses))
        dp = max_diff(got, want)
        moved = max_diff(got, params_of(build(cfg)))  # training changed the parameters this much
        owners = ", ".join(f"rank {p}: tables {model.sparse.owned[p]}" for p in range(world))
        print(f"DLRM on {world} ranks, tables sharded table-wise ({owners}), batch {args.batch} per rank, "
              f"{args.steps} steps in {elapsed:.1f} s")
        print("losses:         " + ", ".join(f"{x:.5f}" for x in losses))
        print("one CPU float64: " + ", ".join(f"{x:.5f}" for x in want_losses))
        print(f"largest difference vs one CPU process (float64): loss {dl:.2e}, parameters {dp:.2e} "
              f"(training moved them up to {moved:.2e})")
        print(torch.tpu.metrics.short_report())
        ok = dl < 1e-5 and dp < 1e-5 and moved > 1e-2
        print("ok: sharded DLRM matches single-process training" if ok else "FAILED: sharded DLRM differs from one process")
        status = 0 if ok else 1
    dist.destroy_process_group()
    return status


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch", type=int, default=32, help="samples per step (per rank with --ranks)")
    p.add_argument("--ranks", type=int, default=0, help="train on this many ranks of tpu_dist (starts torchrun)")
    p.add_argument("--torchrec", action="store_true", help="one process, the sparse part a torchrec EmbeddingBagCollection")
    args = p.parse_args()
    cfg = Config()
    if "RANK" in os.environ:
        return distributed(args, cfg)
    if args.ranks:
        env = dict(os.environ, TPU_ACCELERATOR_TYPE=os.environ.get("TPU_ACCELERATOR_TYPE", f"v6e-{args.ranks}"),
                   OMP_NUM_THREADS="1")
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={args.ranks}", "--standalone", __file__,
               *sys.argv[1:]]
        return subprocess.call(cmd, env=env)
    return one_process(args, cfg)


if __name__ == "__main__":
    sys.exit(main())
