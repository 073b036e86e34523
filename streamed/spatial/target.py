"""Targets as data: a ``SpatialTarget`` is one TOML file per chip, shipped in ``targets/`` or the user's own.

Sizes are decimal (1 MB = 10⁶ bytes, 1 GB = 10⁹), as vendors quote them. Every key is required except
``description``, ``peak_fp8_tflops`` (default twice BF16) and the bandwidths a chip does not publish (a shipped
file marks its assumed figures). A bad file is refused with ``TargetError`` naming the file and the key.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ..lang.files import FileProblem, display, read_file
from ..lang.limits import MAX_CONFIG_BYTES, MAX_TARGET_BYTES, MAX_TARGET_RATE, MAX_UNITS, beyond, show

MB = 10**6
GB = 10**9
TB = 10**12


class TargetError(ValueError):
    """A target that cannot be loaded: which file or name, and why."""


@dataclass(frozen=True)
class SpatialTarget:
    name: str
    pcus: int
    pmus: int
    sram_bytes: int
    hbm_bytes: int
    ddr_bytes: int
    sram_bandwidth: float  # bytes/s
    hbm_bandwidth: float
    ddr_bandwidth: float
    link_bandwidth: float  # chip-to-chip, bytes/s
    peak_bf16: float  # FLOP/s
    peak_fp8: float
    description: str = ""

    @property
    def pmu_bytes(self) -> int:
        """The SRAM of one PMU: what one memory unit holds."""
        return self.sram_bytes // max(self.pmus, 1)

    def capacity(self, tier: str) -> int:
        return {"sram": self.sram_bytes, "hbm": self.hbm_bytes, "ddr": self.ddr_bytes}[tier]

    def bandwidth(self, tier: str) -> float:
        return {"sram": self.sram_bandwidth, "hbm": self.hbm_bandwidth, "ddr": self.ddr_bandwidth}[tier]

    def to_json(self) -> dict:
        return {
            "name": self.name, "pcus": self.pcus, "pmus": self.pmus, "sram_bytes": self.sram_bytes,
            "hbm_bytes": self.hbm_bytes, "ddr_bytes": self.ddr_bytes, "peak_bf16_flops": self.peak_bf16,
            "peak_fp8_flops": self.peak_fp8, "hbm_bandwidth": self.hbm_bandwidth,
        }


#: The limit of each figure of a ``SpatialTarget``, in its own units (units, bytes, bytes/s, FLOP/s).
FIGURE_LIMITS = {"pcus": MAX_UNITS, "pmus": MAX_UNITS, "sram_bytes": MAX_TARGET_BYTES, "hbm_bytes": MAX_TARGET_BYTES,
                 "ddr_bytes": MAX_TARGET_BYTES, "sram_bandwidth": MAX_TARGET_RATE, "hbm_bandwidth": MAX_TARGET_RATE,
                 "ddr_bandwidth": MAX_TARGET_RATE, "link_bandwidth": MAX_TARGET_RATE, "peak_bf16": MAX_TARGET_RATE,
                 "peak_fp8": MAX_TARGET_RATE}


def target_problem(t: SpatialTarget) -> str | None:
    """Why ``t`` (read back from a manifest, say) is no target, or ``None``: each figure positive, finite and within
    its limit, and every PMU holding at least a byte — what ``parse_target`` holds a TOML file to, in its units."""
    for figure, limit in FIGURE_LIMITS.items():
        v = getattr(t, figure)
        why = beyond(v, limit, whole=figure in ("pcus", "pmus", "sram_bytes", "hbm_bytes", "ddr_bytes"), minimum=0)
        if why is None and v == 0:
            why = "is 0; it must be positive"
        if why is not None:
            return f"`{figure}` {why}"
    if t.sram_bytes < t.pmus:
        return f"{t.sram_bytes:,} bytes of SRAM over {t.pmus:,} PMUs leave each less than a byte"
    return None


BUILTIN = ("sn50", "sn40l")
DEFAULT = "sn50"

_SCHEMA = {  # key: (type, required, scale, the limit of the scaled value)
    "name": (str, True, None, None),
    "pcus": (int, True, None, MAX_UNITS),
    "pmus": (int, True, None, MAX_UNITS),
    "sram_mb": ((int, float), True, MB, MAX_TARGET_BYTES),
    "hbm_gb": ((int, float), True, GB, MAX_TARGET_BYTES),
    "ddr_gb": ((int, float), True, GB, MAX_TARGET_BYTES),
    "hbm_tb_s": ((int, float), True, TB, MAX_TARGET_RATE),
    "ddr_tb_s": ((int, float), True, TB, MAX_TARGET_RATE),
    "sram_tb_s": ((int, float), True, TB, MAX_TARGET_RATE),
    "link_gb_s": ((int, float), True, GB, MAX_TARGET_RATE),
    "peak_bf16_tflops": ((int, float), True, TB, MAX_TARGET_RATE),
    "peak_fp8_tflops": ((int, float), False, TB, MAX_TARGET_RATE),
    "description": (str, False, None, None),
}


def parse_target(text: str, where: str) -> SpatialTarget:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise TargetError(f"{where}: not valid TOML ({e})") from None
    except RecursionError:  # tomllib recurses per level of nested arrays and tables
        raise TargetError(f"{where}: not a target: nested too deep for TOML to read") from None
    except ValueError as e:  # an integer of more digits than Python converts
        raise TargetError(f"{where}: not valid TOML ({str(e).split(';')[0]})") from None
    unknown = sorted(set(data) - set(_SCHEMA))
    if unknown:
        raise TargetError(f"{where}: unknown key `{unknown[0]}` (a target has {', '.join(_SCHEMA)})")
    values: dict = {}
    for key, (typ, required, scale, limit) in _SCHEMA.items():
        if key not in data:
            if required:
                raise TargetError(f"{where}: missing `{key}`")
            continue
        v = data[key]
        if typ is str:
            if not isinstance(v, str):
                raise TargetError(f"{where}: `{key}` must be a string, not {v!r}"[:200])
            values[key] = v
            continue
        # Positive, finite (TOML has nan and inf) and within the limit, in the file's own units.
        why = beyond(v, limit / (scale or 1), minimum=0, whole=typ is int)
        if why is None and v == 0:
            why = "is 0; it must be positive"
        if why is not None:
            raise TargetError(f"{where}: `{key}` {why}")
        values[key] = v * scale if scale else v
    if int(values["sram_mb"]) < values["pmus"]:
        raise TargetError(f"{where}: `sram_mb` {show(data['sram_mb'])} over {values['pmus']:,} PMUs leaves each less than a "
                          f"byte; a PMU holds at least one")
    for key in ("hbm_gb", "ddr_gb"):
        if int(values[key]) < 1:
            raise TargetError(f"{where}: `{key}` {show(data[key])} is less than one byte")
    bf16 = float(values["peak_bf16_tflops"])
    return SpatialTarget(
        name=values["name"], pcus=values["pcus"], pmus=values["pmus"], sram_bytes=int(values["sram_mb"]),
        hbm_bytes=int(values["hbm_gb"]), ddr_bytes=int(values["ddr_gb"]), sram_bandwidth=float(values["sram_tb_s"]),
        hbm_bandwidth=float(values["hbm_tb_s"]), ddr_bandwidth=float(values["ddr_tb_s"]),
        link_bandwidth=float(values["link_gb_s"]), peak_bf16=bf16,
        peak_fp8=float(values.get("peak_fp8_tflops", 2 * bf16)), description=values.get("description", ""),
    )


_LOADED: dict[str, SpatialTarget] = {}


def load_target(name_or_path: str | Path | SpatialTarget | None = None) -> SpatialTarget:
    """A shipped target by name (``sn50``, the default; ``sn40l``), or a TOML file by path."""
    if isinstance(name_or_path, SpatialTarget):
        return name_or_path
    key = str(name_or_path or DEFAULT)
    if key in _LOADED:
        return _LOADED[key]
    if key in BUILTIN:
        text = resources.files("streamed.spatial").joinpath("targets", f"{key}.toml").read_text("utf-8")
        target = parse_target(text, f"the shipped target {key}")
    else:
        path = Path(key)
        if not path.suffix == ".toml" and not os.path.lexists(path):
            raise TargetError(f"unknown target `{display(key)}`: use {' or '.join(BUILTIN)}, or a path to a .toml file")
        try:
            raw = read_file(path, MAX_CONFIG_BYTES, "a target file")  # a regular file, its size checked first
        except FileProblem as e:
            raise TargetError(str(e).replace(": no such file", ": no such target file")) from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise TargetError(f"{display(key)}: not UTF-8 text (byte {e.start} is 0x{raw[e.start]:02x})") from None
        target = parse_target(text, display(key))
    _LOADED[key] = target
    return target
