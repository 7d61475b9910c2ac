"""Decode and prefill speed and perplexity of a local model (the bundled SmolLM2-135M unless --model names another)
on each engine and weights setting, beside the torch backend in the same run, on the same prompt and thread count.

    python benchmarks/engine.py [--model local|local:NAME|hf:PATH] [--engines torch,onnxruntime] [--threads 2]
                                [--prompt 256] [--new 64] [--repeats 3] [--weights fp32,int8,int4]
                                [--ppl-tokens 512] [--openvino-exporter PYTHON] [--json]

torch is the backend's own load (HFPolicy.from_path with model.options.weights), timed on its forward passes;
onnxruntime is toolpath's export (policies/engines/ort.py) run by ONNX Runtime GenAI; openvino is OpenVINO GenAI's
LLMPipeline on an optimum-intel export, measured only when --openvino-exporter names a Python that has
optimum-intel (it pins an older transformers than toolpath's, so it cannot share toolpath's environment).
Each row also gives the fraction of the memory-bandwidth bound: weight bytes read per token (every weight but an
input embedding table, of which a token reads one row) over this machine's measured copy bandwidth.
Perplexity: the same held-out text for every row, Python's own documentation (pydoc_data.topics, its topics in
sorted order, the first --ppl-tokens tokens), scored teacher-forced: torch in one forward pass, the engine a
token at a time through its generator (its export computes the output head on the last position only), each
row beside torch fp32's on the same tokens.
Goals: SmolLM2-135M decode >= 60 tokens/s and Qwen2.5-Coder-1.5B int4 >= 12 tokens/s on 2 threads, each >= 0.5
of the bound; prefill >= 2x torch; perplexity within +3 % of fp32 at the chosen setting.
"""

from __future__ import annotations

import argparse
import json
import math
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


def source_folder(model: str) -> Path:
    """The model folder a spec's `local`, `local:NAME` or `hf:PATH` loads (a GGUF converted once, as the backend
    does)."""
    from toolpath.policies.hf import convert_gguf
    from toolpath.policies.local import bundled_gguf

    kind, _, value = model.partition(":")
    if kind == "local" and not value:
        return convert_gguf(bundled_gguf())
    if kind == "local":
        from toolpath.policies.local_models import assemble
        from toolpath.policies.local_models import model as catalog

        m = catalog(value)
        return convert_gguf(assemble(m), digest=m.sha256)
    if kind == "hf":
        path = Path(value).expanduser()
        return convert_gguf(path) if path.suffix == ".gguf" else path
    raise SystemExit(f"--model: expected local, local:NAME or hf:PATH, got {model!r}")


def held_out_ids(source: Path, count: int) -> list[int]:
    """The first `count` tokens of Python's documentation topics (pydoc_data.topics, sorted by name)."""
    from pydoc_data.topics import topics

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(source))
    ids: list[int] = []
    for name in sorted(topics):
        ids += tokenizer.encode(topics[name], add_special_tokens=False)
        if len(ids) >= count:
            break
    return ids[:count]


def perplexity(log_probs: list[float]) -> float:
    return round(math.exp(-sum(log_probs) / len(log_probs)), 3)


def torch_perplexity(model, text: list[int]) -> float:
    import torch

    with torch.inference_mode():
        logits = model(torch.tensor([text])).logits[0, :-1].float()
        chosen = torch.log_softmax(logits, -1).gather(1, torch.tensor(text[1:])[:, None])
    return perplexity(chosen[:, 0].tolist())


def ort_perplexity(model, text: list[int]) -> float:
    import numpy as np
    import onnxruntime_genai as og

    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(text), do_sample=False)
    generator = og.Generator(model, params)
    chosen = []
    for i, token in enumerate(text[:-1]):
        generator.append_tokens([token])
        logits = generator.get_logits().reshape(-1).astype(np.float64)
        top = logits.max()
        chosen.append(logits[text[i + 1]] - top - math.log(np.exp(logits - top).sum()))
    return perplexity(chosen)


def torch_model(source: Path, weights: str):
    from toolpath.policies.hf import HFPolicy
    from toolpath.spec import ModelSpec

    spec = ModelSpec(name=f"hf:{source}", options={"weights": weights, "engine": "torch"})
    return HFPolicy.from_path(str(source), spec).model


def torch_speed(source: Path, weights: str, ids: list[int], new: int, threads: int, repeats: int,
                text: list[int]) -> dict:
    import torch

    model = torch_model(source, weights)
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

    from toolpath.policies.quant import model_bytes

    embedding = model.get_input_embeddings().weight
    tied = any(p is embedding for n, p in model.named_parameters(remove_duplicate=False) if "lm_head" in n)
    weight_bytes = model_bytes(model) - (0 if tied else embedding.numel() * embedding.element_size())
    row = _rows(once, len(ids), repeats, weight_bytes)
    row["perplexity"] = torch_perplexity(model, text) if text else None
    return row


def per_token_bytes(folder: Path) -> int:
    """Bytes of an export's weights read per token: every initializer but the tables a Gather looks rows up in."""
    import onnx

    graph = onnx.load(str(folder / "model.onnx"), load_external_data=False).graph
    tables = {node.input[0] for node in graph.node if node.op_type.startswith("Gather")}
    total = 0
    for init in graph.initializer:
        if init.name in tables:
            continue
        external = {e.key: e.value for e in init.external_data}
        total += int(external["length"]) if "length" in external else len(init.raw_data)
    return total


def ort_speed(source: Path, weights: str, ids: list[int], new: int, threads: int, repeats: int,
              text: list[int]) -> dict:
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

    row = _rows(once, len(ids), repeats, per_token_bytes(folder))
    row["perplexity"] = ort_perplexity(model, text) if text else None
    return row


def openvino_speed(exporter: str, source: Path, weights: str, ids: list[int], new: int, threads: int,
                   repeats: int, work: Path, text: list[int]) -> dict:
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

    return {**_rows(once, len(ids), repeats, folder_bytes(folder, (".bin",))), "perplexity": None}


def _rows(once, n_prompt: int, repeats: int, weight_bytes: int) -> dict:
    once()  # warm-up: first-call allocations and kernel choices
    runs = [once() for _ in range(repeats)]
    prefill, per_token = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
    return {"prefill_tokens_s": round(n_prompt / prefill, 1), "decode_tokens_s": round(1 / per_token, 1),
            "weight_bytes": weight_bytes}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="local", help="local (the bundled SmolLM2-135M), local:NAME or hf:PATH")
    ap.add_argument("--engines", default="torch,onnxruntime", help="the engines measured, torch first")
    ap.add_argument("--ppl-tokens", type=int, default=512, help="held-out tokens scored (0: no perplexity)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt", type=int, default=256, help="prompt tokens")
    ap.add_argument("--new", type=int, default=64, help="decoded tokens")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--weights", default="fp32,int8,int4")
    ap.add_argument("--openvino-exporter", metavar="PYTHON", help="a Python with optimum-intel (see the docstring)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    source = source_folder(args.model)
    ids = [(7 * i) % 40000 + 100 for i in range(args.prompt)]  # fixed, ordinary token ids
    text = held_out_ids(source, args.ppl_tokens) if args.ppl_tokens else []
    bandwidth = copy_bandwidth()
    work = Path(os.environ.get("TOOLPATH_HOME") or Path.home() / ".toolpath") / "bench-engine"
    measures = {"torch": torch_speed, "onnxruntime": ort_speed}
    if args.openvino_exporter:
        measures["openvino"] = lambda *a: openvino_speed(args.openvino_exporter, *a[:6], work, a[6])
    chosen = args.engines.split(",") + (["openvino"] if args.openvino_exporter else [])
    rows = []
    for weights in args.weights.split(","):
        base = None
        for engine in chosen:
            row = {"engine": engine, "weights": weights,
                   **measures[engine](source, weights, ids, args.new, args.threads, args.repeats, text)}
            row["bandwidth_fraction"] = round(row["decode_tokens_s"] * row["weight_bytes"] / bandwidth, 3)
            base = base or row
            row["decode_vs_first"] = round(row["decode_tokens_s"] / base["decode_tokens_s"], 2)
            row["prefill_vs_first"] = round(row["prefill_tokens_s"] / base["prefill_tokens_s"], 2)
            rows.append(row)
    reference = next((r["perplexity"] for r in rows if (r["engine"], r["weights"]) == ("torch", "fp32")), None)
    if text and reference is None:  # fp32 not among the rows: its perplexity alone, as the reference
        reference = torch_perplexity(torch_model(source, "fp32"), text)
    for r in rows:
        r["perplexity_vs_fp32"] = round(r["perplexity"] / reference, 4) if r.get("perplexity") else None
    result = {"model": args.model, "source": source.name, "threads": args.threads, "prompt_tokens": args.prompt,
              "new_tokens": args.new, "ppl_tokens": len(text), "torch_fp32_perplexity": reference,
              "copy_bandwidth_gb_s": round(bandwidth / 1e9, 1), "rows": rows}
    if args.json:
        print(json.dumps(result))
        return
    print(f"{args.model} ({source.name}), {args.threads} threads, prompt {args.prompt}, {args.new} new tokens, "
          f"copy bandwidth {result['copy_bandwidth_gb_s']} GB/s, perplexity on {len(text)} held-out tokens "
          f"(torch fp32: {reference})")
    for r in rows:
        ppl = f"  perplexity {r['perplexity']} ({r['perplexity_vs_fp32']}x fp32)" if r.get("perplexity") else ""
        print(f"  {r['engine']:12} {r['weights']:5} decode {r['decode_tokens_s']:7.1f} tok/s "
              f"({r['decode_vs_first']}x {chosen[0]}, {r['bandwidth_fraction']:.2f} of bound)  prefill "
              f"{r['prefill_tokens_s']:8.1f} tok/s ({r['prefill_vs_first']}x {chosen[0]}){ppl}")


if __name__ == "__main__":
    main()
