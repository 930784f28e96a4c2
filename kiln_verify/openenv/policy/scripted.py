"""The ``scripted`` policy: action texts from a Python callable or a JSON script file.

Script format (docs/policies.md): either a JSON array of strings, the action text for step
0, 1, ... of every episode; or a JSON object whose values are such arrays and whose keys
select episodes, most specific first: ``"ENV/CANDIDATE"``, ``"ENV"``, ``"*/CANDIDATE"``,
``"*"`` (``ENV`` is the environment's metadata name, ``CANDIDATE`` the candidate index in
decimal). A step past the end of the selected array is ``policy_script_exhausted``.
Latency and token counts are always zero.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from kiln_verify.core.digest import sha256_bytes
from kiln_verify.core.jsonio import loads
from kiln_verify.errors import (
    FileAccessError,
    PathMissing,
    PolicyConfigInvalid,
    PolicyScriptExhausted,
    PolicyScriptInvalid,
)
from kiln_verify.limits import MAX_POLICY_SCRIPT_BYTES
from kiln_verify.openenv.policy.base import BehaviorPolicyIdentity, PolicyRequest, PolicyResponse

ScriptFunction = Callable[[PolicyRequest], str]


def _texts(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise PolicyScriptInvalid(f"{where} must be an array of action-text strings")
    return tuple(value)


def parse_script(data: bytes | str, *, source: str | None = None) -> dict[str, tuple[str, ...]]:
    """Parse a script document into ``{selector: texts}`` (an array becomes ``{"*": ...}``)."""
    value = loads(data, max_bytes=MAX_POLICY_SCRIPT_BYTES, source=source)
    if isinstance(value, list):
        return {"*": _texts(value, "the script")}
    if not isinstance(value, dict) or not value:
        raise PolicyScriptInvalid(
            "the script must be a JSON array of strings or a non-empty object of such arrays",
            path=source,
        )
    out: dict[str, tuple[str, ...]] = {}
    for key, texts in value.items():
        if not key:
            raise PolicyScriptInvalid("a script selector must not be empty", path=source)
        out[key] = _texts(texts, "every script value")
    return out


class ScriptedPolicy:
    """Replays fixed action texts; deterministic and free (zero latency, zero tokens)."""

    def __init__(
        self,
        script: ScriptFunction | Mapping[str, Sequence[str]] | Sequence[str],
        *,
        name: str = "scripted",
        script_sha256: str | None = None,
    ) -> None:
        self._function: ScriptFunction | None = None
        self._script: dict[str, tuple[str, ...]] = {}
        if callable(script):
            self._function = script
            name = name if name != "scripted" else getattr(script, "__qualname__", name)
        elif isinstance(script, Mapping):
            self._script = {
                str(k): _texts(list(v), "every script value") for k, v in script.items()
            }
        elif isinstance(script, Sequence) and not isinstance(script, str | bytes):
            self._script = {"*": _texts(list(script), "the script")}
        else:
            raise PolicyConfigInvalid("a scripted policy needs a callable, a list or a mapping")
        self._name = name
        self._script_sha256 = script_sha256

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> ScriptedPolicy:
        """Load a JSON script (strict JSON, at most ``MAX_POLICY_SCRIPT_BYTES``)."""
        shown = os.fspath(path)
        try:
            with Path(path).open("rb") as handle:
                data = handle.read(MAX_POLICY_SCRIPT_BYTES + 1)
        except FileNotFoundError:
            raise PathMissing("the policy script does not exist", path=shown) from None
        except OSError as exc:
            raise FileAccessError(
                f"cannot read the policy script: {exc.strerror}", path=shown
            ) from None
        script = parse_script(data, source=shown)
        return cls(script, name=Path(shown).name, script_sha256=str(sha256_bytes(data)))

    def _select(self, request: PolicyRequest) -> tuple[str, ...]:
        env, cand = request.environment_name, str(request.candidate_index)
        for key in (f"{env}/{cand}", env, f"*/{cand}", "*"):
            if key in self._script:
                return self._script[key]
        raise PolicyScriptExhausted(f"no script entry selects environment {env!r} candidate {cand}")

    async def act(self, request: PolicyRequest) -> PolicyResponse:
        if self._function is not None:
            text = self._function(request)
            if not isinstance(text, str):
                raise PolicyConfigInvalid("a script function must return the action text (str)")
            return PolicyResponse(text=text)
        texts = self._select(request)
        if request.step_index >= len(texts):
            raise PolicyScriptExhausted(
                f"the script has {len(texts)} action texts; step {request.step_index} was asked"
            )
        return PolicyResponse(text=texts[request.step_index])

    def identity(self) -> BehaviorPolicyIdentity:
        parameters: dict[str, object] = {}
        if self._script_sha256 is not None:
            parameters["script_sha256"] = self._script_sha256
        elif self._function is None:
            parameters["script"] = {key: list(value) for key, value in self._script.items()}
        return BehaviorPolicyIdentity(kind="scripted", name=self._name, parameters=parameters)

    async def aclose(self) -> None:
        return None
