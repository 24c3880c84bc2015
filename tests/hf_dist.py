"""What tests/test_hf_dist.py runs under torchrun on an emulated slice: transformers' Trainer with
4 ranks on tpu_dist, as DDP and as FSDP2 (accelerate's FSDP plugin, through
TrainingArguments(fsdp=..., fsdp_config={"fsdp_version": 2})). The training code names neither
the device nor the backend: accelerate picks the tpu, one chip per rank, its multi-device
distributed type and tpu_dist by itself (torch_tpu/_accelerate.py).

    TPU_ACCELERATOR_TYPE=v6e-4 torchrun --standalone --nproc_per_node=4 tests/hf_dist.py OUT ddp fsdp2
    python tests/hf_dist.py OUT cpu     # the single-process CPU reference on the same global batch

Each mode writes OUT/<mode>.pt (rank 0): the trained parameters (whole tensors, on the CPU), the
logged losses and gradient norms, the evaluation loss, and what accelerate chose. Every rank takes PER_RANK sequences
a step, the reference WORLD * PER_RANK: the same global batch (the sampler is sequential)."""
import os
import pathlib
import sys
import tempfile

import torch
import torch.distributed as dist

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "demo"))
import hf_trainer  # noqa: E402
from transformers import Trainer, TrainingArguments  # noqa: E402

WORLD, PER_RANK, STEPS = 4, 2, 3
FSDP2 = dict(fsdp="full_shard", fsdp_config={"fsdp_version": 2, "transformer_layer_cls_to_wrap": ["LlamaDecoderLayer"]})


def train(mode):
    """Trains the tiny Llama of demo/hf_trainer.py with Trainer, then evaluates it; returns the
    record the mode writes."""
    per_device = PER_RANK if mode != "cpu" else WORLD * PER_RANK
    kwargs = {"cpu": dict(use_cpu=True), "ddp": {}, "fsdp2": FSDP2}[mode]
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(output_dir=out, max_steps=STEPS, optim="sgd", learning_rate=0.5, logging_steps=1,
                                 per_device_train_batch_size=per_device, per_device_eval_batch_size=per_device,
                                 save_strategy="no", report_to=[], seed=0, disable_tqdm=True,
                                 train_sampling_strategy="sequential", **kwargs)
        trainer = Trainer(model=hf_trainer.tiny_llama(), args=args, train_dataset=hf_trainer.RandomTokens(),
                          eval_dataset=hf_trainer.RandomTokens())
        trainer.train()
        eval_loss = trainer.evaluate()["eval_loss"]  # every rank's losses gathered
    acc = trainer.accelerator
    acc.wait_for_everyone()  # a barrier with accelerate's device_ids
    model = acc.unwrap_model(trainer.model_wrapped)
    params = {}
    for name, p in model.named_parameters():  # FSDP2: DTensor shards; full_tensor() gathers them on every rank
        p = p.detach()
        params[name] = (p.full_tensor() if hasattr(p, "full_tensor") else p).cpu()
    return {
        "params": params,
        "logged": [(h["loss"], h["grad_norm"]) for h in trainer.state.log_history if "loss" in h],
        "eval_loss": eval_loss,
        "device": str(acc.device), "args_device": str(trainer.args.device),
        "distributed_type": str(acc.distributed_type).split(".")[-1], "parallel_mode": str(trainer.args.parallel_mode),
        "world_size": trainer.args.world_size,
        "backend": dist.get_backend() if dist.is_initialized() else None,
        "wrapper": type(trainer.model_wrapped).__name__,
        "fallback_ops": torch_tpu_fallbacks(),
    }


def torch_tpu_fallbacks():
    import torch_tpu

    return torch_tpu.metrics.fallback_ops()


def main():
    out, modes = pathlib.Path(sys.argv[1]), sys.argv[2:]
    if "cpu" not in modes:
        torch.tpu.set_matmul_precision("highest")  # f32 matmuls (the default is one bf16 pass, as on a TPU)
    for mode in modes:
        record = train(mode)
        if int(os.environ.get("RANK", 0)) == 0:
            torch.save(record, out / f"{mode}.pt")
            print(f"ok {mode}: {record['distributed_type']} on {record['device']} over {record['backend']}, "
                  f"{record['wrapper']}, losses {[round(loss, 6) for loss, _ in record['logged']]}", flush=True)


if __name__ == "__main__":
    main()
