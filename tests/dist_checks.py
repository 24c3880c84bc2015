"""What tests/test_tpu_dist.py runs under torchrun on an emulated slice: every collective of
tpu_dist against a reference computed on CPU, then DDP, FSDP2, a DTensor tensor-parallel MLP and
an MPMD job training for a few steps with losses matching single-process training.

Usage: torchrun --nproc_per_node=4 tests/dist_checks.py [section ...] (default: all sections).
Every rank can compute every rank's inputs (seeded by rank), so each checks its own results."""
import datetime
import os
import sys

import torch
import torch.distributed as dist
from torch import nn

RANK = int(os.environ["RANK"])
WORLD = int(os.environ["WORLD_SIZE"])
DEV = torch.device("tpu")
DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int32, torch.int64, torch.uint8, torch.bool]


def fail(msg):
    raise AssertionError(f"rank {RANK}: {msg}")


def inputs(rank, shape, dtype, salt=0):
    """Rank `rank`'s input: small integers as floats, so sums are exact in every dtype."""
    g = torch.Generator().manual_seed(1000 * rank + salt)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    lo, hi = (0, 4) if dtype == torch.uint8 else (-3, 4)
    return torch.randint(lo, hi, shape, generator=g).to(dtype)


def expect_equal(got, want, what, exact=True):
    got = got.cpu()
    ok = torch.equal(got, want) if exact else torch.allclose(got.double(), want.double(), rtol=1e-2, atol=1e-2)
    if not ok:
        fail(f"{what}: got {got.flatten()[:8].tolist()}, want {want.flatten()[:8].tolist()}")


REDUCERS = {  # op -> (reference over the stacked inputs, dtypes it applies to)
    dist.ReduceOp.SUM: (lambda s: s.sum(0), "all"),
    dist.ReduceOp.AVG: (lambda s: s.mean(0), "float"),
    dist.ReduceOp.MAX: (lambda s: s.amax(0), "all"),
    dist.ReduceOp.MIN: (lambda s: s.amin(0), "all"),
    dist.ReduceOp.PRODUCT: (lambda s: s.prod(0), "all"),
}


def reference(op, stacked, dtype):
    if dtype == torch.bool:  # NCCL's: sum/max are any, product/min are all
        return stacked.any(0) if op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX) else stacked.all(0)
    return REDUCERS[op][0](stacked.double()).to(dtype)


def check_collectives():
    shape = (3, 5)
    for dtype in DTYPES:
        mine = inputs(RANK, shape, dtype)
        stacked = torch.stack([inputs(r, shape, dtype) for r in range(WORLD)])
        for op, (_, kinds) in REDUCERS.items():
            if kinds == "float" and not dtype.is_floating_point:
                continue
            t = mine.to(DEV)
            dist.all_reduce(t, op=op)
            expect_equal(t, reference(op, stacked, dtype), f"all_reduce {op} {dtype}", exact=dtype != torch.float16 or op != dist.ReduceOp.AVG)
        if dtype.is_floating_point:
            t = mine.to(DEV)
            dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))
            expect_equal(t, (stacked.double() * 0.5).sum(0).to(dtype), f"premul_sum {dtype}")
        # reduce to root 0, broadcast from root 2
        t = mine.to(DEV)
        dist.reduce(t, dst=0, op=dist.ReduceOp.SUM)
        if RANK == 0:
            expect_equal(t, reference(dist.ReduceOp.SUM, stacked, dtype), f"reduce {dtype}")
        t = mine.to(DEV)
        dist.broadcast(t, src=2)
        expect_equal(t, stacked[2], f"broadcast {dtype}")
        # all_gather: list and into one tensor
        outs = [torch.empty(shape, dtype=dtype, device=DEV) for _ in range(WORLD)]
        dist.all_gather(outs, mine.to(DEV))
        for r in range(WORLD):
            expect_equal(outs[r], stacked[r], f"all_gather {dtype} from {r}")
        out = torch.empty((WORLD * 3, 5), dtype=dtype, device=DEV)
        dist.all_gather_into_tensor(out, mine.to(DEV))
        expect_equal(out, stacked.reshape(WORLD * 3, 5), f"all_gather_into_tensor {dtype}")
        # reduce_scatter: each rank's input holds one block per rank
        blocks = [inputs(r, (WORLD, 4), dtype, salt=1) for r in range(WORLD)]
        out = torch.empty(4, dtype=dtype, device=DEV)
        dist.reduce_scatter_tensor(out, blocks[RANK].reshape(-1).to(DEV))
        want = reference(dist.ReduceOp.SUM, torch.stack([b[RANK] for b in blocks]), dtype)
        expect_equal(out, want, f"reduce_scatter_tensor {dtype}")
        out = torch.empty(4, dtype=dtype, device=DEV)
        dist.reduce_scatter(out, [b.to(DEV) for b in blocks[RANK]])
        expect_equal(out, want, f"reduce_scatter {dtype}")
        # gather to root 1, scatter from the last rank
        outs = [torch.empty(shape, dtype=dtype, device=DEV) for _ in range(WORLD)] if RANK == 1 else None
        dist.gather(mine.to(DEV), outs, dst=1)
        if RANK == 1:
            for r in range(WORLD):
                expect_equal(outs[r], stacked[r], f"gather {dtype} from {r}")
        out = torch.empty(shape, dtype=dtype, device=DEV)
        dist.scatter(out, [s.to(DEV) for s in stacked] if RANK == WORLD - 1 else None, src=WORLD - 1)
        expect_equal(out, stacked[RANK], f"scatter {dtype}")
    check_all_to_all()
    check_point_to_point()
    # async work: wait() and the future
    t = inputs(RANK, (7,), torch.float32).to(DEV)
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    fut = dist.all_reduce(t, async_op=True).get_future()
    res = fut.wait()[0]
    expect_equal(res, torch.stack([inputs(r, (7,), torch.float32) for r in range(WORLD)]).sum(0) * WORLD, "async all_reduce")
    u = torch.ones(5, device=DEV)
    if not dist.all_reduce(u, async_op=True).wait(timeout=datetime.timedelta(seconds=60)):  # the host waits
        fail("wait with a timeout")
    expect_equal(u, torch.full((5,), float(WORLD)), "all_reduce waited for with a timeout")
    dist.barrier()


def check_all_to_all():
    # even: 2 rows to each rank; uneven: rank r sends r + p + 1 rows to p
    rows = torch.arange(WORLD * 2 * 3, dtype=torch.float32).reshape(WORLD * 2, 3) + 100 * RANK
    out = torch.empty_like(rows, device=DEV)
    dist.all_to_all_single(out, rows.to(DEV))
    want = torch.cat([(torch.arange(WORLD * 2 * 3, dtype=torch.float32).reshape(WORLD * 2, 3) + 100 * r)[2 * RANK:2 * RANK + 2]
                      for r in range(WORLD)])
    expect_equal(out, want, "all_to_all_single even")
    send = [RANK + p + 1 for p in range(WORLD)]
    recv = [r + RANK + 1 for r in range(WORLD)]
    data = torch.cat([torch.full((send[p], 2), float(10 * RANK + p)) for p in range(WORLD)])
    out = torch.empty((sum(recv), 2), device=DEV)
    dist.all_to_all_single(out, data.to(DEV), output_split_sizes=recv, input_split_sizes=send)
    want = torch.cat([torch.full((recv[r], 2), float(10 * r + RANK)) for r in range(WORLD)])
    expect_equal(out, want, "all_to_all_single uneven")
    ins = [torch.full((p + 1,), float(RANK), device=DEV, dtype=torch.bfloat16) for p in range(WORLD)]
    outs = [torch.empty(RANK + 1, device=DEV, dtype=torch.bfloat16) for _ in range(WORLD)]
    dist.all_to_all(outs, ins)
    for r in range(WORLD):
        expect_equal(outs[r], torch.full((RANK + 1,), float(r), dtype=torch.bfloat16), f"all_to_all from {r}")


def check_point_to_point():
    nxt, prv = (RANK + 1) % WORLD, (RANK - 1) % WORLD
    # a ring both ways at once, larger than a channel: batch_isend_irecv progresses them together
    big = torch.arange(600_000, dtype=torch.float32) + RANK
    got = torch.empty_like(big, device=DEV)
    small = torch.empty(3, dtype=torch.int64, device=DEV)
    ops = [dist.P2POp(dist.isend, big.to(DEV), nxt), dist.P2POp(dist.irecv, got, prv),
           dist.P2POp(dist.isend, torch.full((3,), RANK, device=DEV), prv), dist.P2POp(dist.irecv, small, nxt)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    expect_equal(got, torch.arange(600_000, dtype=torch.float32) + prv, "batch_isend_irecv ring")
    expect_equal(small, torch.full((3,), nxt), "batch_isend_irecv reverse ring")
    # plain send/recv between pairs (an odd world's last rank has none)
    t = torch.full((4,), float(RANK), device=DEV)
    if RANK % 2 == 0 and RANK + 1 < WORLD:
        dist.send(t, RANK + 1)
        dist.recv(t, RANK + 1)
        expect_equal(t, torch.full((4,), float(RANK + 1)), "send/recv")
    elif RANK % 2:
        r = torch.empty(4, device=DEV)
        dist.recv(r, RANK - 1)
        dist.send(t, RANK - 1)
        expect_equal(r, torch.full((4,), float(RANK - 1)), "send/recv")


# ---------------------------------------------------------------- training
STEPS = 5


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4))


def batch(step, rank, n=8):
    g = torch.Generator().manual_seed(100 * step + rank)
    return torch.randn(n, 16, generator=g), torch.randn(n, 4, generator=g)


def reference_training(ranks):
    """Single-process training on the union of the ranks' batches, on CPU in float64: the losses
    per step and the trained model."""
    model = mlp().double()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for step in range(STEPS):
        xs, ys = zip(*(batch(step, r) for r in ranks))
        loss = nn.functional.mse_loss(model(torch.cat(xs).double()), torch.cat(ys).double())
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, model


def reference_losses(ranks):
    return reference_training(ranks)[0]


def train(model, ranks, group=None, batch_rank=None, foreach=None):
    """Steps of SGD; returns the global loss per step. Data parallel over `ranks` (the global loss
    is the mean of theirs), or, with batch_rank, every rank on that rank's batch (tensor parallel:
    each rank's loss is the global one)."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1, foreach=foreach)
    losses = []
    for step in range(STEPS):
        x, y = batch(step, RANK if batch_rank is None else batch_rank)
        loss = nn.functional.mse_loss(model(x.to(DEV)), y.to(DEV))
        opt.zero_grad()
        loss.backward()
        opt.step()
        total = loss.detach().clone()
        if batch_rank is None:
            dist.all_reduce(total, group=group)
        losses.append(total.item() / (len(ranks) if batch_rank is None else 1))
    return losses


def expect_losses(got, want, what):
    for step, (g, w) in enumerate(zip(got, want)):
        if abs(g - w) > 2e-5 * max(1.0, abs(w)):
            fail(f"{what}: step {step} loss {g:.6f}, single-process training {w:.6f}")


def check_ddp():
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = DDP(mlp().to(DEV))
    expect_losses(train(model, range(WORLD)), reference_losses(range(WORLD)), "DDP")


def check_fsdp2():
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("tpu", (WORLD,))
    model = mlp().to(DEV)
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    expect_losses(train(model, range(WORLD)), reference_losses(range(WORLD)), "FSDP2")


def check_tensor_parallel():
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = init_device_mesh("tpu", (WORLD,))
    model = parallelize_module(mlp().to(DEV), mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    # every rank sees the same batch (rank 0's): tensor parallelism splits the model, not the data.
    # The last layer is not parallelized: its plain tensors and the DTensors cannot share one foreach.
    expect_losses(train(model, [0], batch_rank=0, foreach=False), reference_losses([0]), "tensor parallel")


def check_mpmd():
    """Rank 0 evaluates and logs while ranks 1.. train in a subgroup, then receives the weights."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    trainers = list(range(1, WORLD))
    sub = dist.new_group(trainers)
    model = mlp().to(DEV)
    if RANK == 0:
        x, y = batch(99, 0)
        before = nn.functional.mse_loss(model(x.to(DEV)), y.to(DEV)).item()
        for p in model.parameters():
            dist.recv(p.data, src=1)
        after = nn.functional.mse_loss(model(x.to(DEV)), y.to(DEV)).item()
        ref = reference_training(trainers)[1]
        want = nn.functional.mse_loss(ref(x.double()), y.double()).item()
        if abs(after - want) > 2e-5 * max(1.0, want) or after == before:
            fail(f"MPMD: evaluated {after:.6f} after training (before {before:.6f}), single-process {want:.6f}")
    else:
        ddp = DDP(model, process_group=sub)
        expect_losses(train(ddp, trainers, group=sub), reference_losses(trainers), "MPMD trainers")
        if RANK == 1:
            for p in model.parameters():
                dist.send(p.data, dst=0)
    dist.barrier()


def check_metrics():
    """torch.tpu.metrics counts each collective, its bytes, and prices it on the generation's ICI."""
    from torch_tpu import _C

    torch.tpu.metrics.reset()
    x = torch.ones(1 << 18, device=DEV)  # 1 MiB
    dist.all_reduce(x)
    dist.broadcast(x, src=0)
    got = torch.tpu.metrics.collectives()
    ar = got.get("all_reduce")
    if not ar or ar["calls"] != 1 or ar["bytes"] != 1 << 20 or ar["seconds"] <= 0:
        fail(f"metrics: all_reduce {ar}")
    generation = os.environ["TPU_ACCELERATOR_TYPE"].split("-")[0]
    want = _C._collective_cost(generation, "all_reduce", 1 << 20, [WORLD], [1])["seconds"]
    if abs(ar["ici_seconds"] - want) > 1e-12 or got["broadcast"]["ici_seconds"] is not None:
        fail(f"metrics: ICI seconds {ar['ici_seconds']} (cost model {want}), broadcast {got['broadcast']}")


SECTIONS = {"collectives": check_collectives, "metrics": check_metrics, "ddp": check_ddp, "fsdp2": check_fsdp2,
            "tp": check_tensor_parallel, "mpmd": check_mpmd}


def main():
    # f32 matmuls (the default is one bf16 pass, as on a TPU): losses then compare to float64 tightly
    torch.tpu.set_matmul_precision("highest")
    dist.init_process_group("tpu_dist")
    for name in sys.argv[1:] or SECTIONS:
        SECTIONS[name]()
        if RANK == 0:
            print(f"ok {name}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
