"""A plain transformers training script, with nothing tpu-specific in it: TrainingArguments and
Trainer pick the tpu by themselves (torch_tpu autoloads with torch).

    python demo/hf_trainer.py            # on tpu
    python demo/hf_trainer.py --cpu      # the same run on PyTorch CPU
    python demo/hf_trainer.py --bf16     # mixed precision (torch.autocast on the tpu)"""
import argparse
import tempfile

import torch
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

VOCAB = 64


class RandomTokens(torch.utils.data.Dataset):
    def __len__(self):
        return 32

    def __getitem__(self, i):
        ids = torch.randint(0, VOCAB, (16,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "labels": ids}


def tiny_llama():
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=64))


def train(model, steps=4, use_cpu=False, bf16=False):
    """Trains with Trainer; returns (trainer, [(loss, gradient norm) logged at each step])."""
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(output_dir=out, per_device_train_batch_size=4, max_steps=steps, learning_rate=1e-2,
                                 logging_steps=1, save_strategy="no", report_to=[], seed=0, use_cpu=use_cpu,
                                 bf16=bf16, disable_tqdm=True)
        trainer = Trainer(model=model, args=args, train_dataset=RandomTokens())
        trainer.train()
    return trainer, [(h["loss"], h["grad_norm"]) for h in trainer.state.log_history if "loss" in h]


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--cpu", action="store_true")
    p.add_argument("--bf16", action="store_true")
    a = p.parse_args()
    trainer, logged = train(tiny_llama(), use_cpu=a.cpu, bf16=a.bf16)
    print(f"device {trainer.args.device}, model on {next(trainer.model.parameters()).device}")
    print("losses", " ".join(f"{loss:.5f}" for loss, _ in logged))
