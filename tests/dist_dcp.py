"""torch.distributed.checkpoint on tpu_dist (tests/test_tpu_dist.py): `save DIR` from one world
size with an FSDP2-sharded model, `load DIR` into another; the loaded full state must equal the
saved one, which rank 0 of the save also writes whole to DIR/full.pt."""
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict, StateDictOptions
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

MODE, DIR = sys.argv[1], sys.argv[2]
dist.init_process_group("tpu_dist")
world = dist.get_world_size()
torch.manual_seed(1 if MODE == "save" else 2)  # the load starts from other weights
model = nn.Sequential(nn.Linear(12, 24), nn.ReLU(), nn.Linear(24, 6)).to("tpu")
for layer in (model[0], model[2]):
    fully_shard(layer, mesh=init_device_mesh("tpu", (world,)))
fully_shard(model, mesh=init_device_mesh("tpu", (world,)))
full = StateDictOptions(full_state_dict=True, cpu_offload=True)
if MODE == "save":
    dcp.save({"model": get_model_state_dict(model)}, checkpoint_id=DIR)
    whole = get_model_state_dict(model, options=full)
    if dist.get_rank() == 0:
        torch.save(whole, os.path.join(DIR, "full.pt"))
else:
    state = {"model": get_model_state_dict(model)}
    dcp.load(state, checkpoint_id=DIR)
    set_model_state_dict(model, state["model"])
    whole = get_model_state_dict(model, options=full)
    if dist.get_rank() == 0:
        want = torch.load(os.path.join(DIR, "full.pt"))
        for k, v in want.items():
            assert torch.equal(whole[k], v), f"{k} differs after loading into {world} ranks"
        print("ok loaded", sorted(want), flush=True)
dist.destroy_process_group()
