"""Reading a ``config.json``'s fields as transformers reads them: the typed field access every model type's import
uses (``_Config``: the config's value, else its class default, every failure one ``SpecError`` naming the field), and
what several model types read alike — the rotation and its scaling (``_rotation``, as ``modeling_rope_utils`` computes
it), heads, windows, activations, and the flags the language refuses rather than drop (``_no``).

``hf.py`` (the import, the older families) and ``hf_families.py`` (Gemma 2 and 3, Phi-3, StarCoder2, OLMo 2,
InternLM2) build on these; nothing here knows a model type's layout.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ..lang.limits import MAX_DIMENSION, beyond
from .hf_defaults import DEFAULTS
from .spec import Rotation, Scaling, SpecError

_REQUIRED = object()


class _Config:
    """A config's fields, read with their types checked: every failure names the field and what it holds."""

    def __init__(self, data: dict, where: str, model_type: str, defaults: dict | None = None):
        self.data = data
        self.where = where
        self.model_type = model_type
        self.defaults = defaults if defaults is not None else DEFAULTS.get(model_type, {})
        #: Every number the model reads (``raw``) that the config leaves out, in the order read — (the value, whether
        #: it is derived, as the class derives it, rather than the class default): what the document says was assumed.
        self.defaulted: dict[str, tuple[Any, bool]] = {}

    def fail(self, field: str, why: str) -> SpecError:
        return SpecError(f"{self.where}: `{field}` {why}")

    def get(self, field: str) -> Any:
        """The field as transformers holds it: the config's value (``null`` included), else the class default."""
        return self.data[field] if field in self.data else self.defaults.get(field)

    def has(self, field: str) -> bool:
        return self.get(field) is not None

    def raw(self, field: str, default: Any = _REQUIRED) -> Any:
        v = self.get(field)
        if field not in self.data and isinstance(v, (int, float)) and not isinstance(v, bool):
            self.defaulted.setdefault(field, (v, False))  # a number the model takes from its class default
        if v is None:
            if default is _REQUIRED:
                if field in self.data:
                    raise self.fail(field, f"is null, but a {self.model_type} model needs it")
                raise SpecError(f"{self.where}: a {self.model_type} config needs `{field}`, which is missing "
                                f"(transformers has no default for it)")
            return default
        return v

    def int(self, field: str, default: Any = _REQUIRED, minimum: int = 1, maximum: int = MAX_DIMENSION) -> int:
        """A whole number from ``minimum`` to ``maximum``: every integer a config gives is a width, a count or a
        layer index, and none of a real model comes near ``MAX_DIMENSION``."""
        v = self.raw(field, default)
        if v is default and default is not _REQUIRED:
            return v
        why = beyond(v, maximum, minimum=minimum)
        if why is not None:
            raise self.fail(field, why)
        return int(v)

    def float(self, field: str, default: Any = _REQUIRED) -> float:
        v = self.raw(field, default)
        if v is default and default is not _REQUIRED:
            return v
        why = beyond(v, math.inf, minimum=-math.inf, whole=False)
        if why is not None:
            raise self.fail(field, why)
        return float(v)

    def bool(self, field: str, default: Any = _REQUIRED) -> bool:
        v = self.raw(field, default)
        if not isinstance(v, bool):
            raise self.fail(field, f"must be true or false, not {json.dumps(v)}")
        return v

    def str(self, field: str, default: Any = _REQUIRED) -> str:
        v = self.raw(field, default)
        if not isinstance(v, str):
            raise self.fail(field, f"must be a string, not {json.dumps(v)}")
        return v

    def int_list(self, field: str, default: Any = _REQUIRED) -> list[int]:
        v = self.raw(field, default)
        if v is default and default is not _REQUIRED:
            return v
        if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            raise self.fail(field, f"must be a list of whole numbers, not {json.dumps(v)[:60]}")
        return v

    def dict(self, field: str) -> dict | None:
        v = self.get(field)
        if v is None:
            return None
        if not isinstance(v, dict):
            raise self.fail(field, f"must be an object, not {json.dumps(v)[:60]}")
        return v


# ---- the rotation ------------------------------------------------------------------------------------------------


def _rope(c: _Config, layer_type: str = "full_attention", default_base: float = 10000.0) -> tuple[float, str, dict]:
    """The rotation base, the scaling scheme the config asks for (``default`` when none) and its parameters.

    transformers ≥ 5 keeps them in ``rope_parameters`` (per layer type for Gemma 3); earlier ones in ``rope_theta``
    and ``rope_scaling``. Both are read."""
    params = c.dict("rope_parameters")
    if params is not None and layer_type in params and isinstance(params[layer_type], dict):
        params = params[layer_type]
    scaling = c.dict("rope_scaling") or {}
    if params is not None:
        base = params.get("rope_theta", c.get("rope_theta") or default_base)
        kind = params.get("rope_type") or params.get("type") or "default"
        scaling = {**scaling, **params} if kind != "default" else scaling
    else:
        base = c.get("rope_theta") or default_base
        kind = scaling.get("rope_type") or scaling.get("type") or "default"
    if beyond(base, math.inf, minimum=0, whole=False) or base == 0:
        raise c.fail("rope_theta", f"must be a positive number, not {json.dumps(base)[:40]}")
    if kind in ("default", "mrope", None):  # Qwen2-VL's `mrope` is the default rotation on each of its sections
        return float(base), "default", {}
    if not isinstance(kind, str):
        raise c.fail("rope_scaling", f"names its scheme with a string `rope_type`, not {json.dumps(kind)[:40]}")
    return float(base), kind, scaling


def _yarn_mscale(scale: float, mscale: float = 1.0) -> float:
    """transformers' ``get_mscale``: YaRN's magnitude correction for a context ``scale`` times the original."""
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def _rotation(c: _Config, dims: int, layer_type: str = "full_attention", default_base: float = 10000.0, *,
              skip: int = 0, interleaved: bool = False) -> tuple[Rotation, dict]:
    """The rotation of a head rotating ``dims`` dims, with its frequency scaling and attention factor read as
    transformers' ``modeling_rope_utils`` reads them (``_compute_linear_scaling_rope_parameters``,
    ``_compute_llama3_parameters``, ``_compute_yarn_parameters``, ``_compute_longrope_parameters``); and the raw
    scaling parameters. A scheme the language cannot express (``dynamic``: it depends on the sequence's length; any
    other) is refused, naming the field and the scheme."""
    base, kind, params = _rope(c, layer_type, default_base)
    if kind == "default":
        return Rotation(dims, base, skip=skip, interleaved=interleaved), params
    field = "rope_parameters" if c.has("rope_parameters") else "rope_scaling"

    def number(key: str, default: Any = _REQUIRED, positive: bool = True) -> float:
        v = params.get(key)
        if v is None:
            if default is _REQUIRED:
                raise c.fail(field, f"of type {json.dumps(kind)} needs `{key}`")
            return default
        if beyond(v, math.inf, minimum=-math.inf, whole=False) or (positive and v <= 0):
            raise c.fail(f"{field}.{key}", f"must be a positive number, not {json.dumps(v)[:40]}")
        return float(v)

    if kind == "linear":
        scaling = Scaling("linear", number("factor"))
        return Rotation(dims, base, scaling, skip=skip, interleaved=interleaved), params
    if kind == "llama3":
        low, high = number("low_freq_factor"), number("high_freq_factor")
        if high < low:
            raise c.fail(f"{field}.high_freq_factor", f"is {high:g}, below `low_freq_factor` ({low:g})")
        scaling = Scaling("llama3", number("factor"), number("original_max_position_embeddings"), low, high)
        return Rotation(dims, base, scaling, skip=skip, interleaved=interleaved), params
    if kind == "yarn":
        factor = number("factor")
        context = number("original_max_position_embeddings", None) or float(c.int("max_position_embeddings"))
        truncate = params.get("truncate", True)
        if not isinstance(truncate, bool):
            raise c.fail(f"{field}.truncate", f"must be true or false, not {json.dumps(truncate)}")
        attention = number("attention_factor", None)
        if attention is None:
            mscale, mall = number("mscale", None), number("mscale_all_dim", None)
            attention = _yarn_mscale(factor, mscale) / _yarn_mscale(factor, mall) if mscale and mall else _yarn_mscale(factor)
        scaling = Scaling("yarn", factor, context, fast=number("beta_fast", 32.0), slow=number("beta_slow", 1.0),
                          unrounded=not truncate)
        return Rotation(dims, base, scaling, skip=skip, interleaved=interleaved, attention=attention), params
    if kind in ("longrope", "su"):
        return _longrope(c, dims, base, params, field, skip=skip, interleaved=interleaved), params
    # ★ Refused, never written with plain frequencies: `dynamic` (NTK) changes θ with the sequence's length past the
    # original context, which no table of the language holds; any other scheme computes what we cannot say.
    why = ("its frequencies change with the sequence's length, which the language's tables do not express"
           if kind == "dynamic" else "a scheme the language does not model (linear, llama3, yarn and longrope are)")
    key = "rope_type" if "rope_type" in params else "type"
    raise c.fail(f"{field}.{key}", f"is {json.dumps(kind)[:40]}: {why}")


def _longrope(c: _Config, dims: int, base: float, params: dict, field: str, *, skip: int = 0,
              interleaved: bool = False) -> Rotation:
    """LongRoPE as ``_compute_longrope_parameters`` reads it: one short and one long factor per rotated pair; the
    pretraining length ``original_max_position_embeddings`` (the config's own field first, as ``standardize_rope_
    params`` gives it priority — Phi-3's — else the scaling's, else ``max_position_embeddings``); the attention factor
    as given, else ``√(1 + ln F / ln N)`` with ``F`` the scaling's ``factor``, else the extension ``max_position_
    embeddings / N``, 1 when ``F ≤ 1``. Which factors a table takes is its context's to say (LANGUAGE §4)."""
    lists = []
    for key in ("short_factor", "long_factor"):
        v = params.get(key)
        if not isinstance(v, list) or not v or any(beyond(x, math.inf, minimum=0, whole=False) or x <= 0 for x in v):
            raise c.fail(f"{field}.{key}", f"must be a list of positive numbers, not {json.dumps(v)[:60]}")
        if len(v) != dims // 2:
            raise c.fail(f"{field}.{key}", f"lists {len(v)} factors, but the rotation turns {dims // 2} pairs")
        lists.append(tuple(float(x) for x in v))
    context = c.get("original_max_position_embeddings") or params.get("original_max_position_embeddings") \
        or c.get("max_position_embeddings")
    if beyond(context, math.inf, minimum=1) is not None:
        raise c.fail("original_max_position_embeddings", f"must be a whole number of positions, not {json.dumps(context)}")
    attention = params.get("attention_factor")
    if attention is None:
        factor = params.get("factor")
        if factor is None:
            factor = c.int("max_position_embeddings") / context
        attention = 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(context))
    scaling = Scaling("longrope", 1.0, float(context), short=lists[0], long=lists[1])
    return Rotation(dims, base, scaling, skip=skip, interleaved=interleaved, attention=float(attention))


def _scaling_note(rot: Rotation | None) -> list[str]:
    """What the document says of a rotation scaling the language does not model (its tables are then unscaled)."""
    if rot is None or rot.unmodelled is None:
        return []
    return [f"{rot.unmodelled} is not modelled: the rotation tables are plain base-{rot.base:g} frequencies."]


def _mrope_note(c: _Config) -> list[str]:
    """What the document says of a multimodal rotation: for text its sections' positions agree, so it is this one."""
    if c.has("mrope_section") or any("mrope_section" in (c.dict(f) or {}) for f in ("rope_parameters", "rope_scaling")):
        return ["Multimodal rotation (mrope) reduces to this rotation for text, where its three positions agree."]
    return []


def _partial(c: _Config, head_dim: int) -> int:
    params = c.dict("rope_parameters") or {}
    f = params.get("partial_rotary_factor", c.get("partial_rotary_factor") or 1.0)
    if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 < f <= 1:
        raise c.fail("partial_rotary_factor", f"must be a number in (0, 1], not {json.dumps(f)}")
    dims = int(head_dim * f)
    if dims % 2 and f == 1:
        raise c.fail("head_dim", f"is {head_dim}: a head rotates its dims in pairs, so it is even")
    if dims % 2:
        raise c.fail("partial_rotary_factor", f"rotates {dims} dims of a head of {head_dim}: an odd number")
    return dims


# ---- heads, windows, activations ----------------------------------------------------------------------------


def _heads(c: _Config, d: int) -> tuple[int, int, int]:
    heads = c.int("num_attention_heads")
    kv = c.int("num_key_value_heads", heads)
    if c.get("num_key_value_heads") is None:  # the classes take the query heads' count
        c.defaulted.setdefault("num_key_value_heads", (kv, True))
    if heads % kv:
        raise c.fail("num_key_value_heads", f"is {kv}, which does not divide `num_attention_heads` ({heads})")
    if c.has("head_dim"):
        return heads, kv, c.int("head_dim")
    if d % heads:
        raise c.fail("head_dim", f"is missing and `hidden_size` ({d}) is not a multiple of `num_attention_heads` ({heads})")
    return heads, kv, d // heads


def _kind_of_layer(c: _Config, i: int, t: str, allowed: tuple[str, ...], model: str) -> str:
    if t not in allowed:
        raise c.fail(f"layer_types[{i}]", f"is {json.dumps(t)}; a {model} layer is {' or '.join(allowed)}")
    return t


def _window(c: _Config) -> int:
    return c.int("sliding_window")


def _activation(c: _Config, field: str, default: str) -> str:
    act = c.str(field, default)
    if act in ("silu", "swish"):
        return "silu"
    if act in ("gelu_pytorch_tanh", "gelu_new", "gelu_fast"):
        return "gelu"
    raise c.fail(field, f"is {json.dumps(act)}; the language has silu and gelu (tanh approximation)")


def _no(c: _Config, field: str, why: str) -> None:
    """A flag the language cannot express when set: refuse rather than write a different model."""
    if c.get(field) not in (None, False):
        raise c.fail(field, f"is {json.dumps(c.get(field))}: {why}, which the language does not express")
