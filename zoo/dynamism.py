"""Bounded dynamism over Hugging Face causal LMs: does one compiled graph serve every prompt length?

Each transformers causal-LM architecture is built tiny (zoo/tiny.py, random weights) on tpu, and
its forward (logits of the last position, no KV cache) is compiled once with
torch.compile(backend="tpu", options={"bounded_dynamism": True}) and the sequence dim marked
dynamic in [2, 64]; then it runs LENGTHS prompt lengths. A model passes when every length ran on
the first graph (0 recompiles, as torch.tpu.metrics counts them) and its logits match eager tpu's
within 1e-4 relative (both at "highest" matmul precision).

    python zoo/dynamism.py                    # the first 30 causal LMs Tier 1 builds, alphabetically
    python zoo/dynamism.py --models llama,gpt2 --resume

Verdicts: PASS; RECOMPILED (a length compiled a second graph: the cause is recorded); WRONG
(logits differ from eager); ERROR; CRASH (the child died or timed out); NOT_BUILDABLE.
Results: results/dynamism.jsonl (resumable) and results/dynamism.md."""
import copy
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from harness import run_tier, summary_sections, tier_arguments  # noqa: E402

LENGTHS = [2, 3, 5, 7, 8, 11, 13, 16, 17, 19, 23, 29, 31, 32, 37, 41, 47, 53, 59, 64]
BOUND = (2, 64)
DEFAULT_COUNT = 30


def run_one(model_type):
    """Compiles one model's forward with bounded dynamism and runs every length (never raises)."""
    import torch
    import transformers

    import torch_tpu
    from tiny import model_classes, shrink

    transformers.logging.set_verbosity_error()
    rec = {"model_type": model_type, "verdict": None, "reason": "", "class": None, "fallbacks": {}}
    try:
        cfg = shrink(transformers.AutoConfig.for_model(model_type))
        mapping, cls = next((m, c) for m, c in model_classes(model_type) if m == "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES")
        torch.manual_seed(0)
        model = cls(copy.deepcopy(cfg)).eval().to("tpu")
    except Exception as e:
        return {**rec, "verdict": "NOT_BUILDABLE", "reason": f"{type(e).__name__}: {e}"[:300]}
    rec["class"] = cls.__name__
    vocab = min(getattr(model.config, "vocab_size", 0) or 100, 100)
    forward = lambda ids: model(input_ids=ids, use_cache=False).logits[:, -1]  # noqa: E731
    compiled = torch.compile(forward, backend="tpu", options={"bounded_dynamism": True})
    g = torch.Generator().manual_seed(0)
    worst, stage = 0.0, "eager"
    try:
        torch_tpu.metrics.reset()
        with torch.no_grad(), torch.tpu.precision("highest"):  # float32 matmuls: compiled and eager comparable
            for n in LENGTHS:
                ids = torch.randint(1, vocab, (1, n), generator=g).to("tpu")
                stage = f"eager, length {n}"
                eager = forward(ids)
                stage = f"compiled, length {n}"
                torch._dynamo.mark_dynamic(ids, 1, min=BOUND[0], max=BOUND[1])
                got = compiled(ids)
                worst = max(worst, ((got - eager).abs().max() / eager.abs().max().clamp(min=1)).item())
        counters = torch.tpu.metrics.compile_counters()
    except Exception as e:
        return {**rec, "verdict": "ERROR", "reason": f"{stage}: {type(e).__name__}: {e}"[:300],
                "fallbacks": {k: v[0] for k, v in torch_tpu.metrics.fallback_ops().items()}}
    rec.update(graphs=counters["graphs_compiled"], recompiles=counters["recompiles"],
               graph_breaks=counters["graph_breaks"], compile_s=round(counters["compile_seconds"], 1),
               worst_rel_error=worst, fallbacks={k: v[0] for k, v in torch_tpu.metrics.fallback_ops().items()})
    if counters["recompiles"]:
        return {**rec, "verdict": "RECOMPILED", "reason": str(counters["recompile_causes"][:2])[:300]}
    if worst > 1e-4:
        return {**rec, "verdict": "WRONG", "reason": f"logits differ from eager tpu by {worst:.3g} (relative)"}
    return {**rec, "verdict": "PASS"}


def summarize(records, path):
    counts, sections = summary_sections(records)
    buildable = len(records) - counts.get("NOT_BUILDABLE", 0)
    passed = counts.get("PASS", 0)
    lines = ["# Bounded dynamism: Hugging Face causal LMs compiled once for prompt lengths "
             f"{BOUND[0]}..{BOUND[1]}", "",
             f"{len(records)} model types, {buildable} buildable; **{passed} ran all {len(LENGTHS)} lengths on one "
             "graph with eager's logits**", ""] + sections
    lines += ["", "## Every model", "", "| model | class | verdict | graphs | recompiles | graph breaks | compile s | "
              "worst relative error | reason |", "|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(records, key=lambda r: (r["verdict"] != "PASS", r["model_type"])):
        err = f"{r['worst_rel_error']:.2g}" if "worst_rel_error" in r else ""
        cells = [r["model_type"], r.get("class") or "", r["verdict"], *(str(r.get(k, "")) for k in
                 ("graphs", "recompiles", "graph_breaks", "compile_s")), err, r.get("reason", "").replace("|", "/")[:200]]
        lines.append("| " + " | ".join(cells) + " |")
    path.write_text("\n".join(lines) + "\n")
    return counts, buildable, passed


def causal_lms():
    """Model types with a causal-LM head that Tier 1 records as passing, else every one transformers maps."""
    import json

    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    tier1 = pathlib.Path("results/tier1.jsonl")
    passing = None
    if tier1.exists():
        passing = {json.loads(line)["model_type"] for line in tier1.read_text().splitlines()
                   if json.loads(line)["verdict"] == "PASS"}
    return sorted(t for t in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES if passing is None or t in passing)


def main():
    ap = tier_arguments(timeout=600)
    ap.add_argument("--count", type=int, default=DEFAULT_COUNT, help="how many causal LMs (alphabetically)")
    args = ap.parse_args()
    if args.one:
        import json
        print(json.dumps(run_one(args.one)))
        return 0
    models = args.models.split(",") if args.models else causal_lms()[: args.count]
    return run_tier("dynamism", run_one, models, args, summarize)


if __name__ == "__main__":
    sys.exit(main())
