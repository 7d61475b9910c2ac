"""Curation: which texts and runs are worth training on, and a training file of them (`toolpath curate`).

    items.py      what is scored (Item: its source, its text, a run's messages) and CurateError
    sources.py    SOURCE read into items: `runs:FILTER` (runs_source.py), a folder of text files, a JSONL file
    proxy.py      the proxy model: a local model loaded through the policies, its next-token and sequence logits
    askllm.py     AskLLM: P(yes) to the paper's question "is this informative for pre-training?"
    perplexity.py the classic baseline: the proxy model's mean log-likelihood of the text
    density.py    kernel density over MiniLM embeddings, and inverse-propensity (coverage) sampling
    select.py     --select top:K | fraction:F | density:F
    export.py     the chat fine-tuning file (OpenAI's and TRL's `messages` with tool calls and tool results)

Sits beside evals: it reads the run store and calls policies, and nothing but the CLI imports it.
"""
