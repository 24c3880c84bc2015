"""Hugging Face on tpu: save_pretrained/from_pretrained(device_map="tpu"), model.to("tpu"),
greedy and sampled generate(), and Trainer picking the tpu by itself — each against PyTorch CPU,
with no CPU fallbacks."""
import pathlib
import sys

import pytest
import torch

import torch_tpu

transformers = pytest.importorskip("transformers")
sys.path.insert(0, str(pathlib.Path(__file__).parent.parent / "demo"))
import hf_trainer  # noqa: E402

VOCAB = hf_trainer.VOCAB


@pytest.fixture(autouse=True)
def highest_precision_and_no_fallbacks():
    transformers.logging.set_verbosity_error()
    torch_tpu.metrics.reset()
    with torch.tpu.precision("highest"):
        yield
    assert torch_tpu.metrics.fallback_ops() == {}


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny_llama")
    model = hf_trainer.tiny_llama().eval()
    for cfg in (model.config, model.generation_config):  # generate runs to max_new_tokens
        cfg.pad_token_id, cfg.eos_token_id = 0, None
    model.save_pretrained(path)
    return path, model


def prompt():
    return torch.randint(1, VOCAB, (2, 6), generator=torch.Generator().manual_seed(3))


@pytest.mark.parametrize("device_map", ["tpu", "tpu:0", {"": "tpu"}])
def test_from_pretrained_places_weights_on_tpu(saved, device_map):
    path, cpu_model = saved
    model = transformers.AutoModelForCausalLM.from_pretrained(path, device_map=device_map)
    assert {str(p.device) for p in model.parameters()} == {"tpu:0"}
    for (n, p), q in zip(model.state_dict().items(), cpu_model.state_dict().values()):
        assert torch.equal(p.cpu(), q), n
    with torch.no_grad():
        torch.testing.assert_close(model(prompt().to("tpu")).logits.cpu(), cpu_model(prompt()).logits,
                                   rtol=1e-5, atol=1e-5)


def test_module_to_tpu_and_greedy_generate_matches_cpu(saved):
    _, cpu_model = saved
    model = transformers.AutoModelForCausalLM.from_config(cpu_model.config)
    model.load_state_dict(cpu_model.state_dict())
    model = model.to("tpu").eval()
    got = model.generate(prompt().to("tpu"), max_new_tokens=10, do_sample=False)
    want = cpu_model.generate(prompt(), max_new_tokens=10, do_sample=False)
    assert got.device.type == "tpu" and torch.equal(got.cpu(), want)


def test_sampled_generate_follows_the_tpu_generator(saved):
    path, _ = saved
    model = transformers.AutoModelForCausalLM.from_pretrained(path, device_map="tpu").eval()

    def sample(tpu_seed, cpu_seed):
        torch.manual_seed(cpu_seed)  # must not matter: sampling draws from the tpu generator
        torch.tpu.manual_seed(tpu_seed)
        out = model.generate(prompt().to("tpu"), max_new_tokens=12, do_sample=True, top_k=0, temperature=1.5)
        return out.cpu()

    a, b, c = sample(5, 0), sample(5, 1), sample(6, 0)
    assert torch.equal(a, b)
    assert not torch.equal(a[:, 6:], c[:, 6:])
    assert torch.equal(a[:, :6], prompt()) and a.shape == (2, 18)
    assert int(a.min()) >= 0 and int(a.max()) < VOCAB


def test_trainer_picks_tpu_and_matches_cpu():
    tpu_trainer, tpu_logged = hf_trainer.train(hf_trainer.tiny_llama())
    assert tpu_trainer.args.device.type == "tpu" and tpu_trainer.accelerator.device.type == "tpu"
    assert {p.device.type for p in tpu_trainer.model.parameters()} == {"tpu"}
    cpu_trainer, cpu_logged = hf_trainer.train(hf_trainer.tiny_llama(), use_cpu=True)
    assert cpu_trainer.args.device.type == "cpu" and cpu_trainer.accelerator.device.type == "cpu"
    assert len(tpu_logged) == 4
    torch.testing.assert_close(tpu_logged, cpu_logged, rtol=1e-5, atol=1e-5)  # losses, gradient norms


def test_trainer_bf16_runs_linear_layers_in_bf16_like_cpu():
    dtypes = []
    model = hf_trainer.tiny_llama()
    model.model.layers[0].mlp.down_proj.register_forward_hook(lambda m, i, out: dtypes.append(out.dtype))
    trainer, tpu_logged = hf_trainer.train(model, bf16=True)
    assert trainer.accelerator.device.type == "tpu" and trainer.accelerator.native_amp
    assert set(dtypes) == {torch.bfloat16}
    _, cpu_logged = hf_trainer.train(hf_trainer.tiny_llama(), use_cpu=True, bf16=True)
    torch.testing.assert_close([loss for loss, _ in tpu_logged], [loss for loss, _ in cpu_logged],
                               rtol=1.6e-2, atol=1e-5)  # bf16 resolution


def test_device_map_auto_places_on_tpu_with_its_free_memory(saved):
    from accelerate.utils import get_max_memory

    path, cpu_model = saved
    budget = get_max_memory()  # what device_map="auto" divides: the chips first, then the host
    assert list(budget) == [*range(torch.tpu.device_count()), "cpu"]
    assert budget[0] == torch.tpu.mem_get_info(0)[0]
    for device_map in ("auto", "balanced", "sequential"):
        model = transformers.AutoModelForCausalLM.from_pretrained(path, device_map=device_map)
        assert {str(t.device) for t in [*model.parameters(), *model.buffers()]} == {"tpu:0"}, device_map
    with torch.no_grad():
        torch.testing.assert_close(model(prompt().to("tpu")).logits.cpu(), cpu_model(prompt()).logits,
                                   rtol=1e-5, atol=1e-5)


def test_device_map_auto_offloads_what_max_memory_leaves_out_to_cpu(saved):
    path, cpu_model = saved
    model = transformers.AutoModelForCausalLM.from_pretrained(path, device_map="auto",
                                                              max_memory={0: "60KB", "cpu": "1GB"})
    assert set(model.hf_device_map.values()) == {0, "cpu"} and model.hf_device_map["model.embed_tokens"] == 0
    with torch.no_grad():  # accelerate's hooks bring the offloaded layers to tpu:0 for their forward
        torch.testing.assert_close(model(prompt().to("tpu")).logits.cpu(), cpu_model(prompt()).logits,
                                   rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("env, cpu, want", [(None, False, "tpu"), (None, True, "cpu"), ("cpu", False, "cpu"),
                                            ("tpu:0", False, "tpu:0")])
def test_accelerator_picks_tpu_unless_told_otherwise(monkeypatch, env, cpu, want):
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    if env is None:
        monkeypatch.delenv("ACCELERATE_TORCH_DEVICE", raising=False)
    else:
        monkeypatch.setenv("ACCELERATE_TORCH_DEVICE", env)
    AcceleratorState._reset_state(reset_partial_state=True)
    try:
        accelerator = Accelerator(cpu=cpu)
        assert str(accelerator.device) == want and accelerator.distributed_type == "NO"
    finally:
        AcceleratorState._reset_state(reset_partial_state=True)
