"""The dry run: what a training step or a serving workload would take on a TPU slice, decided
before any chip is rented. The model runs on fake tensors on the tpu device (nothing is
allocated, nothing computed); every ATen call it issues is priced by the runtime's cost model
(torch_tpu.cost, runtime/src/cost.c), and the step is composed from those calls, the slice's
collectives and the memory each chip holds.

    python -m torch_tpu dryrun --config-json '{"model_type": "llama", ...}' --slice v6e-256 \\
        --seq 4096 --global-batch 1024 [--fsdp N --tp N --ep N --remat full|none] [--json]

How a step is composed (the formulas of single ops and collectives are in runtime/src/cost.c):
  - The whole model runs on the batch of one tensor-parallel group (global batch x tp / chips
    sequences); a chip does 1/tp of that work (heads and MLP widths split tp ways).
  - Each call's time is its roofline with the calibration below; the step is their sum
    (forward, backward, the forward again under full activation checkpointing, AdamW over the
    chip's shard of the parameters).
  - FSDP (the default: every chip, as MaxText's recipes) all-gathers each layer's bf16 weights
    in the forward and again in the backward and reduce-scatters its f32 gradients; tensor
    parallelism all-reduces each layer's activations twice each way. XLA overlaps both with
    the matmuls (async collectives, collective matmul), so only what exceeds the compute time
    is added. Expert parallelism all-to-alls each MoE layer's tokens twice each way: the
    experts wait for their tokens, so that is added in full.
  - Memory per chip: f32 parameters, f32 gradients and AdamW's two f32 moments over the
    parameter shard; activations (measured: the bytes autograd saves in the traced step, or
    with per-layer checkpointing each layer's input plus one layer's saved tensors); two
    layers of gathered bf16 weights for the collectives.
  - MFU (MaxText's definition): the matrix-unit FLOPs of forward and backward at their true
    sizes (causal attention counts half) over step time x the chip's published peak.

Two calibration constants, shared by every generation and model, fitted once against the
published runs in specs/published_runs.json (the README's validation table is
`python -m torch_tpu dryrun --validate`):"""
import argparse
import contextlib
import json
import math
import sys
import time
from pathlib import Path

import torch

import torch_tpu
from torch_tpu.cost import CostRecorder

# The share of the padded MXU roofline that XLA's matmuls reach in a real step.
MXU_EFFICIENCY = 0.70
# The share of op-by-op HBM traffic of non-matmul ops left once XLA fuses them into their
# neighbours (an eager trace reads and writes every intermediate).
FUSED_TRAFFIC = 0.5

SPECS = Path(__file__).resolve().parent / "specs"


def _specs(name):
    return json.loads((SPECS / name).read_text())


# ---------------------------------------------------------------- slices
class Slice:
    """A TPU slice by its accelerator type name: chips, TensorCores, torus shape, wraparound."""

    def __init__(self, name):
        self.name = name
        self.info = torch_tpu._C._generation_info(name)  # ValueError for an unknown generation
        self.generation = self.info["generation"]
        spec = _specs("tpu_specs.json")["generations"][self.generation]
        if not name.rpartition("-")[2].isdigit():  # the runtime checks the size a generation comes in
            raise ValueError(f"slice '{name}': expected <generation>-<count>, e.g. v6e-256 or tpu7x-16384")
        self.chips = self.info["slice_chips"]
        self.tensorcores = self.chips * spec["tensorcores"]
        self.dims = [int(d) for d in self.info["topology"].split("x")]  # as the emulated chips lay it out
        # 3-D generations close an axis into a ring in whole cubes of 4; v5e/v6e only in a full 16 x 16 pod
        self.wraps = [d >= 4 and d % 4 == 0 if len(self.dims) == 3 else d == 16 for d in self.dims]
        self.peak_flops = self.info["bf16_tflops"] * 1e12
        self.usd_per_chip_hour = spec.get("usd_per_chip_hour")
        self.notes = set()

    def group(self, size):
        """The torus axes a group of `size` consecutive chips spans, largest first."""
        axes, wraps, left = [], [], size
        for d, w in sorted(zip(self.dims, self.wraps), reverse=True):
            if left <= 1:
                break
            take = min(d, left)
            axes.append(take)
            wraps.append(int(w and take == d))
            left = max(1, left // take)
        return axes, wraps

    def collective(self, kind, nbytes, group_size):
        if group_size <= 1 or nbytes <= 0:
            return 0.0
        axes, wraps = self.group(group_size)
        try:
            return torch_tpu._C._collective_cost(self.generation, kind, int(nbytes), axes, wraps)["seconds"]
        except NotImplementedError as e:  # a figure the specs lack: said in the report, not guessed
            self.notes.add(f"{e}; collectives counted as free")
            return 0.0


# ---------------------------------------------------------------- models on fake tensors
MOE_KEYS = ("num_experts", "num_local_experts", "n_routed_experts")


FLASH = "tpu_attention"  # no "flash" in it: transformers would look for a flash-attn kernel


def _flash_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    """Attention as a TPU's flash (splash) kernel runs it: causal over the block, key/value
    heads shared by their query heads without copies, no mask tensor."""
    causal = query.shape[2] > 1 and query.shape[2] == key.shape[2]
    out = torch.nn.functional.scaled_dot_product_attention(query, key, value, dropout_p=dropout, scale=scaling,
                                                           is_causal=causal, enable_gqa=True)
    return out.transpose(1, 2).contiguous(), None


def _register_flash():
    """transformers' public registries for attention and its masks. On fake tensors transformers
    cannot read the data that tells it a causal mask is not needed, so its own sdpa path would
    build the mask and copy the key/value heads: a cost a real TPU step does not pay."""
    from transformers import AttentionInterface, AttentionMaskInterface

    AttentionInterface.register(FLASH, _flash_attention)
    AttentionMaskInterface.register(FLASH, lambda *args, **kwargs: None)


def build_model(config, dtype=torch.bfloat16):
    """A transformers causal LM from AutoConfig fields, its parameters fake tensors on tpu."""
    import transformers

    _register_flash()

    fields = {k: v for k, v in config.items() if not k.startswith("_") and k not in ("note", "maxtext")}
    cfg = transformers.AutoConfig.for_model(**fields)
    cfg.use_cache = False
    kwargs = {"dtype": dtype, "attn_implementation": FLASH}
    if any(cfg.to_dict().get(k) for k in MOE_KEYS):
        kwargs["experts_implementation"] = "grouped_mm"  # static shapes: routing needs no data
    return transformers.AutoModelForCausalLM.from_config(cfg, **kwargs)


@contextlib.contextmanager
def fake_tpu():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(allow_non_fake_inputs=True), torch.device("tpu"):
        yield


def _calibrated(ops, mxu_speedup=1.0):
    """Step seconds of recorded calls: the MXU at MXU_EFFICIENCY (mxu_speedup: the peak of a
    narrower precision over bf16's), fused non-matmul traffic."""
    total = 0.0
    for op in ops:
        if op.mxu_flops:
            total += max(op.mxu_seconds / (MXU_EFFICIENCY * mxu_speedup), op.hbm_seconds)
        else:
            total += max(op.vpu_seconds, op.hbm_seconds * FUSED_TRAFFIC)
    return total


def _count_params(model):
    return sum(p.numel() for p in model.parameters())


def trace_training_step(model, batch, seq, generation):
    """Forward, backward and AdamW of one chip's step on fake tensors, and the activation
    bytes autograd saves (parameters excluded)."""
    from torch.multiprocessing.reductions import StorageWeakRef

    params = {StorageWeakRef(p.untyped_storage()).cdata for p in model.parameters()}
    saved = {}

    def pack(t):
        key = StorageWeakRef(t.untyped_storage()).cdata
        if key not in params:
            saved[key] = t.untyped_storage().nbytes()
        return t

    ids = torch.zeros(batch, seq, dtype=torch.long)
    rec = CostRecorder(generation)
    with rec:
        with rec.phase("forward"), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = model(input_ids=ids, labels=ids).loss
        with rec.phase("backward"):
            loss.backward()
    return rec, sum(saved.values())


def trace_optimizer(nparams, generation):
    """AdamW's update of a chip's parameter shard (f32), on one fake flat tensor."""
    rec = CostRecorder(generation)
    n = max(1, int(nparams))
    p = torch.nn.Parameter(torch.empty(n, dtype=torch.float32))
    p.grad = torch.empty(n, dtype=torch.float32)
    opt = torch.optim.AdamW([p], lr=1e-4, foreach=True)
    with rec, rec.phase("optimizer"):
        opt.step()
    return rec


def _moe_fields(config):
    experts = next((config[k] for k in MOE_KEYS if config.get(k)), 0)
    return experts, config.get("num_experts_per_tok", 0)


PRECISIONS = {"bf16": None, "int8": "int8_tops", "fp8": "fp8_tflops"}


def _mxu_speedup(sl, precision):
    if precision not in PRECISIONS:
        raise ValueError(f"precision {precision}: expected one of {', '.join(PRECISIONS)}")
    key = PRECISIONS[precision]
    if key is None:
        return 1.0
    peak = _specs("tpu_specs.json")["generations"][sl.generation].get(key)
    if not peak:
        raise ValueError(f"{sl.generation} has no published {precision} peak (tpu_specs.json)")
    return peak / sl.info["bf16_tflops"]


def estimate_training(config, slice_name, seq, global_batch, fsdp=None, tp=1, ep=1, remat="full", precision="bf16"):
    """A training step (forward, backward, AdamW) of `config` on a slice: see the module doc."""
    sl = Slice(slice_name)
    tp, ep = int(tp), int(ep)
    if sl.chips % (tp * ep):
        raise ValueError(f"tp x ep = {tp * ep} does not divide the slice's {sl.chips} chips")
    data = sl.chips // tp  # chips the batch is split over (FSDP, and EP's share of it)
    fsdp = int(fsdp) if fsdp else data // ep
    if fsdp * ep * tp != sl.chips:
        raise ValueError(f"fsdp x tp x ep = {fsdp} x {tp} x {ep} = {fsdp * tp * ep}, the slice has {sl.chips} chips")
    if remat not in ("full", "none"):
        raise ValueError(f"--remat {remat}: expected full (per-layer activation checkpointing) or none")
    speedup = _mxu_speedup(sl, precision)
    per_chip = global_batch / data
    traced = max(1, math.ceil(per_chip))
    scale = per_chip / traced / tp
    started = time.perf_counter()
    with fake_tpu():
        model = build_model(config)
        layer_params = _count_params(model) / tp  # one tensor-parallel rank's parameters
        rec, saved_bytes = trace_training_step(model, traced, seq, sl.generation)
        opt = trace_optimizer(layer_params / (fsdp * ep), sl.generation)
    layers = config.get("num_hidden_layers") or config.get("n_layer") or 1
    hidden = config.get("hidden_size") or config.get("n_embd")
    fwd = [o for o in rec.ops if o.phase == "forward"]
    bwd = [o for o in rec.ops if o.phase == "backward"]
    t_fwd, t_bwd = _calibrated(fwd, speedup) * scale, _calibrated(bwd, speedup) * scale
    t_remat = t_fwd if remat == "full" else 0.0
    t_opt = _calibrated(opt.ops)
    compute = t_fwd + t_bwd + t_remat + t_opt

    shard = layer_params / (fsdp * ep)
    fsdp_group = fsdp * ep
    t_fsdp = 2 * sl.collective("all_gather", layer_params * 2, fsdp_group) + sl.collective("reduce_scatter", layer_params * 4, fsdp_group)
    passes = 3 if remat == "full" else 2  # forward, backward, and the checkpointed forward again
    act = per_chip * seq * hidden * 2
    t_tp = layers * 2 * passes * sl.collective("all_reduce", act, tp) if tp > 1 else 0.0
    experts, topk = _moe_fields(config)
    t_ep = layers * 2 * passes * sl.collective("all_to_all", act * topk, ep) if ep > 1 and experts else 0.0
    exposed = max(0.0, t_fsdp + t_tp - compute)
    step = compute + exposed + t_ep

    model_flops = (rec.totals("forward")["gemm_flops"] + rec.totals("backward")["gemm_flops"]) * scale
    if remat == "full":
        activations = layers * per_chip * seq * hidden * 2 + saved_bytes * scale / layers
    else:
        activations = saved_bytes * scale
    memory = {
        "parameters": shard * 4,
        "gradients": shard * 4,
        "optimizer_state": shard * 8,
        "activations": activations,
        "collective_buffers": 2 * (layer_params / layers) * 2,
    }
    hbm = sum(memory.values())
    tokens = global_batch * seq
    price = sl.usd_per_chip_hour
    usd_step = sl.chips * price * step / 3600 if price else None
    return {
        "workload": "training",
        "slice": sl.name,
        "generation": sl.generation,
        "chips": sl.chips,
        "tensorcores": sl.tensorcores,
        "topology": "x".join(map(str, sl.dims)),
        "parallelism": {"fsdp": fsdp, "tp": tp, "ep": ep, "remat": remat, "sequences_per_chip": per_chip},
        "precision": precision,
        "params": layer_params * tp,
        "step_time_s": step,
        "step_breakdown_s": {"forward": t_fwd, "backward": t_bwd, "recompute": t_remat, "optimizer": t_opt,
                             "fsdp_collectives": t_fsdp, "tp_collectives": t_tp, "exposed_collectives": exposed,
                             "ep_collectives": t_ep},
        "tokens_per_s_per_chip": tokens / step / sl.chips,
        "tokens_per_s_per_tensorcore": tokens / step / sl.tensorcores,
        "mfu": model_flops / (step * sl.peak_flops),
        "hbm_per_chip_bytes": hbm,
        "hbm_breakdown_bytes": memory,
        "hbm_capacity_bytes": sl.info["hbm_bytes"],
        "fits": hbm <= sl.info["hbm_bytes"],
        "usd_per_step": usd_step,
        "usd_per_mtok": usd_step / (tokens / 1e6) if usd_step else None,
        "notes": sorted(sl.notes),
        "traced_calls": len(rec.ops) + len(opt.ops),
        "unmodelled_calls": dict(rec.unmodelled),
        "dryrun_seconds": time.perf_counter() - started,
        "_ops": rec.ops + opt.ops,
        "_scale": scale,
        "_model_flops": model_flops,
        "_collectives": {"fsdp": (layer_params, fsdp_group), "tp": (act, tp, layers * 2 * passes),
                         "ep": (act * topk, ep, layers * 2 * passes) if ep > 1 and experts else None},
    }


def estimate_serving(config, slice_name, batch, input_len, output_len, tp=None):
    """Serving on a slice, the model in bf16 split over tp chips (default: the whole slice):
    time to first token (the prefill of a batch), time per output token (one decode step with
    the KV cache half way through the output), tokens/s and $ per million output tokens."""
    sl = Slice(slice_name)
    tp = int(tp or sl.chips)
    replicas = sl.chips // tp
    started = time.perf_counter()
    with fake_tpu():
        model = build_model(config)
        model.config.use_cache = True
        rank_params = _count_params(model) / tp
        prefill = CostRecorder(sl.generation)
        ids = torch.zeros(batch, input_len, dtype=torch.long)
        with torch.no_grad():
            with prefill:
                model(input_ids=ids)
            ctx = input_len + output_len // 2
            out = model(input_ids=torch.zeros(batch, ctx, dtype=torch.long), use_cache=True)
            decode = CostRecorder(sl.generation)
            with decode:
                model(input_ids=torch.zeros(batch, 1, dtype=torch.long), past_key_values=out.past_key_values, use_cache=True)
    layers = config.get("num_hidden_layers") or 1
    hidden = config["hidden_size"]
    ttft = _calibrated(prefill.ops) / tp + layers * 2 * sl.collective("all_reduce", batch * input_len * hidden * 2, tp)
    tpot = _calibrated(decode.ops) / tp + layers * 2 * sl.collective("all_reduce", batch * hidden * 2, tp)
    heads = config.get("num_attention_heads", 1)
    head_dim = config.get("head_dim") or hidden // heads
    kv = layers * 2 * batch * (input_len + output_len) * max(1, config.get("num_key_value_heads", heads) // tp) * head_dim * 2
    hbm = rank_params * 2 + kv
    tokens_per_s = batch * replicas / tpot
    price = sl.usd_per_chip_hour
    return {
        "workload": "serving",
        "slice": sl.name,
        "generation": sl.generation,
        "chips": sl.chips,
        "tp": tp,
        "batch": batch,
        "ttft_s": ttft,
        "tpot_s": tpot,
        "tokens_per_s": tokens_per_s,
        "tokens_per_s_per_chip": tokens_per_s / sl.chips,
        "hbm_per_chip_bytes": hbm,
        "hbm_capacity_bytes": sl.info["hbm_bytes"],
        "fits": hbm <= sl.info["hbm_bytes"],
        "usd_per_mtok": sl.chips * price / 3600 / tokens_per_s * 1e6 if price else None,
        "dryrun_seconds": time.perf_counter() - started,
        "_ops": decode.ops,
    }


# ---------------------------------------------------------------- torchtitan configs
# torchtitan's llama3 flavors (torchtitan/models/llama3/__init__.py): its ModelArgs fields.
TITAN_LLAMA3 = {
    "debugmodel": {"dim": 256, "n_layers": 8, "n_heads": 16},
    "8B": {"dim": 4096, "n_layers": 32, "n_heads": 32, "n_kv_heads": 8, "ffn_dim_multiplier": 1.3, "multiple_of": 1024},
    "70B": {"dim": 8192, "n_layers": 80, "n_heads": 64, "n_kv_heads": 8, "ffn_dim_multiplier": 1.3, "multiple_of": 4096},
    "405B": {"dim": 16384, "n_layers": 126, "n_heads": 128, "n_kv_heads": 8, "ffn_dim_multiplier": 1.2, "multiple_of": 4096},
}


def titan_workload(path, chips):
    """A torchtitan job file (TOML: [model] name/flavor, [training] local_batch_size/
    global_batch_size/seq_len, [parallelism], [activation_checkpoint] mode) as the dry run's
    arguments: (AutoConfig fields, keyword arguments of estimate_training, notes)."""
    import tomllib

    job = tomllib.loads(Path(path).read_text())
    model, training = job.get("model", {}), job.get("training", {})
    par, ac = job.get("parallelism", {}), job.get("activation_checkpoint", {})
    if model.get("name", "llama3") != "llama3" or model.get("flavor", "debugmodel") not in TITAN_LLAMA3:
        raise ValueError(f"{path}: model {model.get('name')}/{model.get('flavor')}: the dry run knows torchtitan's llama3 "
                         f"flavors {', '.join(TITAN_LLAMA3)}")
    a = {"multiple_of": 256, "ffn_dim_multiplier": None, "vocab_size": 128256, **TITAN_LLAMA3[model.get("flavor", "debugmodel")]}
    hidden = int(2 * 4 * a["dim"] / 3)  # torchtitan's FeedForward width
    if a["ffn_dim_multiplier"]:
        hidden = int(a["ffn_dim_multiplier"] * hidden)
    hidden = a["multiple_of"] * math.ceil(hidden / a["multiple_of"])
    config = {"model_type": "llama", "hidden_size": a["dim"], "intermediate_size": hidden, "num_hidden_layers": a["n_layers"],
              "num_attention_heads": a["n_heads"], "num_key_value_heads": a.get("n_kv_heads", a["n_heads"]),
              "vocab_size": a["vocab_size"], "rope_theta": 500000.0}
    tp = int(par.get("tensor_parallel_degree", 1))
    data = chips // tp
    local = training.get("local_batch_size", training.get("batch_size", 8))
    global_batch = training.get("global_batch_size", -1)
    mode = ac.get("mode", "selective")
    notes = [f"activation checkpointing '{mode}' priced as full per-layer checkpointing"] if mode == "selective" else []
    return config, {"seq": training.get("seq_len", 2048), "global_batch": global_batch if global_batch > 0 else local * data,
                    "tp": tp, "remat": "none" if mode == "none" else "full"}, notes


# ---------------------------------------------------------------- other accelerators
def compare_accelerators(result):
    """The same traced training step on NVIDIA and AWS chips from their public figures
    (specs/accelerators.json), as many chips as the TPU slice: each call's roofline with that
    chip's peak and HBM bandwidth and the same two calibration constants (no MXU padding);
    FSDP collectives over NVLink inside a scale-up domain, the scale-out network beyond. These
    are predictions, not validated against published runs."""
    rows = []
    scale = result["_scale"]
    params, group = result["_collectives"]["fsdp"]
    for name, a in _specs("accelerators.json")["accelerators"].items():
        peak, bw = a["bf16_tflops"] * 1e12, a["hbm_GBps"] * 1e9
        compute = 0.0
        fwd = 0.0
        for op in result["_ops"]:
            s = scale if op.phase != "optimizer" else 1.0
            if op.mxu_flops:
                t = max(op.flops / (peak * MXU_EFFICIENCY), op.hbm_bytes / bw) * s
            else:
                t = op.hbm_bytes * FUSED_TRAFFIC / bw * s
            compute += t
            fwd += t if op.phase == "forward" else 0.0
        if result["parallelism"]["remat"] == "full":
            compute += fwd
        link = (a["interconnect_GBps"] / 2 if group <= a["scaleup_domain_chips"] else a["scaleout_GBps_per_chip"]) * 1e9
        fsdp = 3 * params * 2 / link if group > 1 else 0.0  # ring: each chip moves about the whole array
        step = compute + max(0.0, fsdp - compute)
        flops = result["_model_flops"]
        tokens = result["tokens_per_s_per_chip"] * result["step_time_s"] * result["chips"]
        price = a.get("usd_per_chip_hour")
        usd = result["chips"] * price * step / 3600 if price else None
        rows.append({"accelerator": name, "chips": result["chips"], "step_time_s": step, "mfu": flops / (step * peak),
                     "fits": result["hbm_per_chip_bytes"] <= a["hbm_bytes"], "usd_per_mtok": usd / (tokens / 1e6) if usd else None})
    return rows


# ---------------------------------------------------------------- reports
def _gib(n):
    return f"{n / 2**30:.1f} GiB"


def _usd(x):
    if x is None:
        return "price not published"
    return f"${x:,.3f}" if x >= 0.01 else f"${x:.2g}"


def format_training(r, gpus=None):
    b = r["step_breakdown_s"]
    m = r["hbm_breakdown_bytes"]
    p = r["parallelism"]
    lines = [
        f"dry run: training step on {r['slice']} ({r['chips']} chips, {r['tensorcores']} TensorCores, torus {r['topology']}), "
        f"{r['params'] / 1e9:.2f} B parameters",
        f"  parallelism: FSDP {p['fsdp']} x TP {p['tp']} x EP {p['ep']}, remat {p['remat']}, "
        f"{p['sequences_per_chip']:g} sequences per chip",
        f"  step time        {r['step_time_s']:.3f} s   (forward {b['forward']:.3f}, backward {b['backward']:.3f}, "
        f"recompute {b['recompute']:.3f}, optimizer {b['optimizer']:.3f}; collectives FSDP {b['fsdp_collectives']:.3f} "
        f"and TP {b['tp_collectives']:.3f} overlapped, {b['exposed_collectives']:.3f} exposed; EP {b['ep_collectives']:.3f})",
        f"  tokens/s         {r['tokens_per_s_per_chip']:,.0f} per chip, {r['tokens_per_s_per_tensorcore']:,.0f} per TensorCore",
        f"  MFU              {r['mfu'] * 100:.1f}% (per chip and per TensorCore alike)",
        f"  HBM per chip     {_gib(r['hbm_per_chip_bytes'])} of {_gib(r['hbm_capacity_bytes'])}: "
        + ", ".join(f"{k.replace('_', ' ')} {_gib(v)}" for k, v in m.items())
        + f" -> {'fits' if r['fits'] else 'DOES NOT FIT'}",
        f"  cost             {_usd(r['usd_per_step'])} per step, {_usd(r['usd_per_mtok'])} per million tokens (on demand)",
        f"  traced {r['traced_calls']} calls on fake tensors in {r['dryrun_seconds']:.1f} s"
        + (f"; priced by bytes only: {r['unmodelled_calls']}" if r["unmodelled_calls"] else ""),
    ] + [f"  note: {n}" for n in r["notes"]]
    if gpus:
        lines.append(f"  same step on {r['chips']} other accelerators (predictions from public specs, not validated):")
        lines.append(f"    {'chip':8} {'step s':>9} {'MFU':>6} {'fits':>5} {'$/Mtok':>10}")
        for name, g in [(r["generation"], r)] + [(g["accelerator"], g) for g in gpus]:
            usd = f"{g['usd_per_mtok']:.3f}" if g["usd_per_mtok"] is not None else "n/a"
            lines.append(f"    {name:8} {g['step_time_s']:>9.3f} {g['mfu'] * 100:>5.1f}% {str(g['fits']):>5} {usd:>10}")
    return "\n".join(lines)


def format_serving(r):
    return "\n".join([
        f"dry run: serving on {r['slice']} ({r['chips']} chips, TP {r['tp']}), batch {r['batch']}",
        f"  time to first token   {r['ttft_s'] * 1e3:.1f} ms",
        f"  time per output token {r['tpot_s'] * 1e3:.2f} ms",
        f"  throughput            {r['tokens_per_s']:,.0f} tokens/s ({r['tokens_per_s_per_chip']:,.0f} per chip)",
        f"  HBM per chip          {_gib(r['hbm_per_chip_bytes'])} of {_gib(r['hbm_capacity_bytes'])} -> "
        f"{'fits' if r['fits'] else 'DOES NOT FIT'}",
        f"  cost                  {_usd(r['usd_per_mtok'])} per million output tokens (on demand)",
    ])


def public(r):
    return {k: v for k, v in r.items() if not k.startswith("_")}


def validate():
    """Predicted against published figures for every run in specs/published_runs.json."""
    rows = []
    for run in _specs("published_runs.json")["runs"]:
        s = run.get("sharding") or {}
        # MaxText's "minimal" policy keeps every matmul output: nothing costly is recomputed
        remat = "none" if run.get("remat") == "minimal" else "full"
        r = estimate_training(run["model"], run["slice"], run["seq_len"], run["global_batch_sequences"],
                              tp=s.get("tp") or 1, ep=s.get("ep") or 1, remat=remat, precision=run.get("precision", "bf16"))
        pub = run["published"]
        if pub.get("step_time_s"):
            metric, want, got = "step_time_s", pub["step_time_s"], r["step_time_s"]
        elif pub.get("mfu"):
            metric, want, got = "mfu", pub["mfu"], r["mfu"]
        else:
            metric, want, got = "tokens_per_s_per_chip", pub["tokens_per_s_per_chip"], r["tokens_per_s_per_chip"]
        rows.append({"name": run["name"], "generation": r["generation"], "metric": metric, "published": want,
                     "predicted": got, "error": got / want - 1, "source": run["source"]})
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m torch_tpu dryrun", description=__doc__.splitlines()[0])
    ap.add_argument("--config-json", help="AutoConfig fields as JSON (model_type required)")
    ap.add_argument("--config", help="a file with those fields (JSON)")
    ap.add_argument("--titan-toml", help="a torchtitan job file (llama3 flavors): model, batch, sequence, TP, checkpointing")
    ap.add_argument("--script", help="a training script to run on fake tpu tensors (its arguments after --)")
    ap.add_argument("--steps", type=int, default=3, help="--script: optimizer steps to record")
    ap.add_argument("--tokens-per-step", type=int, help="--script: tokens one chip's step processes")
    ap.add_argument("--slice", help="accelerator type, e.g. v6e-256, v5p-512, tpu7x-16384 "
                                    "(default v6e-256; with --script v6e-1)")
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--global-batch", type=int, default=256, help="sequences per step")
    ap.add_argument("--fsdp", type=int)
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--ep", type=int, default=1)
    ap.add_argument("--remat", default="full", choices=["full", "none"])
    ap.add_argument("--precision", default="bf16", choices=list(PRECISIONS), help="matmul precision (int8/fp8: the published peak)")
    ap.add_argument("--serve", action="store_true", help="serving instead of training")
    ap.add_argument("--batch", type=int, default=32, help="serving: concurrent sequences")
    ap.add_argument("--input-len", type=int, default=1024)
    ap.add_argument("--output-len", type=int, default=256)
    ap.add_argument("--compare", action="store_true", help="also NVIDIA H100/H200/B200 and AWS Trainium2")
    ap.add_argument("--validate", action="store_true", help="predicted vs published runs (specs/published_runs.json)")
    ap.add_argument("--json", action="store_true", help="print one JSON object on the last line")
    argv = list(sys.argv[1:] if argv is None else argv)
    cut = argv.index("--") if "--" in argv else len(argv)  # a script's own arguments follow "--"
    a = ap.parse_args(argv[:cut])
    if a.validate:
        rows = validate()
        print(f"{'run':36} {'gen':4} {'metric':22} {'published':>10} {'predicted':>10} {'error':>7}")
        for r in rows:
            print(f"{r['name']:36} {r['generation']:4} {r['metric']:22} {r['published']:>10.4g} {r['predicted']:>10.4g} "
                  f"{r['error'] * 100:>+6.0f}%")
        print("sources:")
        for r in rows:
            print(f"  {r['name']}: {r['source'].split(' (')[0]}")  # the file's entry says where in it
        if a.json:
            print(json.dumps(rows))
        return 0
    if sum(map(bool, (a.config_json, a.config, a.titan_toml, a.script))) != 1:
        ap.error("give the model as --config-json '{...}', --config FILE, --titan-toml FILE or --script FILE")
    if a.script:
        from torch_tpu.dryrun_script import estimate_script, format_script

        r = estimate_script(a.script, argv[cut + 1:], a.slice or "v6e-1", a.steps, a.tokens_per_step)
        print(format_script(r))
        if a.json:
            print(json.dumps(public(r)))
        return 1 if r["error"] else 0
    a.slice = a.slice or "v6e-256"
    notes = []
    if a.titan_toml:
        config, job, notes = titan_workload(a.titan_toml, Slice(a.slice).chips)
        a.seq, a.global_batch, a.tp, a.remat = job["seq"], job["global_batch"], job["tp"], job["remat"]
    else:
        config = json.loads(a.config_json if a.config_json else Path(a.config).read_text())
    if "model_type" not in config:
        ap.error("the config needs a model_type (llama, qwen3_moe, mixtral, ...)")
    if a.serve:
        r = estimate_serving(config, a.slice, a.batch, a.input_len, a.output_len, tp=a.tp if a.tp > 1 else None)
        print(format_serving(r))
    else:
        r = estimate_training(config, a.slice, a.seq, a.global_batch, fsdp=a.fsdp, tp=a.tp, ep=a.ep, remat=a.remat,
                              precision=a.precision)
        r["notes"] = notes + r["notes"]
        gpus = compare_accelerators(r) if a.compare else None
        print(format_training(r, gpus))
        if gpus:
            r["other_accelerators"] = gpus
    if a.json:
        print(json.dumps(public(r)))
    return 0
