"""Build a policy from a CLI name and ``--policy-option KEY=VALUE`` options.

| name | options |
| --- | --- |
| ``scripted`` | ``script=PATH`` (required) |
| ``random`` | none |
| ``openai`` | ``base_url=URL``, ``model=NAME`` (required); ``api_key_env=VAR``,
  ``template_kwargs=true|false``, ``max_retries=N`` |
| ``transformers`` | ``model_dir=PATH`` (required); ``name=TEXT``, ``device=cpu|cuda|cuda:N``,
  ``adapter_dir=PATH`` (a PEFT LoRA adapter applied on top) |

Unknown names, unknown or missing options are ``policy_config_invalid`` (exit status 2).
Sampling controls (temperature, max action tokens, thinking, seeds) are not options: they
come with each request from the collector's own flags.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kiln_verify.errors import PolicyConfigInvalid
from kiln_verify.limits import DEFAULT_POLICY_RETRIES, MAX_POLICY_OPTION_BYTES, MAX_POLICY_OPTIONS
from kiln_verify.openenv.policy.base import Policy

POLICY_NAMES = ("scripted", "random", "openai", "transformers")
_ALLOWED: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "scripted": (frozenset({"script"}), frozenset()),
    "random": (frozenset(), frozenset()),
    "openai": (
        frozenset({"base_url", "model"}),
        frozenset({"api_key_env", "template_kwargs", "max_retries"}),
    ),
    "transformers": (frozenset({"model_dir"}), frozenset({"name", "device", "adapter_dir"})),
}


def parse_policy_options(items: Iterable[str]) -> dict[str, str]:
    """``["k=v", ...]`` into a dict; duplicates, empty keys and oversize pairs are refused."""
    out: dict[str, str] = {}
    for item in items:
        if len(out) >= MAX_POLICY_OPTIONS:
            raise PolicyConfigInvalid(f"more than {MAX_POLICY_OPTIONS} policy options")
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise PolicyConfigInvalid("a policy option is KEY=VALUE")
        if max(len(key.encode()), len(value.encode())) > MAX_POLICY_OPTION_BYTES:
            raise PolicyConfigInvalid(f"a policy option exceeds {MAX_POLICY_OPTION_BYTES} bytes")
        if key in out:
            raise PolicyConfigInvalid(f"policy option {key!r} is given twice")
        out[key] = value
    return out


def _bool(name: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise PolicyConfigInvalid(f"policy option {name} must be true or false")


def _count(name: str, value: str) -> int:
    text = value.strip()
    if not text.isdigit() or len(text) > 4:
        raise PolicyConfigInvalid(f"policy option {name} must be a small non-negative integer")
    return int(text)


def build_policy(name: str, options: Mapping[str, str] | None = None) -> Policy:
    """The built-in policy ``name`` configured by ``options`` (validated before building)."""
    opts = dict(options or {})
    if name not in _ALLOWED:
        raise PolicyConfigInvalid(
            f"unknown policy {name[:64]!r}; choose one of {', '.join(POLICY_NAMES)}"
        )
    required, optional = _ALLOWED[name]
    unknown = sorted(set(opts) - required - optional)
    if unknown:
        raise PolicyConfigInvalid(f"policy {name} does not take option(s) {', '.join(unknown)}")
    missing = sorted(required - set(opts))
    if missing:
        raise PolicyConfigInvalid(f"policy {name} needs option(s) {', '.join(missing)}")
    if name == "scripted":
        from kiln_verify.openenv.policy.scripted import ScriptedPolicy

        return ScriptedPolicy.from_file(opts["script"])
    if name == "random":
        from kiln_verify.openenv.policy.random_policy import RandomPolicy

        return RandomPolicy()
    if name == "openai":
        from kiln_verify.openenv.policy.openai_compat import OpenAICompatPolicy

        return OpenAICompatPolicy(
            base_url=opts["base_url"],
            model=opts["model"],
            api_key_env=opts.get("api_key_env") or None,
            send_template_kwargs=_bool("template_kwargs", opts.get("template_kwargs", "true")),
            max_retries=_count("max_retries", opts.get("max_retries", str(DEFAULT_POLICY_RETRIES))),
        )
    from kiln_verify.openenv.policy.transformers_policy import TransformersPolicy

    return TransformersPolicy(
        opts["model_dir"],
        name=opts.get("name") or None,
        device=opts.get("device", "cpu"),
        adapter_dir=opts.get("adapter_dir") or None,
    )
