"""`toolpath curate SOURCE`: score texts or stored runs for training, keep the best or a covering sample, and
write them as a fine-tuning file (toolpath/curate/)."""

from __future__ import annotations

from .common import EXIT_OK, BadInput, echo, echo_json, model_overrides, one_line


def cmd_curate(args) -> int:
    from ..curate.items import CurateError

    try:
        return _curate(args)
    except CurateError as err:
        raise BadInput(str(err)) from None


def _curate(args) -> int:
    from ..curate.export import write_jsonl
    from ..curate.scoring import densities, score_items
    from ..curate.select import parse_select, select
    from ..curate.sources import read_source

    if args.batch_size < 1:
        raise BadInput(f"--batch-size must be at least 1, got {args.batch_size}")
    chosen = parse_select(args.select) if args.select else None  # a bad --select fails before any model loads
    found = read_source(args.source, args.home)
    items = found.items
    scores = score_items(items, args.score, args.model, model_overrides(args), args.batch_size, args.askllm_shots)
    candidates = [i for i, s in enumerate(scores) if args.min_score is None or s >= args.min_score]
    kept = candidates
    if chosen is not None and candidates:
        kind, value = chosen
        pool = [items[i] for i in candidates]
        density = densities(pool) if kind == "density" else None
        kept = [candidates[j] for j in select([scores[i] for i in candidates], kind, value, density, args.seed)]
    exported = write_jsonl([items[i] for i in kept], args.export) if args.export else None
    keep = set(kept)
    if args.json:
        echo_json({"score": args.score, "model": args.model if args.score != "density" else None,
                   "items": [{"source": item.source, "score": round(scores[i], 6), "selected": i in keep,
                              **({"run": item.meta} if item.meta else {})} for i, item in enumerate(items)],
                   "selected": len(kept), "skipped": found.skipped,
                   "export": {"path": args.export, "rows": exported} if args.export else None}, ensure_ascii=False)
        return EXIT_OK
    for i in sorted(range(len(items)), key=lambda i: -scores[i]):
        echo(f"{'*' if i in keep else ' '} {scores[i]:9.4f}  {one_line(items[i].source, 100)}")
    for why in found.skipped:
        echo(f"  skipped {why}")
    echo(f"{len(kept)} of {len(items)} selected by {args.score}" + (f" ({args.select})" if args.select else "")
         + (f"; {exported} rows written to {args.export}" if args.export else ""))
    return EXIT_OK
