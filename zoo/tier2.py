"""Tier 2: representative transformers architectures at small but not trivial sizes, trained
for a few steps on tpu and on PyTorch CPU float32 from identical weights and inputs.

    python zoo/tier2.py                       # every model in MODELS, HIGHEST precision
    python zoo/tier2.py --precision default   # bf16 matmul operands, bf16-level tolerances
                                              # (results/tier2_default.{jsonl,md})
    python zoo/tier2.py --compile             # the tpu run through torch.compile(backend="tpu")
                                              # (results/tier2_compile.{jsonl,md})
    python zoo/tier2.py --subset ci           # the CI handful (tests/test_zoo.py)
    python zoo/tier2.py --models llama,bert --resume

Sizes: hidden 128, 4 heads (2 key/value heads), 2 layers, FFN 256, vocab 1000, sequence 32,
batch 2, images 64x64, audio 4000 samples (TIER2_SIZES below; per-stage models keep their
stage count). Each model runs in its own forked child process with a time limit, in eval mode (no
dropout, layer drop or SpecAugment, so CPU and tpu see the same function) with its head's own
loss where the head has one (causal/masked LM, seq2seq, classification, CTC, CLIP's
contrastive loss), else the mean of its main output times a fixed random tensor.

Stages, each compared with CPU: logits (the main output of the first forward), loss, every
parameter gradient after one backward, and the loss curve over STEPS AdamW steps. A tensor
passes a stage when max|tpu - cpu| <= atol + rtol * max|cpu| (per tensor: per parameter for
gradients), with the tolerances of TOLERANCES for the precision mode, the same for every model.

Verdicts: PASS, WRONG (a stage outside tolerance), ERROR (exception on tpu), CRASH (the child
process died or timed out), NOT_BUILDABLE (no config / inputs that CPU itself runs).
Results: results/tier2.jsonl (resumable; one record per model with max errors per stage,
fallbacks, times) and results/tier2.md."""
import copy
import json
import pathlib
import sys
import time
import traceback

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from harness import max_error, run_tier, summary_sections, tier_arguments  # noqa: E402
from tiny import SIZES  # noqa: E402

MODELS = [
    # text encoders
    "bert", "roberta", "deberta-v2", "deberta", "mobilebert", "electra", "albert", "distilbert", "xlm-roberta",
    "camembert", "funnel", "squeezebert", "convbert", "layoutlm", "nystromformer", "longformer", "big_bird",
    "data2vec-text", "xlnet",
    # encoder-decoders
    "t5", "bart", "pegasus", "mbart", "m2m_100", "marian", "blenderbot", "led",
    # decoders
    "gpt2", "opt", "xglm", "llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe", "gemma", "gemma2",
    "gemma3_text", "phi3", "phi", "falcon", "gpt_neox", "mamba", "deepseek_v3", "bloom", "gptj", "codegen",
    "gpt_bigcode", "stablelm", "olmo", "granite", "cohere", "starcoder2", "persimmon",
    # speech
    "whisper", "speech_to_text", "wav2vec2", "hubert", "unispeech", "sew", "data2vec-audio",
    # vision
    "vit", "clip", "swin", "convnext", "beit", "deit", "dinov2", "segformer", "resnet", "regnet", "mobilevit",
    "levit", "poolformer",
]
CI_SUBSET = ["llama", "bert"]
STEPS = 5
LR = 1e-3
BATCH, SEQ, AUDIO = 2, 32, 4000
MAX_PARAMS = 30_000_000

# precision mode -> stage -> (rtol, atol). HIGHEST runs f32 matmuls, so the tpu differs from
# CPU only by summation order: ~1e-6 relative per op, grown by depth and by the backward pass.
# DEFAULT rounds matmul operands to bf16 (8 mantissa bits, 2**-9 ~ 2e-3 relative per operand),
# so its tolerances are bf16-level; and at DEFAULT a tensor also passes when its error, relative
# to its max, is at most BF16_SLACK times the worst such error of CPU's own bf16 run
# (torch.autocast) over the stage's tensors: a ReLU or gate that flips under bf16 rounding
# changes a gradient by its whole value, and how often that happens depends on the model (deep
# ReLU convnets: ~50% of a gradient's max, on CPU as on tpu), not on the device. The loss curve
# runs STEPS AdamW updates, whose first steps move every weight by ~lr whatever the size of its
# gradient, so it is the loosest stage.
TOLERANCES = {
    "highest": {"logits": (1e-4, 1e-5), "loss": (1e-4, 1e-5), "grad": (1e-3, 1e-6), "loss_curve": (1e-3, 1e-4)},
    "default": {"logits": (3e-2, 1e-3), "loss": (1e-2, 1e-3), "grad": (1e-1, 1e-4), "loss_curve": (3e-2, 1e-3)},
}
BF16_SLACK = 2

# Bigger than Tier 1 (tiny.SIZES): the same attributes, scaled up.
_WIDE = ("hidden_size", "d_model", "n_embd", "embed_dim", "dim", "model_dim", "emb_dim", "word_embed_proj_dim",
         "embedding_size", "text_embed_dim")
_FFN = ("intermediate_size", "ffn_dim", "encoder_ffn_dim", "decoder_ffn_dim", "n_inner", "d_ff", "hidden_dim")
_HEADS = ("num_attention_heads", "n_head", "n_heads", "encoder_attention_heads", "decoder_attention_heads",
          "num_heads")
TIER2_SIZES = {
    **SIZES, **dict.fromkeys(_WIDE, 128), **dict.fromkeys(_FFN, 256), **dict.fromkeys(_HEADS, 4),
    "num_key_value_heads": 2, "num_kv_heads": 2, "projection_dim": 64, "moe_intermediate_size": 128,
    "shared_expert_intermediate_size": 128, "vocab_size": 1000, "image_size": 64, "patch_size": 8,
    "hidden_sizes": 32, "depths": 2, "conv_dim": 64, "num_conv_pos_embeddings": 16, "max_source_positions": 32,
    "num_mel_bins": 32, "attention_window": 8, "decoder_vocab_size": 1000,
}
PREFERRED = ["MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES", "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES",
             "MODEL_FOR_MASKED_LM_MAPPING_NAMES", "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
             "MODEL_FOR_ZERO_SHOT_IMAGE_CLASSIFICATION_MAPPING_NAMES", "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES",
             "MODEL_FOR_CTC_MAPPING_NAMES", "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES",
             "MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES", "MODEL_MAPPING_NAMES"]


class NotBuildable(Exception):
    pass


def build(model_type):
    """(model, inputs, mapping) on CPU, or raises NotBuildable."""
    import torch
    import transformers

    from tiny import make_inputs, model_classes, shrink

    try:
        cfg = shrink(transformers.AutoConfig.for_model(model_type), TIER2_SIZES)
    except Exception as e:
        raise NotBuildable(f"config: {type(e).__name__}: {e}")
    errors = []
    for mapping, cls in model_classes(model_type, PREFERRED):
        try:
            torch.manual_seed(0)
            model = cls(copy.deepcopy(cfg)).eval()
        except Exception as e:
            errors.append(f"{cls.__name__}: {type(e).__name__}: {e}"[:200])
            continue
        params = sum(p.numel() for p in model.parameters())
        if params > MAX_PARAMS:
            raise NotBuildable(f"{params:,} parameters after shrinking")
        inputs = make_inputs(model, mapping, BATCH, SEQ, ids_below=10**9, audio=AUDIO, labels=True)
        if inputs is None:
            raise NotBuildable(f"no input recipe for '{model.main_input_name}'")
        return model, inputs, mapping
    raise NotBuildable("; ".join(errors) or "no auto-model class")


def loss_of(out, weight):
    """The head's loss, else the mean of the main output times `weight` (a fixed tensor)."""
    from harness import main_tensor

    loss = getattr(out, "loss", None)
    if loss is not None:
        return loss
    return (main_tensor(out)[1] * weight).mean()


def train(model, inputs, weight, compiled=False):
    """Runs STEPS AdamW steps; returns (first main output, first loss, first gradients by
    parameter name, losses). compiled: the model's forward and backward through
    torch.compile(backend="tpu") (the optimizer stays eager)."""
    import torch

    from harness import main_tensor

    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    forward = torch.compile(model, backend="tpu") if compiled else model
    first = None
    losses = []
    for step in range(STEPS):
        model.train().eval()  # drops eval-mode caches that hold a graph (LeViT's attention biases)
        out = forward(**inputs)
        loss = loss_of(out, weight)
        opt.zero_grad()
        loss.backward()
        if step == 0:
            grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
            first = (main_tensor(out)[1].detach().clone(), loss.detach().clone(), grads)
        losses.append(loss.detach().clone())
        opt.step()
    return (*first, torch.stack(losses))


def compare(stage, pairs, tol):
    """The stage over (name, tpu, cpu, bf16 or None) tuples: (the worst tuple's error record,
    the first failure's message or None). ratio is the error over its allowance (pass: <= 1):
    atol + rtol * max|cpu|, or, where larger, BF16_SLACK * bf16_rel * max|cpu|, bf16_rel being
    the largest error relative to max|cpu| of the CPU bf16 run over the stage's tensors."""
    rtol, atol = tol
    errs = [(name, *max_error(a, b)) for name, a, b, _ in pairs]
    bf16_rel = max((max_error(bf, b)[0] / max(max_error(bf, b)[1], 1e-30) for _, _, b, bf in pairs
                    if bf is not None), default=0.0)
    worst = {"err": 0.0, "scale": 0.0, "ratio": 0.0, "at": None, "bf16_rel": bf16_rel}
    problem = None
    for name, err, scale in errs:
        ratio = err / max(atol + rtol * scale, BF16_SLACK * bf16_rel * scale)
        if ratio > worst["ratio"] or worst["at"] is None:
            worst = {"err": err, "scale": scale, "ratio": ratio, "at": name, "bf16_rel": bf16_rel}
        if not ratio <= 1 and problem is None:  # NaN fails too
            problem = f"{stage} {name}: max abs error {err:.3g} (scale {scale:.3g})"
    return worst, problem


def run_one(model_type, precision="highest", compiled=False):
    """Builds, trains on CPU and tpu (compiled: through torch.compile(backend="tpu")), compares;
    returns the record (never raises)."""
    import torch
    import transformers

    import torch_tpu
    from harness import fallbacks, main_tensor

    transformers.logging.set_verbosity_error()
    torch.set_num_threads(1)  # CPU's reference: OpenMP threads on a busy machine cost 30x
    rec = {"model_type": model_type, "precision": precision, "verdict": None, "reason": "", "class": None,
           "params": None, "loss": None, "errors": {}, "fallbacks": {}, "cpu_s": None, "tpu_s": None}
    try:
        model, inputs, mapping = build(model_type)
        rec["class"] = type(model).__name__
        rec["params"] = sum(p.numel() for p in model.parameters())
        with torch.no_grad():
            out = model(**inputs)
        key, main = main_tensor(out)
        if main is None:
            raise NotBuildable("no floating-point output to compare")
        weight = torch.randn(main.shape, generator=torch.Generator().manual_seed(1))
        rec["loss"] = "head" if getattr(out, "loss", None) is not None else f"mean({key} * w)"
        t0 = time.time()
        cpu = train(copy.deepcopy(model), inputs, weight)
        rec["cpu_s"] = round(time.time() - t0, 2)
        bf16 = None
        if precision == "default":
            try:
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    bf16 = train(copy.deepcopy(model), inputs, weight)
            except Exception as e:  # then the fixed tolerances alone judge
                rec["bf16_reference"] = f"{type(e).__name__}: {e}"[:200]
    except Exception as e:
        reason = str(e) if isinstance(e, NotBuildable) else f"CPU: {type(e).__name__}: {e}"
        return {**rec, "verdict": "NOT_BUILDABLE", "reason": reason[:300]}

    torch_tpu.metrics.reset()
    if compiled:  # transformers' forward decorators are one code object for every model: start afresh
        torch._dynamo.reset()
    try:
        t0 = time.time()
        with torch.tpu.precision(precision):
            tmodel = copy.deepcopy(model).to("tpu")
            tin = {k: v.to("tpu") if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
            tpu = train(tmodel, tin, weight.to("tpu"), compiled)
            tpu = tuple(x.cpu() if isinstance(x, torch.Tensor) else {k: v.cpu() for k, v in x.items()} for x in tpu)
        rec["tpu_s"] = round(time.time() - t0, 2)
        if compiled:
            c = torch.tpu.metrics.compile_counters()
            rec["compile"] = {k: c[k] for k in ("graphs_compiled", "recompiles", "graph_breaks", "compile_seconds")}
    except Exception as e:
        rec["fallbacks"] = fallbacks()
        tb = traceback.format_exc().strip().splitlines()
        where = next((ln.strip() for ln in reversed(tb) if ln.strip().startswith("File")), "")
        return {**rec, "verdict": "ERROR", "reason": f"{type(e).__name__}: {e}"[:250] + f" [{where[-120:]}]"}
    rec["fallbacks"] = fallbacks()

    tol = TOLERANCES[precision]
    problems = []
    (tl, tloss, tgrads, tcurve), (cl, closs, cgrads, ccurve) = tpu, cpu
    missing = sorted(set(tgrads) ^ set(cgrads))
    if missing:
        problems.append(f"grad presence differs: {missing[:3]}")
    bl, bloss, bgrads, bcurve = bf16 or (None, None, {}, None)
    stages = {"logits": [(key, tl, cl, bl)], "loss": [("loss", tloss, closs, bloss)],
              "grad": [(n, tgrads[n], cgrads[n], bgrads.get(n)) for n in cgrads if n in tgrads],
              "loss_curve": [("losses", tcurve, ccurve, bcurve)]}
    for stage, pairs in stages.items():
        try:
            rec["errors"][stage], problem = compare(stage, pairs, tol[stage])
        except ValueError as e:
            rec["errors"][stage], problem = None, f"{stage}: {e}"
        if problem:
            problems.append(problem)
    rec["losses_cpu"] = [round(v, 6) for v in ccurve.tolist()]
    return {**rec, "verdict": "WRONG" if problems else "PASS", "reason": "; ".join(problems)[:400]}


def summarize(records, path, precision, compiled=False):
    counts, sections = summary_sections(records)
    buildable = len(records) - counts.get("NOT_BUILDABLE", 0)
    passed = counts.get("PASS", 0)
    tol = TOLERANCES[precision]
    how = precision.upper() + (', torch.compile(backend="tpu")' if compiled else "")
    lines = [f"# Tier 2: {len(records)} representative architectures, small, {STEPS} AdamW steps, "
             f"tpu ({how}) vs CPU float32", "",
             f"**{passed} PASS of {len(records)}** ({buildable} buildable). A stage passes when "
             "max|tpu - cpu| <= atol + rtol * max|cpu| per tensor; (rtol, atol): "
             + ", ".join(f"{k} {v}" for k, v in tol.items())
             + (f"; or {BF16_SLACK}x the CPU bf16 autocast run's worst relative error of the stage"
                if precision == "default" else "") + ".", ""] + sections
    lines += ["", "## Every model", "",
              "| model | class | params | verdict | logits | loss | grad (worst param) | loss curve | cpu s | tpu s | reason |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]

    def cell(r, stage):
        e = r.get("errors", {}).get(stage)
        return f"{e['err']:.2g} ({e['ratio']:.2f}x tol)" if e else ""
    for r in sorted(records, key=lambda r: (r["verdict"] == "PASS", r["model_type"])):
        lines.append(f"| {r['model_type']} | {r.get('class') or ''} | {r.get('params') or ''} | {r['verdict']} | "
                     + " | ".join(cell(r, s) for s in ("logits", "loss", "grad", "loss_curve"))
                     + f" | {r.get('cpu_s') or ''} | {r.get('tpu_s') or ''} | "
                     + f"{r.get('reason', '').replace('|', '/')[:200]} |")
    path.write_text("\n".join(lines) + "\n")
    return counts, buildable, passed


def preload(models):
    """Imports every model class the sweep will build, once, before the children fork."""
    import transformers

    from tiny import model_classes

    transformers.logging.set_verbosity_error()
    for m in models:
        try:
            model_classes(m, PREFERRED)
        except Exception:
            pass  # run_one reports it


def main():
    ap = tier_arguments(timeout=600)
    ap.add_argument("--precision", choices=sorted(TOLERANCES), default="highest")
    ap.add_argument("--compile", action="store_true",
                    help="the tpu run's forward and backward through torch.compile(backend=\"tpu\")")
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one, args.precision, args.compile)))
        return 0
    models = args.models.split(",") if args.models else CI_SUBSET if args.subset == "ci" else MODELS
    name = "tier2" + ("" if args.precision == "highest" else f"_{args.precision}") + ("_compile" if args.compile else "")
    preload(models)
    return run_tier(name, run_one, models, args,
                    lambda records, path: summarize(records, path, args.precision, args.compile),
                    (args.precision, args.compile))


if __name__ == "__main__":
    sys.exit(main())
