"""``dpkit account``: what a composition of mechanisms costs, or the noise a target needs.

dpkit account --delta 1e-5 'subsampled_gaussian(noise_multiplier=1.0,sampling_rate=0.01)*1000'
dpkit account 'laplace(epsilon=0.1)*10'                     # pure DP: no --delta (δ = 0)
dpkit account --delta 1e-5 --calibrate 8 'subsampled_gaussian(sampling_rate=0.01)*10000'
dpkit account --delta 1e-6 --calibrate 1 'laplace*100'      # the largest per-query ε
dpkit account --delta 1e-5 --calibrate 8 --epochs 3 --batch-size 256 --dataset-size 60000 gaussian
"""

from __future__ import annotations

import argparse
import json
import math
import re
import time
from typing import Any

from dpkit.accounting import METHODS, Bound, account, calibrate, compose_basic
from dpkit.accounting._parse import EVENT_KINDS, EventSyntaxError, open_parameter, parse_event
from dpkit.accounting.training import BATCHINGS, Schedule
from dpkit.commands._output import rounded, table
from dpkit.commands._progress import lasting
from dpkit.errors import InvalidParameter
from dpkit.privacy import GaussianDP, PrivacyEvent, SubsampledDP, flatten

_CHOICES = [*METHODS, "best"]


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "account",
        help="compose privacy costs (basic, advanced, zCDP, GDP, RDP, PLD) or calibrate noise",
        description=(
            "Report the (ε, δ) of running EVENTs in adaptive composition. An EVENT is "
            "NAME(key=value,...)*COUNT with NAME one of " + ", ".join(EVENT_KINDS) + "; any "
            "event takes sampling_rate=q (and scheme=poisson|without_replacement) for "
            "subsampling. Without --delta (or with --delta 0) the question is pure DP."
        ),
    )
    parser.add_argument(
        "events", nargs="+", metavar="EVENT", help="e.g. 'gaussian(noise_multiplier=1.0)*100'"
    )
    parser.add_argument(
        "--method", choices=_CHOICES, default="best", help="composition method (default: best)"
    )
    parser.add_argument(
        "--delta", type=float, default=None, help="the δ at which to report ε (default: 0)"
    )
    parser.add_argument(
        "--calibrate",
        "--target-epsilon",
        dest="calibrate",
        type=float,
        default=None,
        metavar="E",
        help="instead, find the parameter that one EVENT leaves out (a Gaussian's "
        "noise_multiplier: the smallest; a pure event's epsilon: the largest) so that the "
        "composition is (E, δ)-DP",
    )
    training = parser.add_argument_group(
        "noisy SGD",
        "give one 'gaussian' EVENT (no count, no sampling_rate) and the training schedule; "
        "the steps and the sampling rate are computed and shown",
    )
    training.add_argument("--epochs", type=int, default=None, metavar="E")
    training.add_argument("--batch-size", type=int, default=None, metavar="B")
    training.add_argument("--dataset-size", type=int, default=None, metavar="N")
    training.add_argument(
        "--batching",
        choices=BATCHINGS,
        default="poisson",
        help="poisson: each record kept with probability B/N per step (add/remove "
        "neighbours); shuffle: fixed-size batches of a shuffle, no amplification credited "
        "(replace-one neighbours). An epoch is ceil(N/B) steps. Default: poisson",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON object")
    parser.set_defaults(handler=run)


def _describe(event: PrivacyEvent) -> str:
    if isinstance(event, SubsampledDP):
        how = "" if event.scheme == "poisson" else f" {event.scheme.replace('_', ' ')}"
        return f"{_describe(event.event)} subsampled{how} at q={event.sampling_rate:g}"
    if isinstance(event, GaussianDP):
        return f"gaussian σ={event.noise_multiplier:g}"
    fields = ", ".join(f"{k}={v:g}" for k, v in _fields(event).items())
    return f"{event.name}({fields})"


def _fields(event: PrivacyEvent) -> dict[str, Any]:
    import attrs

    return {f.name: getattr(event, f.name) for f in attrs.fields(type(event))}  # type: ignore[arg-type]


def _parts(event: PrivacyEvent) -> list[PrivacyEvent]:
    return [p.event if isinstance(p, SubsampledDP) else p for p in flatten(event)]


def _json_number(value: float) -> float | str:
    return value if math.isfinite(value) else str(value)


def _delta(args: argparse.Namespace) -> float:
    """--delta: 0 when omitted (a pure-DP question); otherwise a number in [0, 1)."""
    delta = 0.0 if args.delta is None else args.delta
    if not 0 <= delta < 1:
        raise InvalidParameter("--delta", delta, "a number in [0, 1)", owner="dpkit account")
    if delta == 0 and args.method not in ("best", "basic"):
        raise InvalidParameter(
            "--delta",
            delta,
            f"> 0 for --method {args.method} (a pure-DP question is answered by Σε)",
            owner="dpkit account",
        )
    return delta


def _schedule(args: argparse.Namespace) -> Schedule | None:
    """The training schedule of --epochs, --batch-size and --dataset-size (all or none), and
    its one EVENT: 'gaussian', without a count or a sampling rate."""
    given = [args.epochs, args.batch_size, args.dataset_size]
    if all(value is None for value in given):
        return None
    if any(value is None for value in given):
        raise InvalidParameter(
            "--epochs",
            args.epochs,
            "given with --batch-size and --dataset-size (all three, or none)",
            owner="dpkit account",
        )
    text = " ".join(args.events)
    match = re.fullmatch(r"\s*gaussian\s*(\(\s*noise_multiplier\s*=[^()]*\))?\s*", text)
    if len(args.events) != 1 or match is None:
        raise EventSyntaxError(
            text,
            "with --epochs, give one 'gaussian' event without a count or sampling_rate, e.g. "
            "'gaussian(noise_multiplier=1.1)' (or 'gaussian' with --calibrate)",
        )
    try:
        return Schedule(args.epochs, args.batch_size, args.dataset_size, args.batching)
    except InvalidParameter as error:  # name the command-line option
        option = "--" + str(error.parameter).replace("_", "-")
        raise InvalidParameter(
            option, error.value, str(error.allowed), owner="dpkit account"
        ) from None


def run(args: argparse.Namespace) -> int:
    delta = _delta(args)
    schedule = _schedule(args)
    if args.calibrate is not None:
        return _calibrate(args, delta, schedule)
    started = time.perf_counter()
    label = delta if delta > 0 else 0.5  # a Gaussian's own δ only labels the event
    events = [parse_event(text, delta=label) for text in args.events]
    if schedule is not None:
        event = events[0][0]
        assert isinstance(event, GaussianDP)
        events = [schedule.events(event.noise_multiplier, label)]
    gaussian = any(isinstance(p, GaussianDP) for e, _ in events for p in _parts(e))
    if delta == 0 and (gaussian or (args.method != "basic" and any(e.delta for e, _ in events))):
        raise InvalidParameter(
            "--delta",
            args.delta,
            "a number in (0, 1) for a Gaussian or (ε, δ) event: its ε depends on δ",
            owner="dpkit account",
        )
    if delta == 0 and args.method == "basic":
        bound: Bound = compose_basic(events)  # Σε and Σδ of the events' own (ε, δ), exactly
    else:
        with lasting("composing"):
            bound = account(events, delta=delta, method="best" if delta == 0 else args.method)
    elapsed = time.perf_counter() - started
    if args.json:
        payload = bound.as_dict()
        payload["epsilon"] = _json_number(bound.epsilon)
        payload["requested_method"] = args.method
        payload["events"] = [{"event": _describe(e), "count": c} for e, c in events]
        if schedule is not None:
            payload["schedule"] = _schedule_record(schedule)
        payload["seconds"] = round(elapsed, 6)
        print(json.dumps(payload, indent=2, default=_json_number))
        return 0
    if schedule is not None:
        print(schedule.describe())
    print(f"ε = {rounded(bound.epsilon)} at δ = {rounded(bound.delta)}  (method: {bound.method})")
    if bound.exact_epsilon is not None and bound.exact_epsilon.denominator < 10**12:
        print(f"exact: ε = {bound.exact_epsilon}, δ = {bound.exact_delta}")
    if len(bound.candidates) > 1:
        rows = [
            [name, rounded(value) if isinstance(value, float) else value.split(":")[0]]
            for name, value in bound.candidates.items()
        ]
        print()
        print(table(rows, ["METHOD", "EPSILON"]))
    return 0


def _schedule_record(schedule: Schedule) -> dict[str, Any]:
    return {
        "epochs": schedule.epochs,
        "batch_size": schedule.batch_size,
        "dataset_size": schedule.dataset_size,
        "batching": schedule.batching,
        "sampling_rate": float(schedule.sampling_rate),
        "sampling_rate_exact": str(schedule.sampling_rate),
        "steps": schedule.steps,
        "neighbours": schedule.neighbours,
        "accounting": schedule.describe(),
    }


def _calibrate_schedule(args: argparse.Namespace, delta: float, schedule: Schedule) -> int:
    if " ".join(args.events).strip() != "gaussian":
        raise EventSyntaxError(
            " ".join(args.events), "--calibrate with --epochs finds the noise of 'gaussian'"
        )
    found = calibrate(
        "gaussian",
        epsilon=args.calibrate,
        delta=delta,
        method="best" if delta == 0 else args.method,
        epochs=schedule.epochs,
        batch_size=schedule.batch_size,
        dataset_size=schedule.dataset_size,
        batching=schedule.batching,
    )
    if args.json:
        payload = found.as_dict()
        payload["event"] = "gaussian"
        print(json.dumps(payload, indent=2, default=_json_number))
        return 0
    print(schedule.describe())
    print(
        f"noise multiplier σ = {rounded(found.value, up=True)} gives ε = "
        f"{rounded(found.epsilon)} at δ = {rounded(delta)} (method: {found.method}, "
        f"{found.evaluations} evaluation{'s' if found.evaluations != 1 else ''})"
    )
    return 0


def _calibrate(args: argparse.Namespace, delta: float, schedule: Schedule | None = None) -> int:
    if schedule is not None:
        return _calibrate_schedule(args, delta, schedule)
    opened = [(text, open_parameter(text)) for text in args.events]
    open_events = [(text, key) for text, key in opened if key is not None]
    if len(open_events) != 1:
        raise EventSyntaxError(
            " ".join(args.events),
            "--calibrate needs exactly one event written without the parameter to find, e.g. "
            "'gaussian*100', 'subsampled_gaussian(sampling_rate=0.01)*1000' or 'laplace*10'",
        )
    (text, key), label = open_events[0], delta if delta > 0 else 0.5
    others = [parse_event(t, delta=label) for t, k in opened if k is None]
    template, count = parse_event(text, delta=label, fill={key: 1.0})
    rate = template.sampling_rate if isinstance(template, SubsampledDP) else None
    scheme = template.scheme if isinstance(template, SubsampledDP) else "poisson"

    def make(value: float) -> PrivacyEvent:
        event, _ = parse_event(text, delta=label, fill={key: value})
        return event.event if isinstance(event, SubsampledDP) else event

    with lasting(f"calibrating {key}"):
        found = calibrate(
            make,
            epsilon=args.calibrate,
            delta=delta,
            count=count,
            sampling_rate=rate,
            scheme=scheme,
            others=others,
            method="best" if delta == 0 else args.method,
            parameter=key,
        )
    if args.json:
        payload = found.as_dict()
        payload["event"] = text
        print(json.dumps(payload, indent=2, default=_json_number))
        return 0
    # a noise multiplier is a lower limit (rounded up), a per-query ε an upper one (down)
    noise = key == "noise_multiplier"
    what = "noise multiplier σ" if noise else "per-query ε"
    print(
        f"{what} = {rounded(found.value, up=noise)} gives ε = {rounded(found.epsilon)} at "
        f"δ = {rounded(delta)} "
        f"(method: {found.method}, {found.evaluations} "
        f"evaluation{'s' if found.evaluations != 1 else ''})"
    )
    return 0
