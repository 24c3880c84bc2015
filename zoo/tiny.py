"""Tiny configurations and inputs for any transformers architecture: shrink a default
config's sizes (recursively through every sub-config), pick the most specific auto-model
class (or, for a sub-config no auto mapping names, the classes built from its config class),
and build inputs for the forward's main and required arguments from per-name recipes."""
import dataclasses
import inspect

import torch
import transformers
from transformers.models.auto import modeling_auto as ma

# attribute -> tiny value. Heads stay at 2 and hidden sizes at 64 so head_dim is 32. A value
# for an attribute that holds one entry per stage (depths, per-stage heads, conv_dim) fills
# every stage; hidden_sizes doubles per stage from its value.
SIZES = {
    "hidden_size": 64, "d_model": 64, "n_embd": 64, "embed_dim": 64, "dim": 64, "model_dim": 64, "emb_dim": 64,
    "word_embed_proj_dim": 64, "projection_dim": 32, "embedding_size": 64, "text_embed_dim": 64,
    "num_hidden_layers": 2, "n_layer": 2, "num_layers": 2, "n_layers": 2, "encoder_layers": 2, "decoder_layers": 2,
    "num_encoder_layers": 2, "num_decoder_layers": 2,
    "num_attention_heads": 2, "n_head": 2, "n_heads": 2, "encoder_attention_heads": 2, "decoder_attention_heads": 2,
    "num_heads": 2, "num_key_value_heads": 1, "num_kv_heads": 1, "head_dim": 32, "kv_channels": 32,
    "intermediate_size": 128, "ffn_dim": 128, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128, "n_inner": 128,
    "d_ff": 128, "hidden_dim": 128, "moe_intermediate_size": 64, "shared_expert_intermediate_size": 64,
    "num_experts": 4, "num_local_experts": 4, "n_routed_experts": 4, "num_experts_per_tok": 2,
    "n_group": 2, "topk_group": 1, "first_k_dense_replace": 1,
    "kv_lora_rank": 32, "q_lora_rank": 48, "qk_rope_head_dim": 16, "qk_nope_head_dim": 16, "v_head_dim": 32,
    "rotary_dim": 16, "d_head": 32, "vocab_size": 256, "decoder_vocab_size": 256, "max_position_embeddings": 128, "n_positions": 128,
    "max_source_positions": 32, "max_target_positions": 64, "image_size": 32, "patch_size": 8, "num_channels": 3,
    "hidden_sizes": 16, "depths": 1, "num_mel_bins": 16, "d_kv": 32,
    "index_n_heads": 2, "index_head_dim": 32, "vocab_size_per_layer_input": 256, "hidden_size_per_layer_input": 16,
    # widths another (sub-)config's hidden size must equal
    "out_hidden_size": 64, "text_hidden_size": 64, "condition_dim": 64, "adapter_input_size": 64,
    "audio_hidden_size": 64, "decoder_hidden_size": 64, "adapter_in_dim": 64, "adapter_out_dim": 64,
    "num_kv_shared_layers": 0,  # layers reusing earlier layers' KV: none of the tiny two
}
# attribute -> value for a size the default config leaves unset (None) and the model needs.
REQUIRED = {"vocab_size": 256, "prediction_length": 4, "num_experts_per_tok": 2, "num_experts": 4, "top_k_experts": 2,
            "moe_intermediate_size": 64, "head_dim": 32, "num_local_experts": 4, "n_routed_experts": 4,
            "n_shared_experts": 1}
# Per-architecture exceptions, applied after SIZES. Swin's attention windows must tile every
# stage: image_size = patch_size * window_size * 2**(stages - 1); its width doubles per stage.
# LeViT's stem always downsamples 16x, and its attention biases are sized for image / patch.
# T5's config class has no decoder_start_token_id (checkpoints set the pad id, 0); shifting
# labels into decoder inputs needs it. BiT's GroupNorm groups must divide its tiny widths;
# CodeGen splits its heads over 4 model-parallel shards; DiffLlama's differential attention
# splits the values over an even number of KV heads. ESM's default config has no padding id
# (its checkpoints' is 1), which its position ids need. EoMT's query blocks are its last
# layers. Mamba-2's SSM heads span hidden_size x expand; GPT-Neo lists its layers' attention
# kinds by pattern. HGNet-V2's stages chain stem -> in -> out channels, and its head reads
# hidden_sizes[-1].
OVERRIDES = {**{t: {"image_size": 64, "patch_size": 4, "window_size": 2, "embed_dim": 32}
                for t in ("swin", "swinv2", "donut-swin", "maskformer-swin")},
             "levit": {"patch_size": 16}, "t5": {"decoder_start_token_id": 0}, "bit": {"num_groups": 2},
             "codegen": {"n_head": 4}, "diffllama": {"num_key_value_heads": 2}, "esm": {"pad_token_id": 1},
             **{t: {"num_blocks": 1} for t in ("eomt", "eomt_dinov3")},
             "mamba2": {"num_heads": 4, "n_groups": 2},
             "hgnet_v2": {"stem_channels": [3, 16, 16], "stage_in_channels": [16, 16, 32, 64],
                          "stage_mid_channels": [16, 16, 32, 64], "stage_out_channels": [16, 32, 64, 128],
                          "stage_numb_of_layers": [2, 2, 2, 2]},
             "gpt_neo": {"attention_types": [[["global", "local"], 1]]},
             # noise the model draws itself comes from each device's own generator (as on CUDA),
             # and VITS's drawn durations set its output length: sampled without noise
             "vits": {"noise_scale": 0.0, "noise_scale_duration": 0.0}}
# Text configs without mrope_section whose models fall back to a full-size default one.
MROPE = {"glm4v_text", "glm4v_moe_text", "glm_image_text", "glm_ocr_text", "hunyuan_vl_text"}
GROWING = {"hidden_sizes"}  # per-stage widths double stage by stage
TIED = {"num_stages"}  # an alias (convnext's num_hidden_layers) of the per-stage lists' length
LAYERS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")  # the layer count, by its names
KV_HEADS = ("num_key_value_heads", "num_kv_heads")
PREFERRED = ["MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "MODEL_FOR_MASKED_LM_MAPPING_NAMES",
             "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES", "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES",
             "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES", "MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES",
             "MODEL_FOR_CTC_MAPPING_NAMES", "MODEL_MAPPING_NAMES"]
GENERATIVE = {"MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES"}
TOKENS = ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id", "sep_token_id",
          "cls_token_id", "mask_token_id", "unk_token_id", "blank_token_id")


def _small(key, old, value):
    """The shrunk value of one attribute, or None to leave it."""
    if old is None:
        return REQUIRED.get(key)
    if value is None:
        return None
    if isinstance(old, bool):
        return None
    if isinstance(old, (list, tuple)):  # per-stage: keep the stage count
        if not old or not all(isinstance(v, int) and not isinstance(v, bool) for v in old):
            return None
        return [value * 2**i for i in range(len(old))] if key in GROWING else [value] * len(old)
    if not isinstance(old, int) or (old < value and "vocab_size" not in key):
        return None  # not a size, or already smaller
    return value


def _get(cfg, name, default=None):
    """cfg.name, also where a heterogeneous config refuses a global read of a per-layer attribute."""
    raw = getattr(cfg, "_getattr_without_heterogeneous_validation", None)
    return raw(name, default) if raw else getattr(cfg, name, default)


def _per_layer(cfg):
    """{layer: {attribute: value}}: what a heterogeneous config overrides layer by layer."""
    spec = cfg.__dict__.get("_heterogeneity_spec")
    return spec.per_layer_overrides if spec is not None else {}


def _subconfigs(cfg):
    """{field: sub-config} for every field of cfg that holds a config."""
    return {f.name: v for f in dataclasses.fields(cfg)
            if isinstance(v := _get(cfg, f.name), transformers.PretrainedConfig)}


def _spread(old, n):
    """n of a per-layer list's entries in order, keeping each distinct value while n allows
    (a hybrid keeps an attention layer among its Mamba ones; Gemma its full-attention one)."""
    keep = []
    for i, v in enumerate(old):
        if len(keep) < n and all(old[j] != v for j in keep):
            keep.append(i)
    keep += [i for i in range(len(old)) if i not in keep][:n - len(keep)]
    return [old[i] for i in sorted(keep)]


def _sections(total, ratio):
    """total split into len(ratio) integer parts in proportion to ratio."""
    cuts = [round(total * sum(ratio[:i + 1]) / sum(ratio)) for i in range(len(ratio))]
    return [b - a for a, b in zip([0] + cuts, cuts)]


def _rope(cfg, kw):
    """rope_parameters with Qwen2-VL-style multimodal sections (temporal, height, width)
    resized to the tiny head's rotary half-width, or None where the config has none. The
    sections keep the default's proportions; a config of MROPE gets three even ones."""
    rope = _get(cfg, "rope_parameters")
    if not isinstance(rope, dict) or not (isinstance(rope.get("mrope_section"), list) or cfg.model_type in MROPE):
        return None
    heads = kw.get(cfg.attribute_map.get("num_attention_heads", "num_attention_heads"))
    hidden = kw.get(cfg.attribute_map.get("hidden_size", "hidden_size"))
    head_dim = kw.get("head_dim") or (hidden // heads if hidden and heads else None)
    if head_dim is None:
        return None
    half = int(head_dim * rope.get("partial_rotary_factor", 1.0)) // 2
    return {**rope, "mrope_section": _sections(half, rope.get("mrope_section") or [1, 1, 1])}


def _per_layer_lists(cfg, kw, fields):
    """The lists with one entry per layer of the default config (layer types, per-layer
    sizes shrunk by SIZES) cut to the new layer count by _spread; numeric lists SIZES does
    not cover are left for the constructor to derive."""
    layers = next((cfg.attribute_map.get(k, k) for k in LAYERS if cfg.attribute_map.get(k, k) in kw), None)
    if layers is None:
        return {}
    n_old, n, out = _get(cfg, layers), kw[layers], {}
    for name in sorted(fields - {layers}):
        v = kw.get(name, _get(cfg, name))
        if (isinstance(v, (list, tuple)) and len(v) == n_old != n
                and (name in kw or not any(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v))):
            out[name] = _spread(list(v), n)
    return out


def _construct(cfg, kw, fields):
    """(type(cfg)(**kw), the kw it was built from). Where the constructor refuses, kw is
    repaired step by step: per-layer lists cut to the new layer count, then as many KV heads
    as heads (for a model that refuses grouped KV heads). Raises the last refusal when no
    repair helps."""
    heads = kw.get(cfg.attribute_map.get("num_attention_heads", "num_attention_heads"))
    mha = {k: heads for k in (cfg.attribute_map.get(k, k) for k in KV_HEADS) if k in kw and heads}
    for i, fix in enumerate(({}, _per_layer_lists(cfg, kw, fields), mha)):
        kw = {**kw, **fix}
        try:
            return type(cfg)(**kw), kw
        except Exception:
            if i == 2:
                raise


def shrink(cfg, sizes=SIZES, depth=0):
    """A new config of cfg's class (a default one: AutoConfig.for_model) with its sizes
    replaced from `sizes` (unset ones the model needs from REQUIRED), recursively through
    sub-configs. Built through the constructor from the changed attributes only, so what
    the config derives from them (Swin's hidden_size, DeepSeek's qk_head_dim, per-layer
    layer_types) follows; OVERRIDES apply last; _construct repairs what the constructor
    refuses. The per-layer overrides a heterogeneous config's constructor derives
    (Gemma 4's wider full-attention heads) shrink by the same table in a second construction."""
    fields = {f.name for f in dataclasses.fields(cfg) if f.init and not f.name.startswith("_")}
    kw = {}
    latent = _get(cfg, "kv_lora_rank") is not None
    for key in dict.fromkeys([*sizes, *REQUIRED]):
        name = cfg.attribute_map.get(key, key)
        old = _get(cfg, name)
        if name in fields and name not in TIED and (key in sizes or old is None):
            # multi-head latent attention expands its latent to a key and value per head
            value = sizes["num_attention_heads"] if key in KV_HEADS and latent else sizes.get(key)
            v = _small(key, old, value)
            if v is not None:
                kw[name] = v
    for tok in TOKENS:
        v = _get(cfg, tok)
        if isinstance(v, int) and not isinstance(v, bool) and v >= sizes["vocab_size"] - 8:
            kw[tok] = 3
    if depth < 3:
        for sub, sub_cfg in _subconfigs(cfg).items():
            if sub in fields:
                kw[sub] = shrink(sub_cfg, sizes, depth + 1)
    if (rope := _rope(cfg, kw)) is not None:
        kw["rope_parameters"] = rope
    kw.update(OVERRIDES.get(cfg.model_type, {}))
    out, kw = _construct(cfg, kw, fields)
    per_layer = _per_layer(out)
    if per_layer:
        small = {i: {k: (_small(k, v, sizes[k]) if k in sizes else None) or v for k, v in o.items()}
                 for i, o in per_layer.items()}
        if small != per_layer:
            out = type(cfg)(**kw, per_layer_config=small)
    return out


# Class-name endings of the auto mappings' heads, for classes found by their config class.
HEADS = {"ForCausalLM": "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "ForMaskedLM": "MODEL_FOR_MASKED_LM_MAPPING_NAMES",
         "ForSequenceClassification": "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES",
         "ForImageClassification": "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES",
         "ForAudioClassification": "MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES",
         "ForCTC": "MODEL_FOR_CTC_MAPPING_NAMES"}


def _classes_of_config(model_type):
    """The model classes whose config_class is model_type's config class (sub-configs like
    *_vision_model have no auto-model entry but a class built from exactly that config):
    those transformers exports first, then its modeling modules' own; abstract bases (no
    forward) left out."""
    import importlib
    import pkgutil

    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES, model_type_to_module_name

    if model_type not in CONFIG_MAPPING_NAMES:
        return []
    pkg = f"transformers.models.{model_type_to_module_name(model_type)}"
    try:
        package = importlib.import_module(pkg)
    except Exception:
        return []
    config_class = getattr(package, CONFIG_MAPPING_NAMES[model_type], None)
    modules = [package]
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("modeling_"):
            try:
                modules.append(importlib.import_module(f"{pkg}.{info.name}"))
            except Exception:  # an optional dependency is missing
                pass
    found = []
    for module in modules:
        for name in dir(module):
            try:
                cls = getattr(module, name)
            except Exception:
                continue
            if (isinstance(cls, type) and issubclass(cls, transformers.PreTrainedModel) and cls not in found
                    and cls.config_class is config_class and cls.forward is not torch.nn.Module.forward):
                found.append(cls)
    return found


def model_classes(model_type, preferred=PREFERRED):
    """(mapping name, class) candidates, most specific first. A type no auto mapping names
    falls back to the classes of its config class, ordered by their heads' mappings."""
    out = []
    for mapping in preferred:
        name = getattr(ma, mapping).get(model_type)
        if isinstance(name, (tuple, list)):
            name = name[0]
        cls = getattr(transformers, name, None) if name else None
        if cls is not None:
            out.append((mapping, cls))
    if out:
        return out
    for cls in _classes_of_config(model_type):
        head = next((m for end, m in HEADS.items() if cls.__name__.endswith(end)), "MODEL_MAPPING_NAMES")
        out.append((head if head in preferred else "MODEL_MAPPING_NAMES", cls))
    rank = {m: i for i, m in enumerate(preferred)}
    return sorted(out, key=lambda mc: rank.get(mc[0], len(rank)))


def _cfg_get(cfg, *names, default=None):
    """The first of `names` set on cfg or, failing that, on one of its sub-configs
    (vision and text ones first)."""
    subs = _subconfigs(cfg)
    order = [cfg] + [subs.pop(k) for k in ("vision_config", "text_config", "audio_config", "encoder") if k in subs]
    for n in names:
        for c in order + list(subs.values()):
            v = _get(c, n)
            if v is not None:
                return v
    return default


SEQ2SEQ = {"MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES", "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES"}
CLASSIFY = {"MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES", "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES",
            "MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES"}


def _image(c):
    size = _cfg_get(c.cfg, "image_size", default=32)
    size = size[0] if isinstance(size, (list, tuple)) else size
    return torch.randn(c.batch, _cfg_get(c.cfg, "num_channels", default=3), size, size, generator=c.g)


def _frames(c):
    return 2 * _cfg_get(c.cfg, "max_source_positions", default=32)


def _audio(c):
    """A waveform (batch, samples), in the alternate layout with its channels (batch,
    channels, samples) as audio codecs take it; or for AST (patches strided over frequency
    and time) a spectrogram (batch, frames, mel bins)."""
    if getattr(c.cfg, "frequency_stride", None):
        return torch.randn(c.batch, c.cfg.max_length, c.cfg.num_mel_bins, generator=c.g)
    if c.alt:
        return torch.randn(c.batch, getattr(c.cfg, "audio_channels", 1), c.audio, generator=c.g)
    return torch.randn(c.batch, c.audio, generator=c.g)


def _features(c):
    length = _frames(c)
    feat = getattr(c.cfg, "input_feat_per_channel", None)
    mel = _cfg_get(c.cfg, "num_mel_bins", "feature_size", default=16)
    if feat:  # Speech2Text: (batch, frames, features)
        shape = (c.batch, length, feat * getattr(c.cfg, "input_channels", 1))
    elif c.alt:  # Parakeet and the like
        shape = (c.batch, length, mel)
    else:  # Whisper and the like: (batch, mel bins, frames)
        shape = (c.batch, mel, length)
    return torch.randn(*shape, generator=c.g)


def _boxes(c):
    """(batch, seq, 4) boxes x0 <= x1, y0 <= y1 on LayoutLM's 0..1000 page grid."""
    lo = torch.randint(0, 500, (c.batch, c.seq, 2), generator=c.g)
    hi = lo + torch.randint(0, 500, (c.batch, c.seq, 2), generator=c.g)
    return torch.stack([lo[..., 0], lo[..., 1], hi[..., 0], hi[..., 1]], -1)


def _series(c, length, *tail):
    """A time series (batch, length[, input_size]) or its per-step features."""
    width = getattr(c.cfg, "input_size", 1)
    return torch.randn(c.batch, length, *(tail or ((width,) if width > 1 else ())), generator=c.g)


def _past(c):  # the context plus the largest lag the model looks back
    return getattr(c.cfg, "context_length", c.seq) + max(getattr(c.cfg, "lags_sequence", None) or [0])


def _grid(c):
    """Qwen2-VL-style image grids (temporal, height, width) in patches: one 4 x 4 image each
    (4 is a multiple of every spatial merge size)."""
    return torch.tensor([[1, 4, 4]] * c.batch)


def _patches(c):
    """The flattened patches of _grid's images: (patches, channels x temporal x patch x patch),
    or None for a model without a patch grid."""
    if "grid_thw" not in c.wanted:
        return None
    cfg = c.cfg
    patch = _cfg_get(cfg, "patch_size", default=8)
    width = (_cfg_get(cfg, "in_channels", "num_channels", default=3) * _cfg_get(cfg, "temporal_patch_size", default=1)
             * patch * patch)
    return torch.randn(c.batch * 16, width, generator=c.g)


# forward argument -> its tensor (or None: no recipe for this model), from a context c
# (cfg, batch, seq, high, audio, g, wanted: the arguments being filled).
RECIPES = {
    "input_ids": lambda c: torch.randint(4, c.high, (c.batch, c.seq), generator=c.g),
    "grid_thw": _grid,
    "hidden_states": _patches,
    "pixel_values": lambda c: _patches(c) if "grid_thw" in c.wanted else _image(c),
    "input_values": _audio,
    "input_features": _features,
    "input_features_mask": lambda c: torch.ones(c.batch, _frames(c), dtype=torch.long),
    "bbox": _boxes,
    "query_embeds": lambda c: torch.randn(c.batch, 4, _cfg_get(c.cfg, "hidden_size"), generator=c.g),
    "states": lambda c: torch.randn(c.batch, c.seq, c.cfg.state_dim, generator=c.g),  # offline RL trajectories
    "actions": lambda c: torch.randn(c.batch, c.seq, c.cfg.act_dim, generator=c.g),
    "rewards": lambda c: torch.randn(c.batch, c.seq, 1, generator=c.g),
    "returns_to_go": lambda c: torch.randn(c.batch, c.seq, 1, generator=c.g),
    "timesteps": lambda c: torch.randint(0, c.seq, (c.batch, c.seq), generator=c.g),
    "past_values": lambda c: _series(c, _past(c)),
    "past_observed_mask": lambda c: torch.ones_like(_series(c, _past(c))),
    "past_time_features": lambda c: _series(c, _past(c), c.cfg.num_time_features),
    "future_values": lambda c: _series(c, c.cfg.prediction_length),
    "future_time_features": lambda c: _series(c, c.cfg.prediction_length, c.cfg.num_time_features),
}
# Optional inputs a model may need alongside its main one (a CLIP-like model's text and
# image, a layout model's boxes, a time-series model's future, a trajectory's actions), given when it cannot run
# on its main input alone.
COMPANIONS = ("input_ids", "pixel_values", "bbox", "input_features", "input_features_mask", "future_values",
              "future_time_features", "actions", "rewards", "returns_to_go", "timesteps")


class _Context:
    def __init__(self, **kw):
        self.__dict__.update(kw)


VARIANTS = 4  # make_inputs' variants, most plain first


def input_names(model, mapping, variant=0):
    """The forward arguments make_inputs fills: the main input, the required ones, and in odd
    variants (and for a zero-shot image classifier) the optional COMPANIONS."""
    params = inspect.signature(model.forward).parameters
    name = getattr(model, "main_input_name", "input_ids")
    wanted = [name] if name in params else []  # a vision tower's main input may go by another name
    wanted += [p.name for p in params.values() if p.default is p.empty and p.name != name
               and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if variant & 1 or mapping == "MODEL_FOR_ZERO_SHOT_IMAGE_CLASSIFICATION_MAPPING_NAMES":
        wanted += [n for n in COMPANIONS if n in params and n not in wanted]
    return wanted


def make_inputs(model, mapping, batch=2, seq=12, ids_below=200, audio=1600, labels=False, variant=0):
    """Inputs for the model's main input and the forward arguments it requires (RECIPES);
    None when one has no recipe. Variants (0 .. VARIANTS - 1) for a model the plainer ones
    fail: bit 0 adds the optional inputs of COMPANIONS the forward takes; bit 1 lays audio out
    the alternate way (_audio, _features) and runs without a KV cache (a hybrid whose tiny
    layers are all linear attention cannot build one). With `labels`, also the labels (or
    return_loss) that make the model's head compute its own loss, where the head has one."""
    cfg = model.config
    vocab = _cfg_get(cfg, "vocab_size", default=256)
    c = _Context(cfg=cfg, batch=batch, seq=seq, high=max(5, min(vocab, ids_below)), audio=audio,
                 g=torch.Generator().manual_seed(0), alt=bool(variant & 2))
    params = inspect.signature(model.forward).parameters
    c.wanted = wanted = input_names(model, mapping, variant)
    if not wanted or any(n not in RECIPES for n in wanted):
        return None
    inputs = {n: RECIPES[n](c) for n in sorted(wanted, key=list(RECIPES).index)}
    if any(v is None for v in inputs.values()):
        return None
    if "input_ids" in inputs and "attention_mask" in params:
        inputs["attention_mask"] = torch.ones(batch, seq, dtype=torch.long)
    high, g = c.high, c.g
    if "decoder_input_ids" in params:  # given even where optional: DiffusionGemma samples a missing canvas
        seq2seq = mapping in SEQ2SEQ or getattr(cfg, "is_encoder_decoder", False)
        key = "labels" if labels and seq2seq else "decoder_input_ids"
        inputs[key] = torch.randint(4, high, (batch, max(6, seq // 2)), generator=g)
    elif not labels:
        pass
    elif mapping in ("MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "MODEL_FOR_MASKED_LM_MAPPING_NAMES"):
        inputs["labels"] = inputs["input_ids"].clone()
    elif mapping in CLASSIFY:
        inputs["labels"] = torch.randint(0, cfg.num_labels, (batch,), generator=g)
    elif mapping == "MODEL_FOR_CTC_MAPPING_NAMES":
        frames = int(model._get_feat_extract_output_lengths(audio))
        inputs["labels"] = torch.randint(1, high, (batch, max(1, frames // 3)), generator=g)
    elif mapping == "MODEL_FOR_ZERO_SHOT_IMAGE_CLASSIFICATION_MAPPING_NAMES":
        inputs["return_loss"] = True
    if "noise" in params and isinstance(_cfg_get(cfg, "image_size"), int):
        # ViTMAE's random patch masking, drawn here so both devices mask the same patches
        inputs["noise"] = torch.rand(batch, (cfg.image_size // cfg.patch_size) ** 2, generator=g)
    if variant & 2 and ("use_cache" in params or any(p.kind == p.VAR_KEYWORD for p in params.values())):
        inputs["use_cache"] = False
    return inputs
