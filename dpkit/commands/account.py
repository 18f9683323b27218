"""``dpkit account``: what a composition of mechanisms costs, or the noise a target needs.

dpkit account --delta 1e-5 'subsampled_gaussian(noise_multiplier=1.0,sampling_rate=0.01)*1000'
dpkit account --method basic 'laplace(epsilon=0.1)*10'
dpkit account --delta 1e-5 --target-epsilon 1 'gaussian*100'
"""

from __future__ import annotations

import argparse
import json
import math
import time
from typing import Any

from dpkit.accounting import METHODS, Bound, account, compose_basic, gaussian_noise_multiplier
from dpkit.accounting._parse import (
    EVENT_KINDS,
    EventSyntaxError,
    needs_noise_multiplier,
    parse_event,
)
from dpkit.commands._output import table
from dpkit.errors import InvalidParameter
from dpkit.privacy import GaussianDP, PrivacyEvent, SubsampledDP

_CHOICES = ["basic", "advanced", "zcdp", "rdp", "pld", "best"]


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "account",
        help="compose privacy costs (basic, advanced, zCDP, RDP, PLD) or calibrate Gaussian noise",
        description=(
            "Report the (ε, δ) of running EVENTs in adaptive composition. An EVENT is "
            "NAME(key=value,...)*COUNT with NAME one of " + ", ".join(EVENT_KINDS) + "; any "
            "event takes sampling_rate=q for Poisson subsampling."
        ),
    )
    parser.add_argument(
        "events", nargs="+", metavar="EVENT", help="e.g. 'gaussian(noise_multiplier=1.0)*100'"
    )
    parser.add_argument(
        "--method", choices=_CHOICES, default="best", help="composition method (default: best)"
    )
    parser.add_argument("--delta", type=float, default=None, help="the δ at which to report ε")
    parser.add_argument(
        "--target-epsilon",
        type=float,
        default=None,
        metavar="E",
        help="instead, find the Gaussian noise multiplier that makes the composition (E, δ)-DP",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON object")
    parser.set_defaults(handler=run)


def _describe(event: PrivacyEvent) -> str:
    if isinstance(event, SubsampledDP):
        return f"{_describe(event.event)} subsampled at q={event.sampling_rate:g}"
    if isinstance(event, GaussianDP):
        return f"gaussian σ={event.noise_multiplier:g}"
    fields = ", ".join(f"{k}={v:g}" for k, v in _fields(event).items())
    return f"{event.name}({fields})"


def _fields(event: PrivacyEvent) -> dict[str, Any]:
    import attrs

    return {f.name: getattr(event, f.name) for f in attrs.fields(type(event))}  # type: ignore[arg-type]


def _is_gaussian(event: PrivacyEvent) -> bool:
    inner = event.event if isinstance(event, SubsampledDP) else event
    return isinstance(inner, GaussianDP)


def _json_number(value: float) -> float | str:
    return value if math.isfinite(value) else str(value)


def run(args: argparse.Namespace) -> int:
    if args.delta is None and (args.method != "basic" or args.target_epsilon is not None):
        raise InvalidParameter(
            "--delta",
            None,
            f"given (a number in (0, 1)) for --method {args.method}",
            owner="dpkit account",
        )
    if args.target_epsilon is not None:
        return _calibrate(args)
    delta = args.delta if args.delta is not None else 0.5
    started = time.perf_counter()
    events = [parse_event(text, delta=delta) for text in args.events]
    if args.delta is None and any(_is_gaussian(e) for e, _ in events):
        raise InvalidParameter(
            "--delta",
            None,
            "given for a Gaussian event (its ε depends on δ)",
            owner="dpkit account",
        )
    bound: Bound = (
        compose_basic(events)
        if args.delta is None
        else account(events, delta=args.delta, method=args.method)
    )
    elapsed = time.perf_counter() - started
    if args.json:
        payload = bound.as_dict()
        payload["epsilon"] = _json_number(bound.epsilon)
        payload["requested_method"] = args.method
        payload["events"] = [{"event": _describe(e), "count": c} for e, c in events]
        payload["seconds"] = round(elapsed, 6)
        print(json.dumps(payload, indent=2, default=_json_number))
        return 0
    print(f"ε = {bound.epsilon:.6g} at δ = {bound.delta:.6g}  (method: {bound.method})")
    if bound.exact_epsilon is not None and bound.exact_epsilon.denominator < 10**12:
        print(f"exact: ε = {bound.exact_epsilon}, δ = {bound.exact_delta}")
    if bound.candidates:
        rows = [
            [name, f"{value:.6g}" if isinstance(value, float) else value.split(":")[0]]
            for name, value in bound.candidates.items()
        ]
        print()
        print(table(rows, ["METHOD", "EPSILON"]))
    return 0


def _calibrate(args: argparse.Namespace) -> int:
    open_events = [text for text in args.events if needs_noise_multiplier(text)]
    if len(open_events) != 1:
        raise EventSyntaxError(
            " ".join(args.events),
            "--target-epsilon needs exactly one Gaussian written without noise_multiplier, "
            "e.g. 'gaussian*100' or 'subsampled_gaussian(sampling_rate=0.01)*1000'",
        )
    others = [parse_event(t, delta=args.delta) for t in args.events if t not in open_events]
    template, steps = parse_event(open_events[0], delta=args.delta, noise_multiplier=1.0)
    rate = template.sampling_rate if isinstance(template, SubsampledDP) else None
    method = args.method if args.method != "best" or rate is None else "best"
    sigma = gaussian_noise_multiplier(
        args.target_epsilon,
        delta=args.delta,
        steps=steps,
        sampling_rate=rate,
        others=others,
        method=method,
    )
    event, _ = parse_event(open_events[0], delta=args.delta, noise_multiplier=sigma)
    achieved = account([*others, (event, steps)], delta=args.delta, method=method)
    if args.json:
        print(
            json.dumps(
                {
                    "noise_multiplier": sigma,
                    "epsilon": achieved.epsilon,
                    "delta": args.delta,
                    "method": achieved.method,
                    "target_epsilon": args.target_epsilon,
                },
                indent=2,
            )
        )
        return 0
    print(
        f"noise multiplier σ = {sigma:.6g} gives ε = {achieved.epsilon:.6g} at δ = {args.delta:g} "
        f"(method: {achieved.method})"
    )
    return 0


assert set(_CHOICES) - {"best"} <= set(METHODS)
