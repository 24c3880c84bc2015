"""Tiny configurations and inputs for any transformers architecture: shrink a default
config's sizes (recursively through text/vision/audio sub-configs), pick the most specific
auto-model class, and build inputs from the model's main input name."""
import dataclasses

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
}
# Per-architecture exceptions, applied after SIZES. Swin's attention windows must tile every
# stage: image_size = patch_size * window_size * 2**(stages - 1); its width doubles per stage.
# LeViT's stem always downsamples 16x, and its attention biases are sized for image / patch.
# T5's config class has no decoder_start_token_id (checkpoints set the pad id, 0); shifting
# labels into decoder inputs needs it.
OVERRIDES = {**{t: {"image_size": 64, "patch_size": 4, "window_size": 2, "embed_dim": 32}
                for t in ("swin", "swinv2", "donut-swin", "maskformer-swin")},
             "levit": {"patch_size": 16}, "t5": {"decoder_start_token_id": 0}}
GROWING = {"hidden_sizes"}  # per-stage widths double stage by stage
TIED = {"num_stages"}  # an alias (convnext's num_hidden_layers) of the per-stage lists' length
SUBCONFIGS = ("text_config", "vision_config", "audio_config", "encoder", "decoder", "speech_config",
              "qformer_config", "perceiver_config", "backbone_config")
PREFERRED = ["MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "MODEL_FOR_MASKED_LM_MAPPING_NAMES",
             "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES", "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES",
             "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES", "MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES",
             "MODEL_FOR_CTC_MAPPING_NAMES", "MODEL_MAPPING_NAMES"]
GENERATIVE = {"MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES"}
TOKENS = ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id", "sep_token_id",
          "cls_token_id", "mask_token_id", "unk_token_id")


def _small(key, old, value):
    """The shrunk value of one attribute, or None to leave it."""
    if old is None or isinstance(old, bool):
        return None
    if isinstance(old, (list, tuple)):  # per-stage: keep the stage count
        if not old or not all(isinstance(v, int) and not isinstance(v, bool) for v in old):
            return None
        return [value * 2**i for i in range(len(old))] if key in GROWING else [value] * len(old)
    if not isinstance(old, int) or (old < value and "vocab_size" not in key):
        return None  # not a size, or already smaller
    return value


def shrink(cfg, sizes=SIZES, depth=0):
    """A new config of cfg's class (a default one: AutoConfig.for_model) with its sizes
    replaced from `sizes`, recursively through sub-configs. Built through the constructor
    from the changed attributes only, so what the config derives from them (Swin's
    hidden_size, DeepSeek's qk_head_dim, per-layer layer_types) follows; OVERRIDES apply
    last."""
    fields = {f.name for f in dataclasses.fields(cfg) if f.init and not f.name.startswith("_")}
    kw = {}
    for key, value in sizes.items():
        name = cfg.attribute_map.get(key, key)
        if name in fields and name not in TIED:
            v = _small(key, getattr(cfg, name, None), value)
            if v is not None:
                kw[name] = v
    for tok in TOKENS:
        v = getattr(cfg, tok, None)
        if isinstance(v, int) and not isinstance(v, bool) and v >= sizes["vocab_size"] - 8:
            kw[tok] = 3
    if depth < 3:
        for sub in SUBCONFIGS:
            if sub in fields and isinstance(getattr(cfg, sub, None), transformers.PretrainedConfig):
                kw[sub] = shrink(getattr(cfg, sub), sizes, depth + 1)
    kw.update(OVERRIDES.get(cfg.model_type, {}))
    return type(cfg)(**kw)


def model_classes(model_type, preferred=PREFERRED):
    """(mapping name, class) candidates, most specific first."""
    out = []
    for mapping in preferred:
        name = getattr(ma, mapping).get(model_type)
        if isinstance(name, (tuple, list)):
            name = name[0]
        cls = getattr(transformers, name, None) if name else None
        if cls is not None:
            out.append((mapping, cls))
    return out


def _cfg_get(cfg, *names, default=None):
    for n in names:
        for c in (cfg, getattr(cfg, "vision_config", None), getattr(cfg, "text_config", None),
                  getattr(cfg, "audio_config", None), getattr(cfg, "encoder", None)):
            v = getattr(c, n, None) if c is not None else None
            if v is not None:
                return v
    return default


SEQ2SEQ = {"MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES", "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES"}
CLASSIFY = {"MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES", "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES",
            "MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES"}


def make_inputs(model, mapping, batch=2, seq=12, ids_below=200, audio=1600, labels=False):
    """Inputs for the model's main input; None when there is no recipe. With `labels`, also
    the labels (or return_loss) that make the model's head compute its own loss, where the
    head has one."""
    cfg = model.config
    g = torch.Generator().manual_seed(0)
    name = getattr(model, "main_input_name", "input_ids")
    vocab = _cfg_get(cfg, "vocab_size", default=256)
    high = max(5, min(vocab, ids_below))
    dec = max(6, seq // 2)
    seq2seq = mapping in SEQ2SEQ or getattr(cfg, "is_encoder_decoder", False)
    inputs = {}
    if name == "input_ids" or mapping == "MODEL_FOR_ZERO_SHOT_IMAGE_CLASSIFICATION_MAPPING_NAMES":
        inputs["input_ids"] = torch.randint(4, high, (batch, seq), generator=g)
        inputs["attention_mask"] = torch.ones(batch, seq, dtype=torch.long)
    if name == "pixel_values" or mapping == "MODEL_FOR_ZERO_SHOT_IMAGE_CLASSIFICATION_MAPPING_NAMES":
        size = _cfg_get(cfg, "image_size", default=32)
        size = size[0] if isinstance(size, (list, tuple)) else size
        ch = _cfg_get(cfg, "num_channels", default=3)
        inputs["pixel_values"] = torch.randn(batch, ch, size, size, generator=g)
    elif name == "input_values":
        inputs["input_values"] = torch.randn(batch, audio, generator=g)
    elif name == "input_features":
        length = 2 * _cfg_get(cfg, "max_source_positions", default=32)
        feat = getattr(cfg, "input_feat_per_channel", None)
        if feat:  # Speech2Text: (batch, frames, features)
            shape = (batch, length, feat * getattr(cfg, "input_channels", 1))
        else:  # Whisper and the like: (batch, mel bins, frames)
            shape = (batch, _cfg_get(cfg, "num_mel_bins", "feature_size", default=16), length)
        inputs["input_features"] = torch.randn(*shape, generator=g)
    elif name != "input_ids":
        return None
    if seq2seq:
        key = "labels" if labels else "decoder_input_ids"
        inputs[key] = torch.randint(4, high, (batch, dec), generator=g)
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
    return inputs
