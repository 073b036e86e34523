"""Single-field mutations of JSON values, for the hypothesis tests that feed hostile input to every entry point
(the command line's documents, configs, targets and manifests; the server's request params)."""

from __future__ import annotations


def mutate(value, path: list, new):
    """``value`` with the item at ``path`` (keys and indices, wrapping round) replaced by ``new``."""
    if not path or not isinstance(value, (dict, list)) or not value:
        return new
    if isinstance(value, dict):
        key = sorted(value)[path[0] % len(value)]
        return {**value, key: mutate(value[key], path[1:], new)}
    i = path[0] % len(value)
    return [*value[:i], mutate(value[i], path[1:], new), *value[i + 1:]]
