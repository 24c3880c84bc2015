"""Tiny configurations and inputs for any transformers architecture: shrink a default
config's sizes (recursively through text/vision/audio sub-configs), pick the most specific
auto-model class, and build inputs from the model's main input name."""
import torch
import transformers
from transformers.models.auto import modeling_auto as ma

# attribute -> tiny value. Heads stay at 2 and hidden sizes at 64 so head_dim is 32.
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
    "vocab_size": 256, "max_position_embeddings": 128, "n_positions": 128, "max_source_positions": 32,
    "max_target_positions": 64, "image_size": 32, "patch_size": 8, "num_channels": 3,
    "hidden_sizes": [], "depths": [], "num_mel_bins": 16, "d_kv": 32,
}
SUBCONFIGS = ("text_config", "vision_config", "audio_config", "encoder", "decoder", "speech_config",
              "qformer_config", "perceiver_config", "backbone_config")
PREFERRED = ["MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "MODEL_FOR_MASKED_LM_MAPPING_NAMES",
             "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES", "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES",
             "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES", "MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES",
             "MODEL_FOR_CTC_MAPPING_NAMES", "MODEL_MAPPING_NAMES"]
GENERATIVE = {"MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES"}


def shrink(cfg, depth=0):
    for key, value in SIZES.items():
        old = getattr(cfg, key, None)
        if old is None or isinstance(old, bool):
            continue
        if isinstance(old, list) != isinstance(value, list):
            continue
        if isinstance(old, list):  # per-stage sizes keep their stage count
            value = [16 * 2**i for i in range(len(old))] if key == "hidden_sizes" else [1] * len(old)
        elif isinstance(old, int) and old < value and key not in ("vocab_size",):
            continue  # already smaller
        try:
            setattr(cfg, key, value)
        except Exception:
            pass
    for tok in ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id", "sep_token_id",
                "cls_token_id", "mask_token_id", "unk_token_id"):
        v = getattr(cfg, tok, None)
        if isinstance(v, int) and v >= 200:
            setattr(cfg, tok, 3)
    if depth < 3:
        for sub in SUBCONFIGS:
            s = getattr(cfg, sub, None)
            if isinstance(s, transformers.PretrainedConfig):
                shrink(s, depth + 1)
    return cfg


def model_classes(model_type):
    """(mapping name, class) candidates, most specific first."""
    out = []
    for mapping in PREFERRED:
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


def make_inputs(model, mapping, batch=2, seq=12):
    """Inputs for the model's main input; None when there is no recipe."""
    cfg = model.config
    g = torch.Generator().manual_seed(0)
    name = getattr(model, "main_input_name", "input_ids")
    vocab = _cfg_get(cfg, "vocab_size", default=256)
    inputs = {}
    if name == "input_ids":
        inputs["input_ids"] = torch.randint(4, max(5, min(vocab, 200)), (batch, seq), generator=g)
        inputs["attention_mask"] = torch.ones(batch, seq, dtype=torch.long)
        if mapping == "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES" or getattr(cfg, "is_encoder_decoder", False):
            inputs["decoder_input_ids"] = torch.randint(4, max(5, min(vocab, 200)), (batch, 6), generator=g)
    elif name == "pixel_values":
        size = _cfg_get(cfg, "image_size", default=32)
        size = size[0] if isinstance(size, (list, tuple)) else size
        ch = _cfg_get(cfg, "num_channels", default=3)
        inputs["pixel_values"] = torch.randn(batch, ch, size, size, generator=g)
    elif name == "input_values":
        inputs["input_values"] = torch.randn(batch, 1600, generator=g)
    elif name == "input_features":
        mel = _cfg_get(cfg, "num_mel_bins", "feature_size", default=16)
        length = 2 * _cfg_get(cfg, "max_source_positions", default=32)
        inputs["input_features"] = torch.randn(batch, mel, length, generator=g)
        if getattr(cfg, "is_encoder_decoder", False):
            inputs["decoder_input_ids"] = torch.randint(4, max(5, min(vocab, 200)), (batch, 6), generator=g)
    else:
        return None
    return inputs
