"""KV-cache kinds for local transformers models (the dispatch lives here; each kind is its own module)."""
