"""The seed's production route over HTTP ("Hardware qualification", steps 1-8), in two halves.

``export``: start ``kiln-verify serve --model`` on loopback, export the SFT and the recorded
GRPO bundle through ``hf export-sft|export-grpo --url`` (create, download, verify, publish,
delete the server copy), unpack each verified archive for its ``train.py``, record the
resident identity the server wrote into the exports (the manifest's ``model`` and
``source_execution_provenance``) and stop the server before anything trains (exit 0, no
export left behind). The workload then runs each bundle's ``train.py`` as its own steps.

``import``: restart the same server (same binary, model, state directory) and require the
identical resident identity (a one-row probe export made by the restarted server, deleted
again), import both completed bundles through ``hf import-peft --url``, require both in
``GET /v1/adapters`` and a short rollout of each that the server's policy plays with that
adapter (the run summary's behaviour policy names it and its content revision), then stop
the server cleanly with no import staging left. The adapters' tensors and LoRA delta are
checked afterwards by ``check_adapter.py`` on the installed directories.

A half runs in one step because each step has its own network namespace and process group:
a server cannot outlive the step that started it.

    python qualification/tools/http_roundtrip.py export --kiln-verify KV --model M --device cpu \
        --state-dir S --out-dir D --sft FILE --grpo FILE [--local-sft ARCHIVE]
    python qualification/tools/http_roundtrip.py import --kiln-verify KV --model M --device cpu \
        --state-dir S --out-dir D --sft FILE
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from qualification.tools.metrics import emit, fail

TASKS = (("sft", "qual-sft", "export-sft"), ("grpo", "qual-grpo", "export-grpo"))
IDENTITY_FILE = "resident-identity.json"
LISTENING = re.compile(r"listening on (http://127\.0\.0\.1:\d+)")
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 60.0
RUN_TIMEOUT_S = 600.0
TERMINAL = frozenset({"rollout_ready", "completed", "failed", "cancelled"})


class Failed(Exception):
    """A requirement of the route did not hold; the message says which."""


class Server:
    """``kiln-verify serve`` over the model on ``--device``, ``--port 0``, logging to
    ``OUT/serve.log``."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.log = log = args.out_dir / "serve.log"
        self.starts_before = (
            log.read_text(errors="replace").count("listening on") if log.exists() else 0
        )
        config = args.out_dir / "serve.toml"  # the resident model's device: [model].device
        model = json.dumps(str(args.model.resolve()))
        config.write_text(f"[model]\npath = {model}\ndevice = {json.dumps(args.device)}\n")
        argv = [
            args.kiln_verify,
            "serve",
            "--config",
            str(config),
            "--state-dir",
            str(args.state_dir),
        ]
        with log.open("ab") as out:
            self.process = subprocess.Popen(
                [*argv, "--host", "127.0.0.1", "--port", "0"],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        self.url = self._wait_url()

    def _wait_url(self) -> str:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                tail = self.log.read_text(errors="replace")[-2000:]
                raise Failed(f"serve exited {self.process.returncode} during start-up:\n{tail}")
            lines = self.log.read_text(errors="replace").splitlines()
            found = [m.group(1) for line in lines if (m := LISTENING.search(line))]
            if len(found) > self.starts_before:
                return found[-1]
            time.sleep(0.05)
        raise Failed("serve did not print its URL in time")

    def stop(self) -> int:
        """SIGTERM and the exit status; a server that needs SIGKILL fails the route."""
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise Failed("serve did not stop within 60 s of SIGTERM") from None


def start(args: argparse.Namespace) -> Server:
    """The server over ``--model`` and ``--state-dir``; both halves append to one log."""
    return Server(args)


def cli(args: argparse.Namespace, *argv: str) -> dict[str, Any]:
    """One ``kiln-verify ... --json`` command; its JSON answer, or the route fails."""
    command = [args.kiln_verify, *argv, "--json"]
    print("running:", " ".join(command), flush=True)
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    sys.stderr.write(done.stderr)
    print(done.stdout, flush=True)
    if done.returncode != 0:
        raise Failed(f"{' '.join(argv[:2])} exited {done.returncode}")
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def identity_of(manifest: dict[str, Any]) -> dict[str, Any]:
    return {key: manifest[key] for key in ("model", "source_execution_provenance")}


def digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
    return "sha256:" + hashlib.sha256(text).hexdigest()


def unpack(archive: Path, out_dir: Path, name: str) -> Path:
    """The verified archive's bundle as ``out_dir/NAME.kiln-hf`` (strict extraction)."""
    from kiln_verify.core.safe_tar import extract_tar_gz, remove_extracted

    root = extract_tar_gz(archive, out_dir, expected_root=f"{name}.kiln-hf")
    target = out_dir / root.name
    os.rename(root, target)
    remove_extracted(root)
    return target


def export_half(args: argparse.Namespace) -> None:
    import httpx

    server = start(args)
    identities: list[dict[str, Any]] = []
    try:
        for task, name, command in TASKS:
            source = args.sft if task == "sft" else args.grpo
            archive = args.out_dir / f"{name}.kiln-hf.tar.gz"
            answer = cli(
                args, "hf", command, "--url", server.url, "--name", name,
                "--file", str(source.resolve()), "--output", str(archive),
            )  # fmt: skip
            if (
                answer.get("server_copy") != "deleted"
                or answer.get("verified", {}).get("kind") != "pristine"
            ):
                raise Failed(f"{name}: not a verified download with its server copy deleted")
            emit(f"http.{task}_export_sha256", answer["export_sha256"])
            emit(f"http.{task}_archive_bytes", answer["archive_bytes"], "bytes")
            bundle = unpack(archive, args.out_dir, name)
            manifest = json.loads((bundle / "kiln_hf_export.json").read_bytes())
            identities.append(identity_of(manifest))
        if args.local_sft is not None:
            same = (args.out_dir / "qual-sft.kiln-hf.tar.gz").read_bytes() == (
                args.local_sft.read_bytes()
            )
            emit("http.sft_archive_equals_local", same)
        with httpx.Client(base_url=server.url, trust_env=False, timeout=60) as http:
            left = http.get("/v1/train/hf/exports").json()["data"]
        emit("http.server_exports_left", len(left), "count")
    finally:
        code = server.stop()
    emit("http.export_server_exit_code", code)
    if identities[0] != identities[1]:
        raise Failed("the SFT and GRPO exports record different resident identities")
    (args.out_dir / IDENTITY_FILE).write_text(json.dumps(identities[0], sort_keys=True))
    emit("http.resident_identity_sha256", digest(identities[0]))
    if left or code != 0:
        raise Failed(f"server stop {code}, exports left {left}")


def probe_identity(http: Any, sft: Path) -> dict[str, Any]:
    """The restarted server's resident identity: a one-row export it makes, then deletes."""
    row = json.loads(sft.read_text().splitlines()[0])
    made = http.post("/v1/train/hf/sft/exports", json={"name": "identity-probe", "examples": [row]})
    if made.status_code != 201:
        raise Failed(f"probe export answered {made.status_code}: {made.text[:400]}")
    detail = http.get("/v1/train/hf/exports/identity-probe").json()
    gone = http.delete(
        "/v1/train/hf/exports/identity-probe", headers={"If-Match": made.headers["ETag"]}
    )
    if gone.status_code != 200:
        raise Failed(f"probe delete answered {gone.status_code}")
    return identity_of(detail["manifest"])


def play(http: Any, oracle_url: str, adapter: str) -> dict[str, Any]:
    """A short rollout run that the resident model plays with ``adapter``; its summary."""
    body = {
        "environment_urls": [oracle_url], "groups": 1, "group_size": 2, "max_steps": 1,
        "concurrency": 1, "max_action_tokens": 8, "adapter": adapter,
    }  # fmt: skip
    created = http.post("/v1/openenv/runs", json=body)
    if created.status_code != 202:
        raise Failed(f"run for {adapter} answered {created.status_code}: {created.text[:400]}")
    run_id = created.json()["run_id"]
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while True:
        status = http.get(f"/v1/openenv/runs/{run_id}").json()
        if status["state"] in TERMINAL:
            break
        if time.monotonic() > deadline:
            raise Failed(f"run {run_id} did not end in time")
        time.sleep(0.2)
    if status["state"] != "rollout_ready":
        raise Failed(f"run for {adapter} ended {status['state']}: {status.get('failure')}")
    (url,) = [a["url"] for a in status["artifacts"] if a["kind"] == "summary"]
    summary: dict[str, Any] = http.get(url).json()
    return summary


def import_half(args: argparse.Namespace) -> None:
    import httpx

    identity = args.out_dir / IDENTITY_FILE
    if not identity.is_file():
        raise Failed(f"no {identity}: the export half records it (run that step first)")
    recorded = json.loads(identity.read_bytes())
    server = start(args)
    oracle = subprocess.Popen(
        [args.kiln_verify, "oracle", "serve", "bandit", "--port", "0"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    left: list[str] = ["(not checked)"]
    try:
        oracle_url = (oracle.stdout.readline() if oracle.stdout else "").strip().rstrip("/")
        if not oracle_url.startswith("http://"):
            raise Failed("the bandit oracle did not start")
        with httpx.Client(base_url=server.url, trust_env=False, timeout=120) as http:
            again = probe_identity(http, args.sft)
            emit("http.restart_identity_sha256", digest(again))
            emit("http.resident_identity_equal", again == recorded)
            if again != recorded:
                raise Failed("the restarted server's resident identity differs")
            for task, name, _ in TASKS:
                bundle = args.out_dir / f"{name}.kiln-hf"
                answer = cli(args, "hf", "import-peft", "--bundle", str(bundle),
                             "--name", f"http-{task}", "--url", server.url)  # fmt: skip
                emit(f"http.{task}_import_sha256", answer["import_sha256"])
                summary = play(http, oracle_url, f"http-{task}")
                played = summary["behavior_policy"].get("adapter")
                want = {
                    "name": f"http-{task}",
                    "content_sha256": "sha256:" + answer["content_revision"],
                }
                emit(f"http.{task}_rollout_adapter_played", played == want)
                if played != want:
                    raise Failed(f"the run played {played}, not {want}")
            listing = http.get("/v1/adapters").json()
            loaded = sorted(listing["loaded_adapters"])
            emit("http.loaded_adapters", ",".join(loaded))
            if loaded != ["http-grpo", "http-sft"]:
                raise Failed(f"the server holds {loaded}")
    finally:
        oracle.terminate()
        oracle.wait(timeout=30)
        code = server.stop()
        adapters = args.state_dir / "adapters"
        left = (
            sorted(p.name for p in adapters.iterdir() if p.name.startswith("."))
            if adapters.is_dir()
            else []
        )
    emit("http.import_server_exit_code", code)
    emit("http.import_staging_left", len(left), "count")
    if code != 0 or left:
        raise Failed(f"server stop {code}, staging left {left}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("half", choices=("export", "import"))
    p.add_argument("--kiln-verify", required=True)
    p.add_argument("--model", type=Path, required=True)
    p.add_argument("--device", choices=("cpu", "cuda"), required=True)
    p.add_argument("--state-dir", type=Path, required=True)
    p.add_argument("--out-dir", type=Path, required=True)
    p.add_argument("--sft", type=Path, required=True)
    p.add_argument("--grpo", type=Path)
    p.add_argument("--local-sft", type=Path)
    args = p.parse_args()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    try:
        if args.half == "export":
            if args.grpo is None:
                return fail("export needs --grpo")
            export_half(args)
        else:
            import_half(args)
    except Failed as error:
        return fail(str(error))
    return 0


if __name__ == "__main__":
    sys.exit(main())
