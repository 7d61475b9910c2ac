"""Decode and prefill speed of the bundled SmolLM2-135M on each engine and weights setting, beside the torch backend
in the same run, on the same prompt and thread count.

    python benchmarks/engine.py [--threads 2] [--prompt 256] [--new 64] [--repeats 3] [--weights fp32,int8,int4]
                                [--openvino-exporter PYTHON] [--json]

torch is the backend's own load (HFPolicy.from_path with model.options.weights), timed on its forward passes;
onnxruntime is toolpath's export (policies/engines/ort.py) run by ONNX Runtime GenAI; openvino is OpenVINO GenAI's
LLMPipeline on an optimum-intel export, measured only when --openvino-exporter names a Python that has
optimum-intel (it pins an older transformers than toolpath's, so it cannot share toolpath's environment).
Each row also gives the fraction of the memory-bandwidth bound: weight bytes read per token over this machine's
measured copy bandwidth. Goals: SmolLM2-135M decode >= 60 tokens/s on 2 threads; prefill >= 2x torch.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def copy_bandwidth() -> float:
    """Bytes per second of a large memory copy (read + write counted once each), the best of three."""
    import numpy as np

    a = np.ones(64 << 20, dtype=np.float32)
    b = np.empty_like(a)
    best = 0.0
    for _ in range(3):
        t = time.perf_counter()
        np.copyto(b, a)
        best = max(best, 2 * a.nbytes / (time.perf_counter() - t))
    return best


def folder_bytes(folder: Path, suffixes: tuple[str, ...]) -> int:
    return sum(p.stat().st_size for p in folder.iterdir() if p.name.endswith(suffixes))


def torch_speed(source: Path, weights: str, ids: list[int], new: int, threads: int, repeats: int) -> dict:
    import torch

    from toolpath.policies.hf import HFPolicy
    from toolpath.spec import ModelSpec

    model = HFPolicy.from_path(str(source), ModelSpec(name=f"hf:{source}", options={"weights": weights})).model
    torch.set_num_threads(threads)
    prompt = torch.tensor([ids])

    def once():
        with torch.inference_mode():
            t = time.perf_counter()
            out = model(prompt, use_cache=True)
            t1 = time.perf_counter()
            cache, token = out.past_key_values, out.logits[:, -1:].argmax(-1)
            for _ in range(new):
                out = model(token, past_key_values=cache, use_cache=True)
                cache, token = out.past_key_values, out.logits[:, -1:].argmax(-1)
            return t1 - t, (time.perf_counter() - t1) / new

    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters()) + \
        sum(b.numel() * b.element_size() for b in model.buffers())
    return _rows(once, len(ids), repeats, weight_bytes)


def ort_speed(source: Path, weights: str, ids: list[int], new: int, threads: int, repeats: int) -> dict:
    import onnxruntime_genai as og

    from toolpath.policies.engines.ort import export

    folder = export(source, weights)
    config = og.Config(str(folder))
    config.clear_providers()
    config.overlay(json.dumps({"model": {"decoder": {"session_options": {"intra_op_num_threads": threads}}}}))
    model = og.Model(config)

    def once():
        params = og.GeneratorParams(model)
        params.set_search_options(max_length=len(ids) + new, min_length=len(ids) + new, do_sample=False)
        generator = og.Generator(model, params)
        t = time.perf_counter()
        generator.append_tokens(ids)  # the prompt's forward pass and the first token's logits
        t1 = time.perf_counter()
        for _ in range(new):
            generator.generate_next_token()
        return t1 - t, (time.perf_counter() - t1) / new

    return _rows(once, len(ids), repeats, folder_bytes(folder, (".onnx", ".onnx.data")))


def openvino_speed(exporter: str, source: Path, weights: str, ids: list[int], new: int, threads: int,
                   repeats: int, work: Path) -> dict:
    import numpy as np
    import openvino as ov
    import openvino_genai as ov_genai

    folder = work / f"openvino-{weights}"
    if not (folder / "openvino_model.xml").is_file():
        fmt = {"fp32": "fp32", "int8": "int8", "int4": "int4"}[weights]
        subprocess.run([str(Path(exporter).parent / "optimum-cli"), "export", "openvino", "-m", str(source),
                        "--task", "text-generation-with-past", "--weight-format", fmt, str(folder),
                        # every linear layer at int4 in groups of 32, as the ONNX Runtime builder does (SmolLM2's
                        # 576 channels are not a multiple of optimum's default group of 128)
                        *(["--group-size", "32", "--ratio", "1.0"] if fmt == "int4" else [])],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       env={**os.environ, "HF_HUB_OFFLINE": "1"})
    pipe = ov_genai.LLMPipeline(str(folder), "CPU", INFERENCE_NUM_THREADS=threads)
    config = ov_genai.GenerationConfig(max_new_tokens=new, min_new_tokens=new, do_sample=False)
    tokens = ov_genai.TokenizedInputs(ov.Tensor(np.array([ids], dtype=np.int64)),
                                      ov.Tensor(np.ones((1, len(ids)), dtype=np.int64)))

    def once():
        metrics = pipe.generate(tokens, config).perf_metrics
        return metrics.get_ttft().mean / 1000, metrics.get_tpot().mean / 1000

    return _rows(once, len(ids), repeats, folder_bytes(folder, (".bin",)))


def _rows(once, n_prompt: int, repeats: int, weight_bytes: int) -> dict:
    once()  # warm-up: first-call allocations and kernel choices
    runs = [once() for _ in range(repeats)]
    prefill, per_token = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
    return {"prefill_tokens_s": round(n_prompt / prefill, 1), "decode_tokens_s": round(1 / per_token, 1),
            "weight_bytes": weight_bytes}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt", type=int, default=256, help="prompt tokens")
    ap.add_argument("--new", type=int, default=64, help="decoded tokens")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--weights", default="fp32,int8,int4")
    ap.add_argument("--openvino-exporter", metavar="PYTHON", help="a Python with optimum-intel (see the docstring)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from toolpath.policies.hf import convert_gguf
    from toolpath.policies.local import bundled_gguf

    source = convert_gguf(bundled_gguf())
    ids = [(7 * i) % 40000 + 100 for i in range(args.prompt)]  # fixed, ordinary token ids
    bandwidth = copy_bandwidth()
    work = Path(os.environ.get("TOOLPATH_HOME") or Path.home() / ".toolpath") / "bench-engine"
    rows = []
    for weights in args.weights.split(","):
        engines = {"torch": lambda: torch_speed(source, weights, ids, args.new, args.threads, args.repeats),
                   "onnxruntime": lambda: ort_speed(source, weights, ids, args.new, args.threads, args.repeats)}
        if args.openvino_exporter:
            engines["openvino"] = lambda: openvino_speed(args.openvino_exporter, source, weights, ids, args.new,
                                                         args.threads, args.repeats, work)
        base = None
        for engine, measure in engines.items():
            row = {"engine": engine, "weights": weights, **measure()}
            row["bandwidth_fraction"] = round(row["decode_tokens_s"] * row["weight_bytes"] / bandwidth, 3)
            base = base or row
            row["decode_vs_torch"] = round(row["decode_tokens_s"] / base["decode_tokens_s"], 2)
            row["prefill_vs_torch"] = round(row["prefill_tokens_s"] / base["prefill_tokens_s"], 2)
            rows.append(row)
    result = {"model": "SmolLM2-135M-Instruct", "threads": args.threads, "prompt_tokens": args.prompt,
              "new_tokens": args.new, "copy_bandwidth_gb_s": round(bandwidth / 1e9, 1), "rows": rows}
    if args.json:
        print(json.dumps(result))
        return
    print(f"SmolLM2-135M, {args.threads} threads, prompt {args.prompt}, {args.new} new tokens, "
          f"copy bandwidth {result['copy_bandwidth_gb_s']} GB/s")
    for r in rows:
        print(f"  {r['engine']:12} {r['weights']:5} decode {r['decode_tokens_s']:7.1f} tok/s ({r['decode_vs_torch']}x torch, "
              f"{r['bandwidth_fraction']:.2f} of bound)  prefill {r['prefill_tokens_s']:8.1f} tok/s "
              f"({r['prefill_vs_torch']}x torch)")


if __name__ == "__main__":
    main()
