"""Structural validation of a PEFT LoRA adapter against a resident model, without weights.

:func:`check_adapter` reads ``adapter_config.json`` (strict JSON) and the header of
``adapter_model.safetensors`` (:mod:`kiln_verify.core.safetensors_header`) and proves that
PEFT can load the adapter on the model whose ``config.json`` is given: the rules are listed
in docs/hf-contract.md, "Adapter checks". No tensor data is read and torch is not imported.
Every failure is ``adapter_unloadable`` naming the file or tensor and the broken rule (a
malformed safetensors header or JSON document keeps its own code in the message).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from kiln_verify.core.jsonio import loads_object
from kiln_verify.core.paths import open_regular_beneath
from kiln_verify.core.safetensors_header import (
    FLOAT_DTYPES,
    SafetensorsHeader,
    read_safetensors_header,
)
from kiln_verify.errors import (
    AdapterUnloadable,
    JsonError,
    LimitExceeded,
    SafetensorsInvalid,
    snippet,
)
from kiln_verify.hf.digests import ADAPTER_CONFIG_FILE, ADAPTER_WEIGHTS_FILE
from kiln_verify.limits import (
    MAX_ADAPTER_CONFIG_BYTES,
    MAX_LORA_RANK,
    MAX_MODEL_CONFIG_BYTES,
)

__all__ = [
    "LORA_TARGETS",
    "AdapterSummary",
    "LoraConfigSummary",
    "ResidentModules",
    "check_adapter",
    "check_adapter_config",
    "check_adapter_header",
    "check_exported_adapter",
    "read_json_file",
    "resident_modules",
]

LORA_TARGETS: Final = (
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "in_proj_qkv",
    "in_proj_z",
    "out_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
)
"""Kiln's ten supported LoRA target modules, in contract order (kiln-hf-trl-contract §3)."""

# Config keys whose value is informational or only shapes initialisation: any value.
_FREE_KEYS: Final = frozenset(
    {
        "peft_version",
        "revision",
        "inference_mode",
        "megatron_core",
        "qalora_group_size",
        "auto_mapping",
        "loftq_config",
        "eva_config",
        "corda_config",
        "lora_ga_config",
        "exclude_modules",
    }
)
# Keys checked explicitly below.
_CHECKED_KEYS: Final = frozenset(
    {
        "peft_type",
        "task_type",
        "r",
        "lora_alpha",
        "lora_dropout",
        "target_modules",
        "base_model_name_or_path",
        "bias",
        "init_lora_weights",
    }
)
_INIT_OK: Final = (True, False, "gaussian")

_FAMILY: Final[Mapping[str, str]] = {
    "q_proj": "self_attn",
    "k_proj": "self_attn",
    "v_proj": "self_attn",
    "o_proj": "self_attn",
    "in_proj_qkv": "linear_attn",
    "in_proj_z": "linear_attn",
    "out_proj": "linear_attn",
    "gate_proj": "mlp",
    "up_proj": "mlp",
    "down_proj": "mlp",
}
MODEL_CONFIG_FILE: Final = "kiln_model_config.json"
"""The exported model's canonical ``config.json`` inside a bundle or envelope."""

_KEY = re.compile(
    r"base_model\.model\.model\.(?:language_model\.)?layers\.(0|[1-9][0-9]{0,8})\."
    r"(self_attn|linear_attn|mlp)\.([a-z_]+)\.lora_([AB])\.weight"
)
_QWEN3_5: Final = frozenset({"qwen3_5_text", "qwen3_5"})
_PLAIN_ATTENTION: Final = frozenset({"qwen3", "qwen2", "llama", "mistral"})


@dataclass(frozen=True, slots=True)
class LoraConfigSummary:
    """The parts of ``adapter_config.json`` the import relies on."""

    r: int
    lora_alpha: int | float
    target_modules: tuple[str, ...]
    base_model_name_or_path: str | None


@dataclass(frozen=True, slots=True)
class ResidentModules:
    """Per layer, the supported projections that exist and their ``(in, out)`` features."""

    model_type: str
    layers: tuple[Mapping[str, tuple[int, int]], ...]


@dataclass(frozen=True, slots=True)
class AdapterSummary:
    """A validated adapter: its config, the adapted ``(layer, module)`` pairs and dtype."""

    config: LoraConfigSummary
    modules: tuple[tuple[int, str], ...]
    dtypes: frozenset[str]


def _fail(rule: str, path: str | None = None) -> AdapterUnloadable:
    return AdapterUnloadable(rule, path=path)


def read_json_file(root: str | os.PathLike[str], name: str, max_bytes: int) -> dict[str, Any]:
    """Read ``root/name`` (no symlinks, regular file, at most ``max_bytes``) as a JSON object."""
    shown = os.path.join(os.fspath(root), name)
    with open_regular_beneath(root, name) as fd:
        size = os.fstat(fd).st_size
        if size > max_bytes:
            raise LimitExceeded(name, limit=_limit_name(max_bytes), bound=max_bytes, observed=size)
        data = os.read(fd, max_bytes + 1)
    return loads_object(data, max_bytes=max_bytes, source=shown)


def _limit_name(bound: int) -> str:
    if bound == MAX_ADAPTER_CONFIG_BYTES:
        return "MAX_ADAPTER_CONFIG_BYTES"
    if bound == MAX_MODEL_CONFIG_BYTES:
        return "MAX_MODEL_CONFIG_BYTES"
    return "max_bytes"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _neutral(value: Any) -> bool:
    return value is None or value is False or value == {} or value == []


def check_adapter_config(config: Mapping[str, Any], path: str | None = None) -> LoraConfigSummary:
    """Apply the ``adapter_config.json`` rules to a parsed document."""
    for key in ("peft_type", "task_type", "r", "lora_alpha", "target_modules"):
        if key not in config:
            raise _fail(f"adapter_config.json has no {key!r}", path)
    if config["peft_type"] != "LORA":
        raise _fail(f"peft_type is {snippet(config['peft_type'])}, not 'LORA'", path)
    if config["task_type"] != "CAUSAL_LM":
        raise _fail(f"task_type is {snippet(config['task_type'])}, not 'CAUSAL_LM'", path)
    rank = config["r"]
    if not _is_int(rank) or not 0 < rank <= MAX_LORA_RANK:
        raise _fail(f"r must be an integer in 1..MAX_LORA_RANK={MAX_LORA_RANK}", path)
    alpha = config["lora_alpha"]
    if not isinstance(alpha, int | float) or isinstance(alpha, bool) or not alpha > 0:
        raise _fail("lora_alpha must be a positive number", path)
    dropout = config.get("lora_dropout", 0.0)
    if not isinstance(dropout, int | float) or isinstance(dropout, bool) or not 0 <= dropout <= 1:
        raise _fail("lora_dropout must be a number in 0..1", path)
    targets = config["target_modules"]
    if not isinstance(targets, list) or not targets:
        raise _fail("target_modules must be a non-empty list of module names", path)
    for item in targets:
        if not isinstance(item, str) or item not in LORA_TARGETS:
            raise _fail(
                f"target module {snippet(item)} is not one of the supported"
                f" {','.join(LORA_TARGETS)}",
                path,
            )
    if len(set(targets)) != len(targets):
        raise _fail("target_modules lists a module twice", path)
    base = config.get("base_model_name_or_path")
    if base is not None and not isinstance(base, str):
        raise _fail("base_model_name_or_path must be a string or null", path)
    if config.get("bias", "none") != "none":
        raise _fail(f"bias {snippet(config['bias'])} is unsupported (only 'none')", path)
    if config.get("init_lora_weights", True) not in _INIT_OK:
        raise _fail(
            f"init_lora_weights {snippet(config['init_lora_weights'])} is unsupported"
            " (methods that rewrite the base weights cannot be imported)",
            path,
        )
    for key in sorted(config.keys() - _CHECKED_KEYS - _FREE_KEYS):
        if not _neutral(config[key]):
            raise _fail(
                f"unsupported PEFT feature {snippet(key)} = {snippet(config[key])}"
                " (must be absent, null, false, {} or [])",
                path,
            )
    ordered = tuple(t for t in LORA_TARGETS if t in targets)
    return LoraConfigSummary(rank, alpha, ordered, base)


def _positive(cfg: Mapping[str, Any], key: str, default: int | None = None) -> int:
    value = cfg.get(key, default)
    if not _is_int(value) or value <= 0:
        raise _fail(f"resident model config: {key} must be a positive integer")
    return int(value)


def resident_modules(config: Mapping[str, Any]) -> ResidentModules:
    """Compute the supported projections of a resident model from its ``config.json``.

    Qwen3.5 (``qwen3_5_text``, or ``qwen3_5`` with a ``text_config``): full-attention layers
    have ``q_proj`` of width ``2 * heads * head_dim`` (query and output gate), ``k_proj``,
    ``v_proj``, ``o_proj``; linear-attention layers have ``in_proj_qkv``, ``in_proj_z``,
    ``out_proj``; every layer has the MLP. Qwen2/Qwen3/Llama/Mistral: attention and MLP in
    every layer. Other model types (MoE included) are refused: their shapes are unknown.
    """
    model_type = config.get("model_type")
    cfg = config
    if model_type == "qwen3_5":
        text = config.get("text_config")
        if not isinstance(text, dict):
            raise _fail("resident model config: qwen3_5 without a text_config object")
        cfg = text
    if model_type not in _QWEN3_5 | _PLAIN_ATTENTION:
        raise _fail(
            f"resident model type {snippet(model_type)} is not supported for adapter"
            " shape checks (qwen3_5, qwen3_5_text, qwen3, qwen2, llama, mistral)"
        )
    layers = _positive(cfg, "num_hidden_layers")
    hidden = _positive(cfg, "hidden_size")
    inter = _positive(cfg, "intermediate_size")
    heads = _positive(cfg, "num_attention_heads")
    kv_heads = _positive(cfg, "num_key_value_heads", heads)
    head_dim_value = cfg.get("head_dim")
    if head_dim_value is None:
        if hidden % heads:
            raise _fail("resident model config: hidden_size is not a multiple of heads")
        head_dim_value = hidden // heads
    head_dim = _positive({"head_dim": head_dim_value}, "head_dim")
    mlp = {"gate_proj": (hidden, inter), "up_proj": (hidden, inter), "down_proj": (inter, hidden)}
    if model_type in _QWEN3_5:
        q_out = 2 * heads * head_dim
        types = cfg.get("layer_types")
        if types is None:
            interval = _positive(cfg, "full_attention_interval", 4)
            types = [
                "full_attention" if (i + 1) % interval == 0 else "linear_attention"
                for i in range(layers)
            ]
        if not isinstance(types, list) or len(types) != layers:
            raise _fail("resident model config: layer_types must list every hidden layer")
        key_dim = _positive(cfg, "linear_num_key_heads") * _positive(cfg, "linear_key_head_dim")
        value_dim = _positive(cfg, "linear_num_value_heads") * _positive(
            cfg, "linear_value_head_dim"
        )
        linear = {
            "in_proj_qkv": (hidden, 2 * key_dim + value_dim),
            "in_proj_z": (hidden, value_dim),
            "out_proj": (value_dim, hidden),
        }
    else:
        q_out = heads * head_dim
        types = ["full_attention"] * layers
        linear = {}
    attention = {
        "q_proj": (hidden, q_out),
        "k_proj": (hidden, kv_heads * head_dim),
        "v_proj": (hidden, kv_heads * head_dim),
        "o_proj": (heads * head_dim, hidden),
    }
    per_layer: list[Mapping[str, tuple[int, int]]] = []
    for kind in types:
        if kind == "full_attention":
            per_layer.append({**attention, **mlp})
        elif kind == "linear_attention":
            per_layer.append({**linear, **mlp})
        else:
            raise _fail(f"resident model config: unknown layer type {snippet(kind)}")
    return ResidentModules(str(model_type), tuple(per_layer))


def check_adapter_header(
    header: SafetensorsHeader,
    config: LoraConfigSummary,
    resident: ResidentModules,
    path: str | None = None,
) -> AdapterSummary:
    """Check every tensor of the adapter against its config and the resident modules."""
    pairs: dict[tuple[int, str], dict[str, str]] = {}
    dtypes: set[str] = set()
    for name, info in header.tensors.items():
        shown = snippet(name)
        match = _KEY.fullmatch(name)
        if match is None:
            raise _fail(
                f"tensor {shown}: not a LoRA weight of a supported projection"
                " (base_model.model.model.layers.<i>.<block>.<module>.lora_A|B.weight)",
                path,
            )
        layer, block, module, side = int(match[1]), match[2], match[3], match[4]
        if module not in LORA_TARGETS:
            raise _fail(f"tensor {shown}: module {snippet(module)} is not a supported target", path)
        if module not in config.target_modules:
            raise _fail(f"tensor {shown}: module {module} is not in target_modules", path)
        if block != _FAMILY[module]:
            raise _fail(f"tensor {shown}: {module} does not belong to {block}", path)
        if layer >= len(resident.layers):
            raise _fail(
                f"tensor {shown}: layer {layer} is beyond the resident model's"
                f" {len(resident.layers)} hidden layers",
                path,
            )
        features = resident.layers[layer].get(module)
        if features is None:
            raise _fail(
                f"tensor {shown}: layer {layer} of the resident model has no {module}", path
            )
        if info.dtype not in FLOAT_DTYPES:
            raise _fail(f"tensor {shown}: dtype {info.dtype} is not F16, BF16 or F32", path)
        in_features, out_features = features
        want = (config.r, in_features) if side == "A" else (out_features, config.r)
        if info.shape != want:
            raise _fail(
                f"tensor {shown}: shape {list(info.shape)} but lora_{side} of {module} on the"
                f" resident model needs {list(want)} (r={config.r}, in={in_features},"
                f" out={out_features})",
                path,
            )
        pairs.setdefault((layer, module), {})[side] = name
        dtypes.add(info.dtype)
    if not pairs:
        raise _fail("the adapter has no LoRA tensors", path)
    for (layer, module), sides in sorted(pairs.items()):
        for side, other in (("A", "B"), ("B", "A")):
            if side in sides and other not in sides:
                raise _fail(
                    f"tensor {snippet(sides[side])}: lora_{other} of layer {layer} {module}"
                    " is missing (A/B pairing)",
                    path,
                )
    return AdapterSummary(config, tuple(sorted(pairs)), frozenset(dtypes))


def check_adapter(
    adapter_dir: str | os.PathLike[str],
    model_dir: str | os.PathLike[str] | None = None,
    *,
    model_config: Mapping[str, Any] | None = None,
) -> AdapterSummary:
    """Validate ``adapter_dir`` (``adapter_config.json`` + ``adapter_model.safetensors``).

    The resident model is ``model_dir/config.json`` or an already parsed ``model_config``.
    """
    if (model_dir is None) == (model_config is None):
        raise TypeError("pass exactly one of model_dir and model_config")
    if model_config is None:
        assert model_dir is not None
        model_config = read_json_file(model_dir, "config.json", MAX_MODEL_CONFIG_BYTES)
    resident = resident_modules(model_config)
    config_path = os.path.join(os.fspath(adapter_dir), ADAPTER_CONFIG_FILE)
    try:
        document = read_json_file(adapter_dir, ADAPTER_CONFIG_FILE, MAX_ADAPTER_CONFIG_BYTES)
    except (JsonError, LimitExceeded) as exc:
        raise _fail(f"{exc.code}: {exc.rule}", config_path) from exc
    config = check_adapter_config(document, config_path)
    weights_path = os.path.join(os.fspath(adapter_dir), ADAPTER_WEIGHTS_FILE)
    try:
        header = read_safetensors_header(weights_path)
    except (SafetensorsInvalid, JsonError, LimitExceeded) as exc:
        raise _fail(f"{exc.code}: {exc.rule}", weights_path) from exc
    return check_adapter_header(header, config, resident, weights_path)


def check_exported_adapter(bundle: str | os.PathLike[str]) -> AdapterSummary:
    """Check a completed bundle's output adapter against the model config it was exported
    from (``kiln_model_config.json``), so that ``hf verify --completed`` accepts exactly the
    adapter structures ``hf import-peft`` accepts: the import checks against the resident
    ``config.json``, whose canonical form must equal this file (the identity check)."""
    config = read_json_file(bundle, MODEL_CONFIG_FILE, MAX_MODEL_CONFIG_BYTES)
    return check_adapter(bundle, model_config=config)
