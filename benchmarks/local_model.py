"""The bundled model on this CPU: first load (GGUF conversion), cached load, time to first token, tokens/s.

    python benchmarks/local_model.py [--tokens 64]

Runs in a fresh TOOLPATH_HOME so the first load really converts. Each load runs in its own subprocess, so
both pay the same imports; import time (torch, transformers and its Llama modules) is reported on its own,
and "load" is what toolpath's loader adds on top: finding the file, hashing it, reading the weights. The ratio printed
last is the cached load against the first load, measured in this run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import torch, transformers
from transformers import AutoModelForCausalLM, AutoTokenizer
import transformers.models.llama.modeling_llama  # SmolLM2 is a Llama; from_pretrained would import it lazily
imports = time.perf_counter() - t0
from toolpath.policies.base import load
t1 = time.perf_counter()
policy = load("local")
load_s = time.perf_counter() - t1
out = {"imports": imports, "load": load_s}
if sys.argv[1] == "generate":
    from threading import Thread
    from transformers import TextIteratorStreamer
    tok, model = policy.tokenizer, policy.model
    enc = tok.apply_chat_template([{"role": "user", "content": "What is 2+3?"}], add_generation_prompt=True,
                                  return_tensors="pt", return_dict=True)
    model.generate(**enc, max_new_tokens=4, do_sample=False)  # warm-up
    streamer = TextIteratorStreamer(tok, skip_prompt=True, skip_special_tokens=True)
    n = int(sys.argv[2])
    kwargs = dict(**enc, max_new_tokens=n, min_new_tokens=n, do_sample=False, streamer=streamer)
    t2 = time.perf_counter()
    th = Thread(target=model.generate, kwargs=kwargs)
    th.start()
    first, text = None, ""
    for piece in streamer:
        if first is None and piece:
            first = time.perf_counter() - t2
        text += piece
    th.join()
    total = time.perf_counter() - t2
    out.update(ttft=first, tokens=n, seconds=total, tps=n / total, text=text,
               answer=policy.respond([__import__("toolpath.state").state.Message(role="user", content="What is 2+3?")],
                                     [], max_new_tokens=24).raw)
print("RESULT " + json.dumps(out))
"""


def child(home: str, *args: str) -> dict:
    env = {**os.environ, "TOOLPATH_HOME": home, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", CHILD, *args], capture_output=True, text=True, env=env, check=True)
    line = next(l for l in r.stdout.splitlines() if l.startswith("RESULT "))
    return {**json.loads(line[7:]), "process": time.perf_counter() - t}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=64)
    args = ap.parse_args()
    home = tempfile.mkdtemp(prefix="toolpath-model-")
    first = child(home, "load")
    cached = child(home, "load")
    gen = child(home, "generate", str(args.tokens))
    print(f"imports (torch, transformers, llama)    {cached['imports']:6.2f} s")
    print(f"first load (GGUF de-quantize + save)    {first['load']:6.2f} s   whole process {first['process']:.2f} s")
    print(f"cached load (safetensors)               {cached['load']:6.2f} s   whole process {cached['process']:.2f} s")
    print(f"time to first token                     {gen['ttft']:6.3f} s")
    print(f"generation                              {gen['tps']:6.1f} tokens/s ({gen['tokens']} tokens, greedy)")
    print(f"'What is 2+3?' ->                       {gen['answer']!r}")
    print(f"ratio cached load / first load: {cached['load'] / first['load']:.3f}")


if __name__ == "__main__":
    main()
