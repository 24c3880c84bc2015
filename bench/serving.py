"""Serving benchmark: a tiny Llama (random weights from a config, nothing downloaded) serves a
set of requests through Hugging Face's continuous batching (`model.generate_batch`: a paged KV
cache, requests admitted as slots free up), on tpu and on PyTorch CPU in the same run.

It prints, per device: wall time, output tokens/s, time to first token and end-to-end latency
(median and p90 over requests), whether both devices generated the same tokens; then the tpu/CPU
ratios; then what the dry run (torch_tpu.dryrun.estimate_serving) predicts for the same model
on one chip of v5e, v6e and v7: tokens/s, time per output token and $ per million tokens.

    python bench/serving.py [--requests 32] [--slots 8] [--layers 4] [--hidden 256] [--json]

Why not vLLM: PyPI's vLLM wheels are CUDA builds (vllm 0.32 resolves beside torch 2.13 only by
pulling the CUDA runtime, Triton and flashinfer and downgrading transformers and numpy); its CPU
build is compiled from source. Hugging Face's continuous batching is the closest honest
equivalent that installs here."""
import argparse
import json
import logging
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
from run import _cpu_jiffies, noise, noisy_note  # noqa: E402

GENERATIONS = ("v5e-1", "v6e-1", "v7-8")  # v7 is sold by TensorCores: v7-8 is 4 chips, served 1 per replica


def llama_config(args):
    return {"model_type": "llama", "hidden_size": args.hidden, "intermediate_size": args.hidden * 8 // 3,
            "num_hidden_layers": args.layers, "num_attention_heads": args.heads,
            "num_key_value_heads": max(1, args.heads // 4), "vocab_size": args.vocab,
            "max_position_embeddings": 1024, "pad_token_id": 0, "eos_token_id": None, "bos_token_id": 1}


def build(config):
    import transformers

    transformers.logging.set_verbosity_error()
    logging.getLogger("ContinuousBatchingLogger").setLevel(logging.ERROR)  # "eos_token_id not set": on purpose
    cfg = transformers.AutoConfig.for_model(**config)
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(cfg).eval()


def requests(args):
    g = torch.Generator().manual_seed(1)
    lengths = torch.randint(args.prompt_min, args.prompt_max + 1, (args.requests,), generator=g)
    return [torch.randint(2, args.vocab, (int(n),), generator=g).tolist() for n in lengths]


def serve(model, prompts, args):
    from transformers import GenerationConfig
    from transformers.generation.configuration_utils import ContinuousBatchingConfig

    gen = GenerationConfig(max_new_tokens=args.new_tokens, do_sample=False, eos_token_id=None, pad_token_id=0)
    cb = ContinuousBatchingConfig(page_size=16, num_blocks=args.slots * (args.prompt_max + args.new_tokens) // 16 + 8,
                                  max_batch_tokens=args.max_batch_tokens, max_requests_per_batch=args.slots)
    start = time.perf_counter()
    with torch.no_grad():
        out = model.generate_batch(inputs=prompts, generation_config=gen, continuous_batching_config=cb,
                                   warmup=False, record_timestamps=True)
    wall = time.perf_counter() - start
    results = [out[k] for k in sorted(out, key=lambda r: int(r.split("_")[-1]))]
    failed = [r.request_id for r in results if r.error]
    if failed:
        raise RuntimeError(f"requests failed: {failed[:4]}: {results[0].error}")
    ttft = [r.timestamps[0] - r.created_time for r in results]
    latency = [r.timestamps[-1] - r.created_time for r in results]
    tokens = sum(len(r.generated_tokens) for r in results)
    return {"wall_s": wall, "tokens": tokens, "tokens_per_s": tokens / wall,
            "ttft_p50_s": statistics.median(ttft), "ttft_p90_s": _p90(ttft),
            "latency_p50_s": statistics.median(latency), "latency_p90_s": _p90(latency),
            "generated": [r.generated_tokens for r in results]}


def _p90(xs):
    return sorted(xs)[min(len(xs) - 1, int(0.9 * len(xs)))]


def dry_run(config, args):
    from torch_tpu.dryrun import estimate_serving

    mean_prompt = (args.prompt_min + args.prompt_max) // 2
    rows = {}
    for name in GENERATIONS:
        r = estimate_serving(config, name, args.slots, mean_prompt, args.new_tokens, tp=1)
        rows[name] = {k: r[k] for k in ("tokens_per_s", "tokens_per_s_per_chip", "tpot_s", "ttft_s",
                                        "usd_per_mtok", "fits")}
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=32)
    ap.add_argument("--slots", type=int, default=8, help="requests decoded together at most")
    ap.add_argument("--prompt-min", type=int, default=16)
    ap.add_argument("--prompt-max", type=int, default=96)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--max-batch-tokens", type=int, default=256, help="tokens per forward (prefill chunks)")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--precision", default="highest", choices=["highest", "high", "default"],
                    help="tpu matmul precision; 'highest' (float32 products) lets the tokens be compared with CPU's")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    import torch_tpu

    config = llama_config(args)
    prompts = requests(args)
    cpu_model = build(config)
    tpu_model = build(config).to("tpu")
    serve(cpu_model, prompts[:2], args)  # warm-up: imports, thread pools, the meta cache
    with torch.tpu.precision(args.precision):
        serve(tpu_model, prompts[:2], args)
    torch_tpu.metrics.reset()
    start, t0 = _cpu_jiffies(), time.perf_counter()
    runs = {}
    for rnd in range(2):  # alternate, so load changes hit both devices alike
        runs.setdefault("cpu", []).append(serve(cpu_model, prompts, args))
        with torch.tpu.precision(args.precision):
            runs.setdefault("tpu", []).append(serve(tpu_model, prompts, args))
    why = noise({k: [r["wall_s"] for r in v] for k, v in runs.items()}, start, t0)
    best = {k: min(v, key=lambda r: r["wall_s"]) for k, v in runs.items()}
    same = sum(a == b for a, b in zip(best["cpu"]["generated"], best["tpu"]["generated"]))
    report = {
        "model": config, "requests": args.requests, "slots": args.slots, "new_tokens": args.new_tokens,
        "precision": args.precision,
        "measured": {k: {m: v for m, v in r.items() if m != "generated"} for k, r in best.items()},
        "tpu_over_cpu_time": best["tpu"]["wall_s"] / best["cpu"]["wall_s"],
        "same_tokens": f"{same}/{args.requests}",
        "fallback_ops": torch_tpu.metrics.fallback_ops(),
        "noisy": why or None,
        "dry_run": dry_run(config, args),
    }
    if args.json:
        print(json.dumps(report, indent=1))
        return report
    print(f"tiny Llama: hidden {args.hidden}, {args.layers} layers; {args.requests} requests, prompts "
          f"{args.prompt_min}-{args.prompt_max} tokens, {args.new_tokens} new each, {args.slots} slots; "
          f"tpu precision {args.precision}")
    print(f"{'device':8} {'wall s':>8} {'tok/s':>8} {'TTFT p50/p90 ms':>18} {'latency p50/p90 ms':>20}")
    for k, r in best.items():
        print(f"{k:8} {r['wall_s']:8.2f} {r['tokens_per_s']:8.0f} "
              f"{1e3 * r['ttft_p50_s']:8.0f} /{1e3 * r['ttft_p90_s']:7.0f} "
              f"{1e3 * r['latency_p50_s']:9.0f} /{1e3 * r['latency_p90_s']:8.0f}")
    print(f"tpu/CPU time {report['tpu_over_cpu_time']:.2f}x{noisy_note(why)}; same tokens {report['same_tokens']}; "
          f"CPU fallbacks {report['fallback_ops'] or 'none'}")
    print("dry run, one chip per replica, batch = slots (python -m torch_tpu dryrun --serve):")
    for name, r in report["dry_run"].items():
        usd = f"${r['usd_per_mtok']:.4f}/Mtok" if r["usd_per_mtok"] is not None else "no public price"
        print(f"  {name:6} {r['tokens_per_s_per_chip']:12,.0f} tok/s per chip  TPOT {1e6 * r['tpot_s']:7.1f} us  {usd}")
    return report


if __name__ == "__main__":
    main()
