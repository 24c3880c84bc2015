"""Tier 1: every architecture transformers knows, tiny and random, on tpu vs PyTorch CPU.

    python zoo/tier1.py                 # every model type (long: run it in the background)
    python zoo/tier1.py --subset ci     # a fixed handful, a few minutes
    python zoo/tier1.py --models gpt2,bert --resume
    python zoo/tier1.py --resume --rerun NOT_BUILDABLE   # keep the log, but retry what did not build

Each model runs in its own forked child process with a time limit. Stages, each compared with the same
model on CPU: move to tpu, forward, backward + one SGD step, greedy generate (generative
models). Verdicts: PASS, WRONG (numbers differ), ERROR (exception on tpu), CRASH (the child
process died or timed out), NOT_BUILDABLE (no tiny config / inputs that CPU itself runs,
with the reason). Results: results/tier1.jsonl (resumable) and results/tier1.md."""
import copy
import inspect
import json
import pathlib
import sys
import traceback

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from harness import max_error, run_tier, summary_sections, tier_arguments  # noqa: E402

CI_SUBSET = ["gpt2", "bert", "llama", "t5", "vit", "mistral", "qwen2", "roberta"]
MAX_PARAMS = 20_000_000


def close(a, b, what):
    """Relative max error check at HIGHEST precision (f32 reordering only)."""
    try:
        err, scale = max_error(a, b)
    except ValueError as e:
        return f"{what}: {e}"
    scale = max(scale, 1.0)
    if not err <= 1e-4 * scale:
        return f"{what}: max abs error {err:.3g} (scale {scale:.3g})"
    return None


class NoRecipe(Exception):
    pass


def cpu_reference(model, mapping):
    """(inputs, name, tensor): the inputs the model runs on and its main output on CPU. A
    model that cannot run on the plainest inputs gets tiny's next variant (a CLIP-like
    model's text and image together). Raises NoRecipe where tiny has no inputs for it, else
    the last variant's error."""
    import torch

    from harness import main_tensor
    from tiny import RECIPES, VARIANTS, input_names, make_inputs

    tries = []
    for variant in range(VARIANTS):
        inputs = make_inputs(model, mapping, variant=variant)
        if inputs is not None and all(_differ(inputs, t) for t in tries):
            tries.append(inputs)
    if not tries:
        names = input_names(model, mapping)
        missing = [n for n in names if n not in RECIPES] or names or [model.main_input_name]
        raise NoRecipe(f"no input recipe for {', '.join(map(repr, missing))}")
    for i, inputs in enumerate(tries):
        try:
            with torch.no_grad():  # on a copy: what a forward caches (CLVP's rotary table) stays off the tpu copy
                key, main = main_tensor(seeded(copy.deepcopy(model))(**inputs))
            if main is None:
                raise RuntimeError("no floating-point output to compare")
            if main.numel() and not main.isfinite().any():  # nothing to compare (a random tiny net that overflows)
                raise RuntimeError(f"CPU's {key} has no finite value")
            return inputs, key, main
        except Exception:
            if i == len(tries) - 1:
                raise


def seeded(model):
    """The model, called with the CPU generator at one state: randomness a model draws from it
    itself (ViLT samples image patches with torch.multinomial on CPU tensors) is then the same
    in every run of it, CPU's reference, tpu's and float64's."""
    import torch

    def call(*args, **kwargs):
        torch.manual_seed(0)
        return model(*args, **kwargs)
    return call


def _differ(a, b):
    """Whether two input dicts differ in their keys, shapes or non-tensor values."""
    return a.keys() != b.keys() or any(getattr(a[k], "shape", a[k]) != getattr(b[k], "shape", b[k]) for k in a)


def run_one(model_type):
    """Runs every stage for one model type; returns the record (never raises)."""
    import torch
    import transformers

    import torch_tpu
    from harness import fallbacks, main_tensor
    from tiny import GENERATIVE, model_classes, shrink

    transformers.logging.set_verbosity_error()
    torch.set_num_threads(1)  # CPU's reference: OpenMP threads on a busy machine cost 30x
    rec = {"model_type": model_type, "verdict": None, "reason": "", "class": None, "params": None,
           "stages": {}, "fallbacks": {}}
    try:
        cfg = shrink(transformers.AutoConfig.for_model(model_type))
    except Exception as e:
        return {**rec, "verdict": "NOT_BUILDABLE", "reason": f"config: {type(e).__name__}: {e}"[:300]}
    model = mapping = None
    errors = []
    for mapping, cls in model_classes(model_type):
        try:
            # Counted on the meta device first: a config that does not shrink can need tens of GB.
            with torch.device("meta"):
                params = sum(p.numel() for p in cls(copy.deepcopy(cfg)).parameters())
            if params > MAX_PARAMS:
                return {**rec, "class": cls.__name__, "params": params, "verdict": "NOT_BUILDABLE",
                        "reason": f"{params:,} parameters after shrinking"}
            torch.manual_seed(0)
            model = cls(copy.deepcopy(cfg)).eval()
            break
        except Exception as e:
            errors.append(f"{cls.__name__}: {type(e).__name__}: {e}"[:200])
            model = None
    if model is None:
        return {**rec, "verdict": "NOT_BUILDABLE", "reason": "; ".join(errors)[:400] or "no auto-model class"}
    rec["class"] = type(model).__name__
    rec["params"] = params
    try:
        inputs, key, cpu_main = cpu_reference(model, mapping)
    except NoRecipe as e:
        return {**rec, "verdict": "NOT_BUILDABLE", "reason": str(e)}
    except Exception as e:
        return {**rec, "verdict": "NOT_BUILDABLE", "reason": f"CPU forward: {type(e).__name__}: {e}"[:300]}

    problems = []
    torch_tpu.metrics.reset()
    stage = "to"
    try:
        with torch.tpu.precision("highest"):
            tmodel = copy.deepcopy(model).to("tpu")
            tin = {k: v.to("tpu") if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
            w = torch.randn(cpu_main.shape, generator=torch.Generator().manual_seed(1))
            # A training forward keeps no KV cache (RWKV updates its cached state in place,
            # which autograd rejects on CPU too)
            train_kw = {"use_cache": False} if "use_cache" in inspect.signature(model.forward).parameters else {}
            train_kw = {k: v for k, v in train_kw.items() if k not in inputs}
            exact = {}

            def f64_reference(kind):
                """float64 CPU forward ("forward"), or gradients and stepped parameters ("grad",
                "step"), computed once when needed."""
                if kind not in exact:
                    m64 = copy.deepcopy(model).double()
                    in64 = {k: v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v
                            for k, v in inputs.items()}
                    if kind == "forward":
                        with torch.no_grad():
                            exact["forward"] = {key: main_tensor(seeded(m64)(**in64))[1]}
                    else:
                        (main_tensor(seeded(m64)(**in64, **train_kw))[1] * w.double()).sum().backward()
                        exact["grad"] = {n: p.grad for n, p in m64.named_parameters()}
                        torch.optim.SGD(m64.parameters(), lr=0.1).step()
                        exact["step"] = {n: p.detach() for n, p in m64.named_parameters()}
                return exact[kind]

            def distance(x, ref):
                x = x.detach().cpu().double()
                return (x - ref).abs().max().item() if x.shape == ref.shape and x.numel() else (
                    0.0 if x.shape == ref.shape else float("inf"))

            def agrees(ours, cpus, kind, n, what):
                """close(), or (the conformance tool's rule) at least as close to the float64
                computation as CPU's float32 result: an ill-conditioned tiny model leaves
                CPU's own float32 gradients far from float64 (VITS's flows: 2.4%), and a
                data-dependent size (SuperPoint's keypoints over a threshold) can differ
                from float64's on CPU."""
                msg = close(ours, cpus, what)
                if msg is None:
                    return None
                try:
                    ref = f64_reference(kind)[n]
                except Exception:
                    return msg
                if ref is None or not distance(ours, ref) <= distance(cpus, ref):
                    return msg
                rec.setdefault("float64_rule", []).append(what)
                return None

            stage = "forward"
            with torch.no_grad():
                tout = seeded(tmodel)(**tin)
            _, tmain = main_tensor(tout)
            problems.append(agrees(tmain, cpu_main, "forward", key, f"forward {key}"))
            rec["stages"]["forward"] = problems[-1] is None
            stage = "backward"
            # The CPU model runs the same no-grad forward first: what a model caches in eval mode
            # (LeViT's attention biases, without their graph) then shapes both training forwards alike.
            cmodel = copy.deepcopy(model)
            with torch.no_grad():
                seeded(cmodel)(**inputs)
            try:
                cpu_train = main_tensor(seeded(cmodel)(**inputs, **train_kw))[1]
                if cpu_train.grad_fn is not None:
                    (cpu_train * w).sum().backward()
            except Exception as e:
                return {**rec, "verdict": "NOT_BUILDABLE", "fallbacks": fallbacks(),
                        "reason": f"CPU backward: {type(e).__name__}: {e}"[:300]}
            if cpu_train.grad_fn is None:  # no parameter reaches the output (a codebook's code indices)
                rec["stages"]["backward"] = "skipped: output has no gradient"
            else:
                (main_tensor(seeded(tmodel)(**tin, **train_kw))[1] * w.to("tpu")).sum().backward()
                worst = None
                for (n, p), (_, q) in zip(tmodel.named_parameters(), cmodel.named_parameters()):
                    if q.grad is not None and p.grad is not None:
                        msg = agrees(p.grad, q.grad, "grad", n, f"grad {n}")
                        if msg:
                            worst = worst or msg
                    elif (q.grad is None) != (p.grad is None):
                        worst = worst or f"grad {n}: presence differs"
                problems.append(worst)
                stage = "optimizer step"
                for m_ in (tmodel, cmodel):
                    torch.optim.SGD(m_.parameters(), lr=0.1).step()
                for (n, p), (_, q) in zip(tmodel.named_parameters(), cmodel.named_parameters()):
                    msg = agrees(p, q, "step", n, f"after step {n}")
                    if msg:
                        problems.append(msg)
                        break
                rec["stages"]["backward"] = not any(problems[1:])
            if mapping in GENERATIVE and "input_ids" in inputs:
                stage = "generate"
                gi = {k: v[:, :6] for k, v in inputs.items() if k in ("input_ids", "attention_mask")}
                kw = dict(max_new_tokens=4, do_sample=False, pad_token_id=0)
                try:
                    gc = cmodel.generate(**gi, **kw)
                except Exception as e:  # CPU cannot generate with this tiny config: no reference
                    rec["stages"]["generate"] = f"skipped: CPU generate failed: {type(e).__name__}"
                    gc = None
                gt = tmodel.generate(**{k: v.to("tpu") for k, v in gi.items()}, **kw) if gc is not None else None
                if gc is not None:
                    same = torch.equal(gt.cpu(), gc)
                    rec["stages"]["generate"] = same
                    if not same:
                        problems.append("generate: tokens differ")
            torch.tpu.synchronize()
    except Exception as e:
        rec["fallbacks"] = fallbacks()
        tb = traceback.format_exc().strip().splitlines()[-1]
        return {**rec, "verdict": "ERROR", "reason": f"{stage}: {type(e).__name__}: {e}"[:300] or tb}
    rec["fallbacks"] = fallbacks()
    problems = [p for p in problems if p]
    return {**rec, "verdict": "WRONG" if problems else "PASS", "reason": "; ".join(problems)[:300]}


def summarize(records, path):
    counts, sections = summary_sections(records)
    buildable = len(records) - counts.get("NOT_BUILDABLE", 0)
    passed = counts.get("PASS", 0)
    lines = ["# Tier 1: transformers architectures on tpu vs CPU", "",
             f"{len(records)} model types; {buildable} buildable tiny; **{passed} PASS "
             f"({100 * passed / max(buildable, 1):.1f}% of buildable)**", ""] + sections
    lines += ["", "## Every model that did not pass", "", "| model | verdict | reason |", "|---|---|---|"]
    for r in sorted(records, key=lambda r: (r["verdict"], r["model_type"])):
        if r["verdict"] != "PASS":
            lines.append(f"| {r['model_type']} | {r['verdict']} | {r['reason'].replace('|', '/')[:200]} |")
    path.write_text("\n".join(lines) + "\n")
    return counts, buildable, passed


def main():
    args = tier_arguments(timeout=180).parse_args()
    if args.one:
        print(json.dumps(run_one(args.one)))
        return 0
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    models = (args.models.split(",") if args.models else CI_SUBSET if args.subset == "ci"
              else sorted(CONFIG_MAPPING_NAMES))
    return run_tier("tier1", run_one, models, args, summarize)


if __name__ == "__main__":
    sys.exit(main())
