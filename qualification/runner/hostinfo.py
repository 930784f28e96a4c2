"""What the host is: OS, the steps' Python and package versions, the accelerator.

Package versions are read with ``importlib.metadata`` inside the workload's interpreter (so
nothing heavy is imported); the accelerator comes from ``nvidia-smi`` when present, from
torch only when NVIDIA device nodes exist without it, else the CPU.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

from .common import Refusal

PACKAGES = (
    "kiln-verify", "torch", "transformers", "peft", "trl", "datasets", "accelerate",
    "safetensors", "tokenizers", "openenv", "jsonschema",
)  # fmt: skip
_PYTHON_PROBE = """
import importlib.metadata as m, json, platform, sys
def version(name):
    try:
        return m.version(name)
    except m.PackageNotFoundError:
        return None
print(json.dumps({"executable": sys.executable, "version": platform.python_version(),
    "implementation": platform.python_implementation(),
    "packages": {name: version(name) for name in NAMES}}))
"""
_TORCH_PROBE = """
import json, torch
print(json.dumps([{"name": torch.cuda.get_device_name(i),
    "memory_bytes": torch.cuda.get_device_properties(i).total_memory,
    "compute_capability": "%d.%d" % torch.cuda.get_device_capability(i),
    "cuda_runtime": torch.version.cuda} for i in range(torch.cuda.device_count())]))
"""
_SMI_FIELDS = ("name", "memory.total", "driver_version", "uuid", "pci.bus_id", "compute_cap")


def os_info() -> dict[str, str]:
    return {
        "system": platform.system(),
        "release": platform.release(),
        "machine": platform.machine(),
    }


def python_info(python: str, repo: Path) -> tuple[dict[str, str], dict[str, str | None]]:
    code = _PYTHON_PROBE.replace("NAMES", repr(PACKAGES))
    try:
        result = subprocess.run(
            [python, "-I", "-c", code], cwd=repo, capture_output=True, text=True, timeout=60,
            check=False,
        )  # fmt: skip
        answer = json.loads(result.stdout)
    except (OSError, subprocess.TimeoutExpired, ValueError) as error:
        raise Refusal(
            "python-probe",
            f"cannot read versions from {python!r}: {error}",
            "pass a working python",
        ) from None
    packages = answer.pop("packages")
    return answer, packages


def accelerator(python: str, repo: Path) -> dict[str, Any]:
    smi = shutil.which("nvidia-smi")
    if smi is not None:
        result = subprocess.run(
            [smi, f"--query-gpu={','.join(_SMI_FIELDS)}", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        rows = [line for line in result.stdout.splitlines() if line.strip()]
        if result.returncode == 0 and rows:
            devices = [_smi_row(row) for row in rows]
            return {"kind": "cuda", "source": "nvidia-smi", "devices": devices}
    if Path("/dev/nvidiactl").exists():
        result = subprocess.run(
            [python, "-I", "-c", _TORCH_PROBE], cwd=repo, capture_output=True, text=True,
            timeout=120, check=False,
        )  # fmt: skip
        try:
            devices = json.loads(result.stdout)
        except ValueError:
            devices = []
        if devices:
            return {"kind": "cuda", "source": "torch", "devices": devices}
    return {"kind": "cpu", "source": "proc-cpuinfo", "devices": [_cpu()]}


def _smi_row(row: str) -> dict[str, Any]:
    values = [value.strip() for value in row.split(",")]
    device: dict[str, Any] = dict(zip(_SMI_FIELDS, values, strict=False))
    memory = device.pop("memory.total", "")
    device["memory_bytes"] = int(memory) * 1024 * 1024 if memory.isdigit() else None
    device["pci_bus_id"] = device.pop("pci.bus_id", None)
    device["compute_capability"] = device.pop("compute_cap", None)
    return device


def _cpu() -> dict[str, Any]:
    name = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"name": name, "logical_cpus": os.cpu_count()}
