"""Traffic replay: do recompiles hurt latency? A stream of prompts with a realistic spread of
lengths goes through a compiled tiny Llama (transformers, random weights) on tpu, once with
static shapes (backend "tpu"'s default, as TorchTPU's dynamic=False) and once with bounded
dynamism; per request: prompt length, whether it recompiled (and why), compile time paid,
latency. Each request is a prefill (forward over the prompt) plus a few greedy decode steps
over the growing sequence, so lengths keep changing; the first tokens are checked against eager.

    python bench/traffic_replay.py                 # 8 requests, lengths log-normal in [8, 256], 1 decode step
    python bench/traffic_replay.py --requests 40 --decode 3 --seed 1  # long: each static shape compiles

Dynamo stops recompiling a function after torch._dynamo.config.recompile_limit (8) compiles
and runs it eagerly from then on; the replay raises the limit so every static recompile is
paid and counted, as a TPU compiler would."""
import argparse
import math
import random
import statistics
import time

import torch


def tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)
    torch.manual_seed(0)
    return LlamaForCausalLM(cfg).eval().to("tpu")


def lengths(n, seed, lo=8, hi=256):
    """Prompt lengths: log-normal around 48 tokens, as chat traffic is (many short, a long tail)."""
    rng = random.Random(seed)
    return [max(lo, min(hi, int(math.exp(rng.gauss(math.log(48), 0.8))))) for _ in range(n)]


def replay(model, prompts, decode, bounded, max_len):
    forward = lambda ids: model(input_ids=ids, use_cache=False).logits[:, -1]  # noqa: E731
    options = {"bounded_dynamism": True} if bounded else None
    compiled = torch.compile(forward, backend="tpu", options=options)
    rows = []
    for i, prompt in enumerate(prompts):
        before = torch.tpu.metrics.compile_counters()
        ids = prompt.clone()
        t0 = time.perf_counter()
        tokens = []
        for _ in range(1 + decode):
            if bounded:
                torch._dynamo.mark_dynamic(ids, 1, min=2, max=max_len)
            nxt = compiled(ids).argmax(-1, keepdim=True)
            tokens.append(int(nxt.item()))
            ids = torch.cat([ids, nxt], dim=1)
        latency = time.perf_counter() - t0
        after = torch.tpu.metrics.compile_counters()
        causes = after["recompile_causes"][before["recompiles"]:]
        rows.append({"request": i, "prompt": prompt.shape[1], "frames_compiled": after["frames_compiled"] -
                     before["frames_compiled"], "compile_s": after["compile_seconds"] - before["compile_seconds"],
                     "latency_s": latency, "tokens": tokens, "causes": causes})
    return rows


def eager_tokens(model, prompt, decode):
    ids, out = prompt.clone(), []
    with torch.no_grad():
        for _ in range(1 + decode):
            nxt = model(input_ids=ids, use_cache=False).logits[:, -1].argmax(-1, keepdim=True)
            out.append(int(nxt.item()))
            ids = torch.cat([ids, nxt], dim=1)
    return out


def report(name, rows):
    lat = sorted(r["latency_s"] for r in rows)
    p99 = lat[min(len(lat) - 1, math.ceil(0.99 * len(lat)) - 1)]
    print(f"\n{name}: {sum(r['frames_compiled'] for r in rows)} compiles, "
          f"{sum(r['compile_s'] for r in rows):.1f} s compiling, latency p50 {1e3 * statistics.median(lat):.0f} ms, "
          f"p99 {1e3 * p99:.0f} ms")
    print("| request | prompt | compiles | compile s | latency ms | first recompile cause |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        cause = r["causes"][0].split(": recompiled ", 1)[-1] if r["causes"] else ""
        print(f"| {r['request']} | {r['prompt']} | {r['frames_compiled']} | {r['compile_s']:.1f} | "
              f"{1e3 * r['latency_s']:.0f} | {cause} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=8)
    ap.add_argument("--decode", type=int, default=1, help="greedy tokens after the prefill")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch._dynamo.config.recompile_limit = 10_000
    torch._dynamo.config.accumulated_recompile_limit = 10_000
    model = tiny_llama()
    max_len = 256 + args.decode + 1
    gen = torch.Generator().manual_seed(args.seed)
    prompts = [torch.randint(0, 512, (1, n), generator=gen).to("tpu") for n in lengths(args.requests, args.seed)]
    print(f"{args.requests} requests, prompt lengths {sorted(p.shape[1] for p in prompts)}, {args.decode} decode steps")
    with torch.no_grad(), torch.tpu.precision("highest"):
        want = [eager_tokens(model, p, args.decode) for p in prompts]
        for name, bounded in (("static shapes", False), ("bounded dynamism (2..%d)" % max_len, True)):
            torch._dynamo.reset()
            torch.tpu.metrics.reset()
            rows = replay(model, prompts, args.decode, bounded, max_len)
            report(name, rows)
            same = sum(r["tokens"] == w for r, w in zip(rows, want))
            print(f"tokens equal to eager: {same}/{len(rows)} requests")


if __name__ == "__main__":
    main()
