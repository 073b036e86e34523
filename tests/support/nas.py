"""Nemotron-NAS's kinds as its config states them, for the suites that hold the analysis to them: layers whose
``block_configs`` entries are equal are one kind; each kind named after what it does (LANGUAGE §7: ``attention``
where a layer attends, ``identity`` where it has no block, ``feed-forward`` otherwise — one product in place of
attention mixes no positions), a name several kinds share told apart by their first layer. Computed from the config
alone, never from ``streamed``'s reading of it."""

from __future__ import annotations

import json


def block_kinds(cfg: dict) -> list[tuple[str, tuple[int, ...]]]:
    """The config's kinds in order of their first layer: ``(name, layers)``."""
    blocks = [json.dumps(b, sort_keys=True) for b in cfg["block_configs"]]
    layers: dict[str, list[int]] = {}
    for i, b in enumerate(blocks):
        layers.setdefault(b, []).append(i)

    def base(b: dict) -> str:
        att, ffn = b["attention"], b["ffn"]
        if not att.get("no_op") and not att.get("replace_with_linear"):
            return "attention"
        return "identity" if att.get("no_op") and ffn.get("no_op") else "feed-forward"

    names = {b: base(json.loads(b)) for b in layers}
    shared = {n for n in names.values() if list(names.values()).count(n) > 1}
    return [(names[b] + (f" (layer {ls[0]})" if names[b] in shared else ""), tuple(ls)) for b, ls in layers.items()]


def kind_of_layer(cfg: dict) -> dict[int, tuple[str, tuple[int, ...]]]:
    """Each layer's kind: ``layer → (name, layers)``."""
    return {l: kind for kind in block_kinds(cfg) for l in kind[1]}
