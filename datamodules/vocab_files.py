"""Hugging Face's tokenizer files: which token plays which role, and the config files to write.

A checkpoint names its special tokens by role in ``tokenizer_config.json`` and the legacy
``special_tokens_map.json`` (``pad_token``, ``cls_token``, ...; each a string or an AddedToken
dict with ``"content"``). As transformers does, ``special_tokens_map.json`` overrides the config
unless the config carries ``added_tokens_decoder``. A role neither file names is read from
``tokenizer.json`` itself: cls / sep from the post-processor, unk from the model, pad from padding;
then from the model's ``config.json`` (``bos_token_id``, ``eos_token_id``, ``pad_token_id``). A
checkpoint whose config names an end-of-sequence token and no pad token (GPT-2) pads with the
end-of-sequence token, as the ecosystem does: padding is masked by the attention mask.
"""

import json
from pathlib import Path
from typing import Any

#: roles, and the config keys that may name each, first match wins (cls/bos, sep/eos)
ROLE_KEYS = {
    "pad": ("pad_token",),
    "unk": ("unk_token",),
    "cls": ("cls_token", "bos_token"),
    "sep": ("sep_token", "eos_token"),
    "mask": ("mask_token",),
}
CONFIG_FILE = "tokenizer_config.json"
MAP_FILE = "special_tokens_map.json"


def _read_json(file: Path) -> dict[str, Any]:
    return json.loads(file.read_text(encoding="utf-8")) if file.is_file() else {}


def read_config(directory: Path) -> dict[str, Any]:
    """``tokenizer_config.json`` with ``special_tokens_map.json`` merged over it as transformers
    merges them; ``{}`` where neither exists."""
    config = _read_json(directory / CONFIG_FILE)
    if "added_tokens_decoder" not in config:
        config.update(_read_json(directory / MAP_FILE))
    return config


def _content(value: Any) -> str | None:
    return value.get("content") if isinstance(value, dict) else value


def config_roles(config: dict[str, Any]) -> dict[str, str]:
    """role -> token string, for the roles the config names."""
    roles = {}
    for role, keys in ROLE_KEYS.items():
        named = [_content(config.get(key)) for key in keys]
        found = next((token for token in named if token), None)
        if found:
            roles[role] = found
    return roles


def _processors(processor: dict[str, Any] | None) -> list[dict[str, Any]]:
    if not processor:
        return []
    if processor["type"] == "Sequence":
        return [inner for step in processor["processors"] for inner in _processors(step)]
    return [processor]


def _template_roles(processor: dict[str, Any]) -> dict[str, str]:
    """cls = the first special token before ``$A`` in the single template, sep = the first after."""
    pieces = processor["single"]
    start = next(i for i, piece in enumerate(pieces) if "Sequence" in piece)
    leading = [piece["SpecialToken"]["id"] for piece in pieces[:start]]
    trailing = [p["SpecialToken"]["id"] for p in pieces[start + 1 :] if "SpecialToken" in p]
    return {
        **({"cls": leading[0]} if leading else {}),
        **({"sep": trailing[0]} if trailing else {}),
    }


def backend_roles(backend_json: dict[str, Any]) -> dict[str, str]:
    """role -> token string as ``tokenizer.json`` alone shows them."""
    roles: dict[str, str] = {}
    for processor in _processors(backend_json.get("post_processor")):
        if processor["type"] == "TemplateProcessing":
            roles.update(_template_roles(processor))
        elif processor["type"] in ("RobertaProcessing", "BertProcessing"):
            roles.update(cls=processor["cls"][0], sep=processor["sep"][0])
    model = backend_json["model"]
    if model.get("unk_token"):
        roles["unk"] = model["unk_token"]
    elif model.get("unk_id") is not None:  # Unigram: vocab is a list of [piece, score]
        roles["unk"] = model["vocab"][model["unk_id"]][0]
    if backend_json.get("padding"):
        roles["pad"] = backend_json["padding"]["pad_token"]
    return roles


#: config.json's special ids, by the role they name
MODEL_ID_KEYS = {"pad": "pad_token_id", "cls": "bos_token_id", "sep": "eos_token_id"}


def model_config_ids(directory: Path) -> dict[str, int]:
    """role -> id as the model's ``config.json`` names them (ints only)."""
    config = _read_json(directory / "config.json")
    ids = {role: config.get(key) for role, key in MODEL_ID_KEYS.items()}
    return {role: i for role, i in ids.items() if isinstance(i, int) and not isinstance(i, bool)}


def with_pad(roles: dict[str, str], model_roles: dict[str, str]) -> dict[str, str]:
    """``roles``, with the model config's end-of-sequence token as pad where nothing names a pad
    token but the model config names its end (GPT-2)."""
    if "pad" not in roles and "pad" not in model_roles and "sep" in model_roles:
        return {**roles, "pad": model_roles["sep"]}
    return roles


def hf_config(roles: dict[str, str], tokenizer_class: str, family: str, lowercase: bool,
              max_length: int | None) -> dict[str, Any]:
    """``tokenizer_config.json`` naming every role; bos / eos too where the family's transformers
    classes expect them (byte-level BPE and unigram checkpoints name their ends that way)."""
    config: dict[str, Any] = {"tokenizer_class": tokenizer_class}
    if max_length is not None:
        config["model_max_length"] = max_length
    if family == "wordpiece":
        config["do_lower_case"] = lowercase
    return {**config, **special_tokens_map(roles, family)}


def special_tokens_map(roles: dict[str, str], family: str) -> dict[str, str]:
    tokens = {f"{role}_token": token for role, token in roles.items()}
    if family != "wordpiece":
        tokens.update(
            {key: roles[role] for key, role in (("bos_token", "cls"), ("eos_token", "sep"))
             if role in roles}
        )
    return tokens
