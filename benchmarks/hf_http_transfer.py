"""The HF/TRL hand-off over HTTP against ``curl``: export download and streamed PEFT import.

One ``kiln-verify serve --model`` (the tiny model) runs for the whole benchmark. Its inputs:
a completed SFT bundle (the tiny model, an export, one ``train.py`` step; or one given by
the caller) whose adapter is enlarged to ``--adapter-mib`` MiB (``benchmarks._big_adapter``:
a large LoRA rank, header-valid, re-sealed). In each of ``--rounds`` rounds, sides
alternating in order:

* **import**: ``kiln-verify hf import-peft --bundle BIG --name N --url URL`` (full local
  verification, the envelope copied to private staging and verified again, the USTAR+gzip
  body streamed in 256 KiB chunks, the answer checked against the prediction) against
  ``tar --format=ustar | gzip -6 -n | curl -T - -X POST`` of the same envelope directory to
  the same route (streamed, chunked: the ratio's baseline) and, up to 1000 MiB, the issue's
  ``curl --data-binary @-`` (curl reads the whole body into memory first, and refuses a body
  over 1 GiB, so a 1 GiB adapter cannot be sent that way). Each side's 201 is checked;
  the installed directory is removed afterwards (never loaded, so the server holds nothing).
* **download**: one server export whose ``input_adapter`` is the big adapter (so the archive
  is about ``--adapter-mib`` MiB of incompressible bytes, compressed by the server as it
  streams), fetched by the CLI's download-and-verify step (``fetch_export`` in a fresh
  interpreter: the name-bound download hashed into a private staging file, strict
  extraction, the pristine verifier, publication) against ``curl -o FILE URL && sha256sum
  FILE``. The CLI command itself (``hf export-sft --url ... --keep-server-copy``) also
  creates the export, which costs the server more than the download (it writes the bundle
  and its archive, hashing the adapter twice): its wall time is reported beside, once.

Every side runs as a child process, start-up included. Per side: best wall seconds, the
client's CPU seconds (``os.wait4``) and peak RSS (a pipeline's largest member), the server's
CPU seconds (``/proc/PID/stat``) and peak RSS (``VmHWM``, reset before each side through
``/proc/PID/clear_refs``).

    python -m benchmarks.hf_http_transfer --json                  # 1 GiB adapter, 3 rounds
    python -m benchmarks.hf_http_transfer --quick --json          # 4 MiB, 1 round
    python -m benchmarks.hf_http_transfer --adapter-mib 1000 --parts import --json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks._common import kiln_verify_script  # noqa: E402

MiB = 2**20
ROWS = [
    {"messages": [{"role": "user", "content": "two plus two"},
                  {"role": "assistant", "content": "the answer is four"}]},
    {"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "the arm"},
                  {"role": "assistant", "content": "pull the arm"}]},
]  # fmt: skip
TRAIN_FLAGS = (
    "--learning-rate", "1e-2", "--lora-rank", "2", "--target-modules", "q_proj,in_proj_qkv",
    "--dtype", "float32", "--no-gradient-checkpointing", "--epochs", "1", "--seed", "7",
)  # fmt: skip
FETCH = (
    "import json, sys\n"
    "from pathlib import Path\n"
    "from kiln_verify.control_client.hf_export_fetch import fetch_export\n"
    "from kiln_verify.control_client.hf_exports import HfExportClient\n"
    "url, name, sha, out = sys.argv[1:]\n"
    "with HfExportClient(url) as client:\n"
    "    got = fetch_export(client, name, sha, Path(out))\n"
    "print(json.dumps({'archive_sha256': got.archive_sha256, 'bytes': got.archive_bytes}))\n"
)
IMPORTS = "/v1/train/hf/peft/imports/"
#: curl 7.88 reads ``--data-binary @-`` into one buffer of at most 1 GiB ("out of memory"
#: past it); the envelope adds gzip framing and nine small files to the adapter.
CURL_DATA_MAX_MIB = 1000
WIDER = {
    "hidden_size": 128, "intermediate_size": 256, "head_dim": 32, "num_hidden_layers": 4,
    "linear_key_head_dim": 32, "linear_value_head_dim": 32,
    "layer_types": ["linear_attention", "full_attention"] * 2,
}  # fmt: skip
#: Runs a side and writes its children's peak RSS (KiB) to argv[1]: the side's own RSS is
#: recorded from a small launcher, not from this process (a child's peak counts the memory
#: of the process that forked it, until its exec).
LAUNCH = (
    "import resource, subprocess, sys\n"
    "code = subprocess.call(sys.argv[2:])\n"
    "with open(sys.argv[1], 'w') as out:\n"
    "    out.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
    "sys.exit(code)\n"
)
_LISTENING = re.compile(r"listening on (http://127\.0\.0\.1:\d+)")
_TICK = os.sysconf("SC_CLK_TCK")


@dataclass
class Sample:
    wall_s: float
    cpu_s: float
    rss_mib: float
    server_cpu_s: float
    server_rss_mib: float


class Server:
    """``kiln-verify serve --model M`` on an ephemeral loopback port, logging to a file."""

    def __init__(self, model: Path, state: Path, log: Path) -> None:
        argv = [kiln_verify_script(), "serve", "--model", str(model), "--state-dir", str(state)]
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                [*argv, "--port", "0"], stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )  # fmt: skip
        self.state = state
        deadline = time.monotonic() + 120
        while (found := _LISTENING.search(log.read_text(errors="replace"))) is None:
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"serve did not start: {log.read_text()[-2000:]}")
            time.sleep(0.05)
        self.url = found.group(1)

    def cpu(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICK

    def reset_peak(self) -> None:
        Path(f"/proc/{self.process.pid}/clear_refs").write_text("5")

    def peak_mib(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError("no VmHWM")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=60)


def measure(argv: Sequence[str], server: Server, output: Path) -> tuple[Sample, str]:
    """Run ``argv`` to success; its sample and standard output."""
    server.reset_peak()
    server_cpu = server.cpu()
    with output.open("wb") as out:
        start = time.perf_counter()
        launched = [sys.executable, "-S", "-c", LAUNCH, str(output) + ".rss", *argv]
        process = subprocess.Popen(launched, stdout=out, cwd=REPO_ROOT)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    text = output.read_text(errors="replace")
    if process.returncode != 0:
        raise RuntimeError(f"{list(argv)[:6]} exited {process.returncode}: {text[-2000:]}")
    sample = Sample(
        wall_s=wall, cpu_s=usage.ru_utime + usage.ru_stime,
        rss_mib=int(Path(str(output) + ".rss").read_text()) / 1024,
        server_cpu_s=server.cpu() - server_cpu, server_rss_mib=server.peak_mib(),
    )  # fmt: skip
    return sample, text


def build_model(directory: Path) -> Path:
    """The tiny model's tokenizer and template over a wider Qwen3.5 (hidden 128, 4 layers):
    the tiny model's projections hold at most 504 MiB of float32 LoRA at ``MAX_LORA_RANK``,
    this one about 2 GiB, so 1 GiB fits at a rank of about 33k."""
    import torch
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

    from kiln_verify.testing.tiny_model import build_tiny_model

    build_tiny_model(directory)
    config = Qwen3_5TextConfig.from_pretrained(directory)
    config.update(WIDER)
    torch.manual_seed(0)
    Qwen3_5ForCausalLM(config).save_pretrained(directory)
    return directory


def build_completed(tmp: Path) -> tuple[Path, Path]:
    """(model, completed ``bench.kiln-hf``): an export and one ``train.py`` step."""
    from kiln_verify.hf.export import export_sft
    from kiln_verify.hf.export.source import ExportSource

    model = build_model(tmp / "model")
    rows = tmp / "rows.jsonl"
    rows.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    target = tmp / "bench.kiln-hf.tar.gz"
    out = export_sft(ExportSource(model=model), dataset=rows, name="bench", output=target)
    env = {k: v for k, v in os.environ.items() if k != "WORLD_SIZE"}
    subprocess.run(
        [sys.executable, "-I", str(out.directory / "train.py"), str(out.directory),
         "--base-model", str(model), *TRAIN_FLAGS],
        check=True, capture_output=True, env=env, timeout=900,
    )  # fmt: skip
    target.unlink()
    return model, out.directory


def _imports(args: argparse.Namespace, server: Server, big: Path, tmp: Path) -> dict[str, Any]:
    from kiln_verify.hf.envelope import materialized_envelope

    kv = kiln_verify_script()
    samples: dict[str, list[Sample]] = {"cli": [], "curl_stream": []}
    if args.adapter_mib <= CURL_DATA_MAX_MIB:
        samples["curl_data_binary"] = []
    with materialized_envelope(big, "envelope", tmp) as (envelope, _, _):
        root = envelope
        for index in range(args.rounds):
            sides = list(samples) if index % 2 == 0 else list(reversed(samples))
            for side in sides:
                name = f"{side.replace('_', '-')}-{index}"
                if side == "cli":
                    argv = [kv, "hf", "import-peft", "--bundle", str(big), "--name", name,
                            "--url", server.url, "--json"]  # fmt: skip
                else:
                    moved = root.with_name(f"{name}.kiln-hf-import")
                    os.rename(root, moved)
                    root = moved
                    argv = _curl_import(side, root, f"{server.url}{IMPORTS}{name}")
                sample, text = measure(argv, server, tmp / "out.txt")
                ok = '"status": "imported"' in text if side == "cli" else text.strip() == "201"
                if not ok:
                    raise RuntimeError(f"{side} import did not install: {text[-1000:]}")
                shutil.rmtree(server.state / "adapters" / name)
                samples[side].append(sample)
    report: dict[str, Any] = _report(samples, "cli", "curl_stream")
    if "curl_data_binary" in samples:
        report["vs_data_binary"] = _ratios(samples, "cli", "curl_data_binary")
    else:
        report["vs_data_binary"] = (
            "not run: curl 7.88 reads --data-binary @- into memory and stops at 1 GiB"
        )
    print(json.dumps({"import": report}), file=sys.stderr, flush=True)
    return report


def _curl_import(side: str, root: Path, url: str) -> list[str]:
    """``tar | gzip | curl`` of the envelope directory ``root``; prints the HTTP status."""
    how = "--data-binary @-" if side == "curl_data_binary" else "-T - -X POST"
    pipeline = (
        f"tar --format=ustar -C {root.parent} -cf - {root.name} | gzip -6 -n | curl -sS"
        f" -o /dev/null -w '%{{http_code}}' -H 'Content-Type: application/gzip' {how} {url}"
    )
    return ["bash", "-o", "pipefail", "-c", pipeline]


def _downloads(args: argparse.Namespace, server: Server, big: Path, tmp: Path) -> dict[str, Any]:
    import httpx

    kv = kiln_verify_script()
    measure([kv, "hf", "import-peft", "--bundle", str(big), "--name", "input", "--url",
             server.url, "--json"], server, tmp / "out.txt")  # fmt: skip
    with httpx.Client(base_url=server.url, trust_env=False, timeout=3600) as http:
        start = time.perf_counter()
        body = {"name": "dl", "examples": ROWS, "input_adapter": "input"}
        made = http.post("/v1/train/hf/sft/exports", json=body)
        create_s = time.perf_counter() - start
        if made.status_code != 201:
            raise RuntimeError(f"create answered {made.status_code}: {made.text[:1000]}")
    sha = made.json()["export_sha256"]
    url = f"{server.url}/v1/train/hf/exports/dl/download"
    archive = tmp / "dl.kiln-hf.tar.gz"
    samples: dict[str, list[Sample]] = {"cli_fetch": [], "curl_sha256sum": []}
    digests = set()
    size = 0
    for index in range(args.rounds):
        sides = list(samples) if index % 2 == 0 else list(reversed(samples))
        for side in sides:
            if side == "cli_fetch":
                argv = [sys.executable, "-c", FETCH, server.url, "dl", sha, str(archive)]
            else:
                argv = ["bash", "-c", f"curl -sS --fail -o {archive} {url} && sha256sum {archive}"]
            sample, text = measure(argv, server, tmp / "out.txt")
            if side == "cli_fetch":
                digests.add(json.loads(text)["archive_sha256"])
            else:
                digests.add("sha256:" + text.split()[0])
            size = archive.stat().st_size
            archive.unlink()
            samples[side].append(sample)
    if len(digests) != 1:
        raise RuntimeError(f"the sides downloaded different bytes: {digests}")
    rows = tmp / "rows.jsonl"
    rows.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    report: dict[str, Any] = _report(samples, "cli_fetch", "curl_sha256sum")
    report["archive_bytes"] = size
    report["server_create_s"] = round(create_s, 3)
    print(json.dumps({"download": report}), file=sys.stderr, flush=True)
    try:
        full, _ = measure([kv, "hf", "export-sft", "--url", server.url, "--name", "full",
                           "--file", str(rows), "--input-adapter", "input", "--output",
                           str(archive), "--keep-server-copy", "--json"],
                          server, tmp / "out.txt")  # fmt: skip
    except RuntimeError as error:  # e.g. the create outlasting the client's read timeout
        report["cli_export_sft_with_create"] = str(error)[-600:]
    else:
        archive.unlink()
        report["cli_export_sft_with_create"] = _rounded(full)
    return report


def _rounded(sample: Sample) -> dict[str, float]:
    return {key: round(value, 3) for key, value in asdict(sample).items()}


def _report(samples: dict[str, list[Sample]], ours: str, base: str) -> dict[str, Any]:
    best = {side: min(values, key=lambda s: s.wall_s) for side, values in samples.items()}
    cpu = {side: min(s.cpu_s for s in values) for side, values in samples.items()}
    return {
        "sides": {
            side: {**_rounded(best[side]), "best_cpu_s": round(cpu[side], 3)} for side in best
        },
        **_ratios(samples, ours, base),
    }


def _ratios(samples: dict[str, list[Sample]], ours: str, base: str) -> dict[str, float]:
    """Best wall over best wall, best client CPU over best client CPU."""
    wall = {side: min(s.wall_s for s in samples[side]) for side in (ours, base)}
    cpu = {side: min(s.cpu_s for s in samples[side]) for side in (ours, base)}
    return {
        "wall_ratio": round(wall[ours] / wall[base], 2),
        "client_cpu_ratio": round(cpu[ours] / cpu[base], 2),
    }


def run(
    args: argparse.Namespace, tmp: Path, completed: tuple[Path, Path] | None = None
) -> dict[str, Any]:
    from benchmarks._big_adapter import enlarge_bundle

    start = time.perf_counter()
    model, bundle = completed if completed is not None else build_completed(tmp)
    big, rank, weights = enlarge_bundle(bundle, tmp / "big" / "big.kiln-hf", args.adapter_mib * MiB)
    setup_s = time.perf_counter() - start
    server = Server(model, tmp / "state", tmp / "serve.log")
    try:
        parts = getattr(args, "parts", "import,download").split(",")
        imports = _imports(args, server, big, tmp) if "import" in parts else None
        downloads = _downloads(args, server, big, tmp) if "download" in parts else None
    finally:
        server.stop()
    return {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform(), "loadavg": os.getloadavg()},
        "adapter_mib": args.adapter_mib, "adapter_rank": rank, "adapter_bytes": weights,
        "rounds": args.rounds, "setup_s": round(setup_s, 2),
        "import": imports, "download": downloads,
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adapter-mib", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--parts", choices=("import,download", "import", "download"), default="import,download"
    )
    parser.add_argument("--quick", action="store_true", help="4 MiB adapter, one round")
    parser.add_argument("--tmpdir", type=Path, default=None, help="where the scratch dir goes")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.adapter_mib, args.rounds = 4, 1
    if args.adapter_mib < 1 or args.rounds < 1:
        parser.error("--adapter-mib and --rounds must be positive")
    with tempfile.TemporaryDirectory(prefix="kiln-hf-http-bench-", dir=args.tmpdir) as tmp:
        results = run(args, Path(tmp))
    print(json.dumps(results, indent=2) if args.json else results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
