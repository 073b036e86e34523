"""The server's settings, from ``initializationOptions`` and ``workspace/didChangeConfiguration``, both under the key
``streamed``: ``{"target", "deployment": {"mode", "ctx", "chunk", "batch", "tp"}, "checkpoint", "debounceMs"}``.

A bad value is named in a message and the previous value kept: a typo in a settings file never stops the server."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from streamed.spatial.deployment import MODES, SIZE_LIMITS, size_problem


@dataclass(frozen=True)
class Settings:
    target: str = "sn50"
    deployment: dict = field(default_factory=lambda: {"mode": "decode", "ctx": 4096, "chunk": 512, "batch": 8, "tp": 2})
    checkpoint: str | None = None
    debounce_ms: int = 150

    def merged(self, raw) -> tuple["Settings", list[str]]:
        """These settings updated from a client's value; the problems found, each a sentence."""
        problems: list[str] = []
        if not isinstance(raw, dict):
            return self, ([] if raw is None else [f"settings must be an object, not {type(raw).__name__}"])
        raw = raw.get("streamed", raw) if isinstance(raw.get("streamed", raw), dict) else raw
        out = self
        if "target" in raw:
            t = raw["target"]
            if isinstance(t, str) and t.strip():
                out = replace(out, target=t.strip())
            else:
                problems.append(f"`streamed.target` must be \"sn50\", \"sn40l\" or a path to a target file, not {t!r}")
        if "checkpoint" in raw:
            c = raw["checkpoint"]
            if c is None or (isinstance(c, str)):
                out = replace(out, checkpoint=c or None)
            else:
                problems.append(f"`streamed.checkpoint` must be a path or null, not {c!r}")
        for key in ("debounceMs", "debounce_ms"):
            if key in raw:
                v = raw[key]
                if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 10_000:
                    out = replace(out, debounce_ms=int(v))
                else:
                    problems.append(f"`streamed.debounceMs` must be a number of milliseconds from 0 to 10000, not {v!r}")
        if "deployment" in raw:
            d = raw["deployment"]
            if not isinstance(d, dict):
                problems.append(f"`streamed.deployment` must be an object like {{\"mode\": \"decode\", \"ctx\": 4096}}, not {d!r}")
            else:
                dep = dict(out.deployment)
                for k, v in d.items():
                    if k == "mode":
                        if v in MODES:
                            dep[k] = v
                        else:
                            problems.append(f"`streamed.deployment.mode` must be one of {', '.join(MODES)}, not {v!r}")
                    elif k in SIZE_LIMITS:
                        why = size_problem(k, v)
                        if why is None:
                            dep[k] = int(v)
                        else:
                            problems.append(f"`streamed.deployment.{k}` {why}")
                    else:
                        problems.append(f"`streamed.deployment.{k}` is not a setting (mode, ctx, chunk, batch, tp)")
                out = replace(out, deployment=dep)
        return out, problems
