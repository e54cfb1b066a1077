"""What one direction of an emulated link does, as `labkit testbed up` takes it, and as the emulator gets it.

The flags and the topology file's keys share netem's meanings (tc-netem(8)), and each
applies to one direction (``--loss 5%`` drops 5 % of what a sends to b, and 5 % of what b
sends to a)::

    --one-way-delay 40ms
    --jitter "5ms [25%]"                 σ (or, uniform, the half-width) [and correlation]
    --jitter-distribution normal         uniform | normal | pareto | paretonormal | FILE
    --loss "0.1% [25%]"                  random: probability [correlation]
    --loss-model gemodel --loss "1% 25% 100% 0%"   Gilbert-Elliott: p [r [1-h [1-k]]]
    --duplicate "1% [25%]"
    --reorder "25% [50%] [gap 5]"        sent at once, ahead of the rest (needs a delay)
    --rate 100mbit | none
    --queue bdp | 2bdp | 1000 | 1000p | 1.5mb     waiting for the rate: bandwidth-delay
                                                  products, packets or bytes
    --aqm droptail | codel [target 5ms interval 100ms]
    --delay-trace FILE [--delay-trace-step 10ms]  one-way delay over time (see traces.py)
    --rate-trace FILE                    Mahimahi's format: one delivery per line (ms)

:class:`LinkSpec` keeps what the user wrote (so ``status`` shows it back);
:func:`emulator_params` turns one direction into the numbers ``labkit-go link`` reads
(go/internal/link/params.go), checking every value on the way: a bad one is a
:class:`LabkitError` naming the option.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path

from labkit.errors import LabkitError
from labkit.testbed.traces import rate_trace_bps, read_delay_trace, read_jitter_table, read_rate_trace
from labkit.units import parse_duration, parse_duration_with_unit, parse_rate, parse_size

DISTRIBUTIONS = ("uniform", "normal", "pareto", "paretonormal")
LOSS_MODELS = ("random", "gemodel")
AQMS = ("droptail", "codel")
#: Below this a queue could not hold one burst of the sender's segmentation offload.
MIN_QUEUE_PACKETS = 16
#: The longest one-way delay, and the longest jitter, a link takes: beyond it every packet waits so long that
#: nothing above the link (ping, TCP) measures anything.
MAX_DELAY_S = 10


@dataclass(frozen=True)
class LinkSpec:
    """One direction of a link, as given on the command line or in a topology file."""

    one_way_delay_s: float = 0.100
    rate_bps: float | None = 100e6
    jitter: str = "0ms"
    jitter_distribution: str = "uniform"
    loss: str = "0%"
    loss_model: str = "random"
    duplicate: str = "0%"
    reorder: str = "0%"
    queue: str = "bdp"
    aqm: str = "droptail"
    delay_trace: str | None = None
    delay_trace_step: str | None = None
    rate_trace: str | None = None
    partition: bool = False  # set by a schedule: every packet entering the link is lost

    def spec(self) -> "LinkSpec":
        """Just the link-model fields (a subclass adds testbed-wide settings)."""
        return LinkSpec(**{f.name: getattr(self, f.name) for f in dataclasses.fields(LinkSpec)})

    def describe(self) -> str:
        rate = f"{self.rate_bps / 1e6:g} Mbit/s" if self.rate_bps else "no rate limit"
        parts = [f"{self.one_way_delay_s * 1e3:g} ms one way", rate]
        if self.rate_bps or self.rate_trace:
            parts.append(f"queue {self.queue}{'' if self.aqm == 'droptail' else ' ' + self.aqm}")
        for name, value, idle in (("jitter", self.jitter, "0ms"), ("loss", self.loss, "0%"),
                                  ("duplicate", self.duplicate, "0%"), ("reorder", self.reorder, "0%")):
            if _nonzero(value, idle):
                extra = ""
                if name == "jitter" and self.jitter_distribution != "uniform":
                    extra = f" {self.jitter_distribution}"
                if name == "loss" and self.loss_model != "random":
                    extra = f" ({self.loss_model})"
                parts.append(f"{name} {value}{extra}")
        if self.delay_trace:
            parts.append(f"delay trace {Path(self.delay_trace).name}")
        if self.rate_trace:
            parts.append(f"rate trace {Path(self.rate_trace).name}")
        if self.partition:
            parts.append("partitioned")
        return ", ".join(parts)


def _nonzero(value: str, idle: str) -> bool:
    return str(value).strip() not in {idle, "0", "0%", "0ms", "0s", ""}


#: Topology-file (and schedule) keys -> LinkSpec fields, and how each value is read.
KEYS = {
    "one_way_delay": ("one_way_delay_s", parse_duration_with_unit),
    "rate": ("rate_bps", lambda v: parse_rate(v)),
    "jitter": ("jitter", str),
    "jitter_distribution": ("jitter_distribution", str),
    "loss": ("loss", str),
    "loss_model": ("loss_model", str),
    "duplicate": ("duplicate", str),
    "reorder": ("reorder", str),
    "queue": ("queue", str),
    "aqm": ("aqm", str),
    "delay_trace": ("delay_trace", str),
    "delay_trace_step": ("delay_trace_step", str),
    "rate_trace": ("rate_trace", str),
    "partition": ("partition", bool),
}


def overrides(table: dict, where: str, base_dir: Path | None = None) -> dict:
    """LinkSpec fields from a TOML table of link keys (paths relative to ``base_dir``)."""
    fields = {}
    for key, value in table.items():
        if key not in KEYS:
            raise LabkitError(f"{where}: unknown key {key!r} (link keys: {', '.join(KEYS)})")
        field, read = KEYS[key]
        if read is bool and not isinstance(value, bool):
            raise LabkitError(f"{where}: {key} must be true or false")
        try:
            fields[field] = read(value if read is bool else str(value))
        except ValueError as exc:
            raise LabkitError(f"{where}: {key}: {exc}") from None
        if key in ("delay_trace", "rate_trace") or (key == "jitter_distribution" and str(value) not in DISTRIBUTIONS):
            path = Path(str(value)).expanduser()
            fields[field] = str(path if path.is_absolute() or base_dir is None else base_dir / path)
    return fields


# -- netem's value syntax -------------------------------------------------------------------------
_PERCENT_RE = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)%$")


def parse_percent(text: str, what: str) -> float:
    """``5%`` -> 0.05; anything else is an error naming ``what``."""
    match = _PERCENT_RE.match(text.strip())
    if not match:
        raise LabkitError(f"{what}: {text!r} is not a percentage (examples: 5%, 0.1%)")
    value = float(match.group(1)) / 100
    if value > 1:
        raise LabkitError(f"{what}: {text!r} is more than 100%")
    return value


def _correlation(words: list[str], what: str) -> float:
    value = parse_percent(words[0], f"{what} correlation") if words else 0.0
    if value >= 1:
        raise LabkitError(f"{what} correlation must be below 100%")
    return value


def parse_jitter(text: str) -> tuple[float, float]:
    """``5ms [25%]`` -> (seconds, correlation)."""
    words = str(text).split()
    if not 1 <= len(words) <= 2:
        raise LabkitError(f"--jitter: {text!r} is not JITTER [CORRELATION] (example: 5ms 25%)")
    try:
        jitter = parse_duration(words[0], "ms")
    except ValueError as exc:
        raise LabkitError(f"--jitter: {exc}") from None
    if jitter > MAX_DELAY_S:
        raise LabkitError(f"--jitter: {words[0]!r} is more than {MAX_DELAY_S} s, the longest delay a link takes")
    return jitter, _correlation(words[1:], "--jitter")


def parse_chance(text: str, option: str) -> tuple[float, float]:
    """``1% [25%]`` -> (probability, correlation), for --duplicate and random --loss."""
    words = str(text).split()
    if not 1 <= len(words) <= 2:
        raise LabkitError(f"{option}: {text!r} is not PERCENT [CORRELATION] (example: 1% 25%)")
    return parse_percent(words[0], option), _correlation(words[1:], option)


def parse_loss(text: str, model: str) -> dict:
    """The loss of a direction, in the emulator's terms; netem's defaults fill a short gemodel."""
    if model not in LOSS_MODELS:
        raise LabkitError(f"--loss-model must be one of {', '.join(LOSS_MODELS)}, not {model!r}")
    if model == "random":
        p, corr = parse_chance(text, "--loss")
        return {"model": "random", "p": p, "correlation": corr}
    words = str(text).split()
    if not 1 <= len(words) <= 4:
        raise LabkitError(f"--loss with gemodel: {text!r} is not p [r [1-h [1-k]]] (example: 1% 25% 100% 0%)")
    values = [parse_percent(word, "--loss (gemodel)") for word in words]
    p = values[0]
    # tc-netem(8): r = 1 - p, 1-h = 100 % and 1-k = 0 % unless given.
    r, bad, good = (values[1:] + [1 - p, 1.0, 0.0][len(values) - 1:])[:3]
    return {"model": "gemodel", "p": p, "r": r, "bad_loss": bad, "good_loss": good}


def parse_reorder(text: str) -> tuple[float, float, int]:
    """``25% [50%] [gap 5]`` -> (probability, correlation, gap); netem's gap defaults to 1."""
    words = str(text).split()
    gap = 1
    if "gap" in words:
        at = words.index("gap")
        if at + 2 != len(words) or not words[at + 1].isdigit() or int(words[at + 1]) < 1:
            raise LabkitError(f"--reorder: {text!r}: gap needs a whole number ≥ 1 at the end (example: 25% 50% gap 5)")
        gap, words = int(words[at + 1]), words[:at]
    p, corr = parse_chance(" ".join(words), "--reorder")
    return p, corr, gap


def parse_queue(text: str) -> tuple[str, float]:
    """``bdp``/``2bdp`` -> ("bdp", factor); ``1000``/``1000p`` -> ("packets", n); ``1.5mb`` -> ("bytes", n)."""
    value = str(text).strip().lower()
    if match := re.fullmatch(r"(\d+(?:\.\d*)?)?\s*bdp", value):
        factor = float(match.group(1) or 1)
        if factor <= 0:
            raise LabkitError("--queue: a bandwidth-delay product factor must be positive")
        return "bdp", factor
    if match := re.fullmatch(r"(\d+)\s*p?", value):
        return "packets", float(match.group(1))
    if match := re.fullmatch(r"(\d+(?:\.\d+)?)\s*(kb|mb|gb|kib|mib|b)", value):
        scale = {"b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "kib": 1024, "mib": 2**20}[match.group(2)]
        return "bytes", float(match.group(1)) * scale
    raise LabkitError(f"--queue: {text!r} is not a queue limit (examples: bdp, 2bdp, 1000 packets as 1000, 1.5mb)")


def parse_aqm(text: str) -> dict:
    """``droptail`` or ``codel [target 5ms] [interval 100ms]``."""
    words = str(text).split()
    if not words or words[0] not in AQMS:
        raise LabkitError(f"--aqm must be droptail or codel [target T] [interval I], not {text!r}")
    result = {"aqm": words[0]}
    rest = words[1:]
    if words[0] == "droptail" and rest:
        raise LabkitError("--aqm droptail takes no settings")
    if len(rest) % 2:
        raise LabkitError(f"--aqm: {text!r}: each setting needs a value (example: codel target 5ms interval 100ms)")
    for key, value in zip(rest[::2], rest[1::2]):
        if key not in ("target", "interval"):
            raise LabkitError(f"--aqm: CoDel has target and interval, not {key!r}")
        try:
            result[f"codel_{key}_ns"] = int(parse_duration(value) * 1e9)
        except ValueError as exc:
            raise LabkitError(f"--aqm: {exc}") from None
    return result


# -- what the emulator reads ----------------------------------------------------------------------
def queue_limit(spec: LinkSpec, reverse: LinkSpec, mtu: int, rate_bps: float | None) -> dict:
    """The queue in packets or bytes; ``bdp`` is the rate times this link's RTT (both base delays)."""
    kind, amount = parse_queue(spec.queue)
    if kind == "packets":
        if amount < 1:
            raise LabkitError("--queue: a queue of packets must hold at least one")
        return {"queue_packets": int(amount), "queue_bytes": 0}
    if kind == "bytes":
        return {"queue_packets": 0, "queue_bytes": max(int(amount), mtu)}
    if not rate_bps:
        return {"queue_packets": 0, "queue_bytes": 0}  # no rate, nothing waits
    rtt = spec.one_way_delay_s + reverse.one_way_delay_s
    return {"queue_packets": 0, "queue_bytes": max(int(amount * rate_bps * rtt / 8), MIN_QUEUE_PACKETS * mtu)}


def _jitter_params(spec: LinkSpec) -> dict:
    jitter, corr = parse_jitter(spec.jitter)
    dist = spec.jitter_distribution
    params = {"jitter_ns": round(jitter * 1e9), "jitter_correlation": corr, "jitter_distribution": dist,
              "jitter_table": None}
    if dist not in DISTRIBUTIONS:
        if not Path(dist).exists():  # a file that is not a regular one is refused by its reader, by name
            raise LabkitError(f"--jitter-distribution must be one of {', '.join(DISTRIBUTIONS)} or a file, "
                              f"not {dist!r}")
        params.update(jitter_distribution="table", jitter_table=read_jitter_table(dist))
    return params


def emulator_params(spec: LinkSpec, reverse: LinkSpec, mtu: int) -> dict:
    """One direction as go/internal/link.Params, every value checked (``reverse``: the other direction, for bdp)."""
    if not 0 <= spec.one_way_delay_s <= MAX_DELAY_S:
        raise LabkitError(f"one-way delay must be between 0 and {MAX_DELAY_S} s, not {spec.one_way_delay_s:g} s")
    if spec.rate_bps is not None and not spec.rate_bps > 0:
        raise LabkitError(f"rate must be more than 0, not {spec.rate_bps:g} bit/s; give 'none' for no rate limit")
    dup, dup_corr = parse_chance(spec.duplicate, "--duplicate")
    reorder, reorder_corr, gap = parse_reorder(spec.reorder)
    if reorder and not (spec.one_way_delay_s or spec.delay_trace):
        raise LabkitError("--reorder needs a delay: a reordered packet is one sent ahead of the delayed ones")
    rate_trace = read_rate_trace(spec.rate_trace) if spec.rate_trace else None
    effective_rate = rate_trace_bps(rate_trace) if rate_trace else spec.rate_bps
    params = {
        "delay_ns": round(spec.one_way_delay_s * 1e9),
        **_jitter_params(spec),
        "loss": parse_loss(spec.loss, spec.loss_model),
        "duplicate": dup, "duplicate_correlation": dup_corr,
        "reorder": reorder, "reorder_correlation": reorder_corr, "reorder_gap": gap,
        "rate_bps": 0 if rate_trace else (spec.rate_bps or 0),
        **queue_limit(spec, reverse, mtu, effective_rate),
        "aqm": "droptail", "codel_target_ns": 0, "codel_interval_ns": 0,
        **parse_aqm(spec.aqm),
        "delay_trace": read_delay_trace(spec.delay_trace, spec.delay_trace_step) if spec.delay_trace else None,
        "rate_trace": rate_trace,
        "partition": bool(spec.partition),
        "mtu": mtu,
    }
    if spec.delay_trace_step and not spec.delay_trace:
        raise LabkitError("--delay-trace-step goes with --delay-trace")
    if params["delay_trace"] and max(params["delay_trace"]["delay_ns"]) > MAX_DELAY_S * 1e9:
        longest = max(params["delay_trace"]["delay_ns"]) / 1e9
        raise LabkitError(f"--delay-trace {spec.delay_trace}: a delay of {longest:g} s, more than {MAX_DELAY_S} s, "
                          f"the longest delay a link takes")
    return params
