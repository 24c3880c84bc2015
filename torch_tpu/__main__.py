"""``python -m torch_tpu info`` — the emulated chips this process sees (like ``tpu-info``) and every
environment variable the runtime reads, with its value here."""
import argparse
import importlib
import sys

import torch

import torch_tpu
import torch_tpu._runtime


def info() -> str:
    lines = []
    n = torch.tpu.device_count()
    p0 = torch.tpu.get_device_properties(0)
    lines.append(f"torch_tpu {torch_tpu.__version__} (runtime {'.'.join(map(str, torch_tpu._C._runtime_version()))}), "
                 f"torch {torch.__version__}")
    lines.append(f"slice {p0.accelerator_type}: generation {p0.generation}, topology {p0.topology}, "
                 f"{n} chip(s) visible to this process, eager mode {torch.tpu.get_eager_mode()}, "
                 f"matmul precision {torch.tpu.get_matmul_precision()}")
    lines.append(f"{'device':8} {'chip':>4} {'HBM used':>12} {'HBM total':>12} {'peak':>12} {'bf16 TFLOP/s':>13} "
                 f"{'HBM GB/s':>9} {'MXU':>9}")
    for i in range(n):
        p = torch.tpu.get_device_properties(i)
        s = torch.tpu.memory_stats(i)
        gib = 1 << 30
        mxu = f"{p.mxu_count}x{p.mxu_dim}" if p.mxu_count > 0 else f"?x{p.mxu_dim}"
        lines.append(f"tpu:{i:<4} {p.global_index:>4} {s['reserved_bytes.all.current'] / gib:>8.2f} GiB "
                     f"{p.total_memory / gib:>8.2f} GiB {s['allocated_bytes.all.peak'] / gib:>8.2f} GiB "
                     f"{p.bf16_tflops:>13.0f} {p.hbm_GBps:>9.0f} {mxu:>9}")
    runs = torch_tpu._runtime.host_runs()
    lines.append(f"kernels: the {torch_tpu._runtime.load()} build of the runtime (TPU_ISA picks one of the builds "
                 f"this host runs: {', '.join(runs)}; default {runs[0]})")
    price = f"${p0.usd_per_chip_hour:.2f} per chip-hour" if p0.usd_per_chip_hour else "price not published"
    lines.append(f"(emulated on the host CPU; HBM is accounted per chip against the {p0.generation} capacity; {price})")
    lines.append("environment the runtime reads:")
    for name, doc, value in torch_tpu._C._environment():
        lines.append(f"  {name:22} {value if value is not None else '(unset)':12} {doc}")
    return "\n".join(lines)


COMMANDS = {
    "info": "chips, generation, topology, HBM use, the kernels' instruction set, environment",
    "dryrun": "what a training step or serving would take on a TPU slice, on fake tensors (--help)",
    "port": "run a PyTorch script on tpu and report what will bite when porting it to TPUs (--help)",
}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("dryrun", "port"):  # commands with their own arguments
        return importlib.import_module(f"torch_tpu.{argv[0]}").main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m torch_tpu")
    parser.add_argument("command", choices=list(COMMANDS), help="; ".join(f"{k}: {v}" for k, v in COMMANDS.items()))
    parser.parse_args(argv)
    print(info())
    return 0


if __name__ == "__main__":
    sys.exit(main())
