"""The report card, ``DIR/report.md``: what was chosen, from what, and how far to trust it."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from scopeguard.calibration._choose import BudgetRow, OperatingPoint
from scopeguard.data import atomic_write_text
from scopeguard.detection.profile import CalibrationProfile, Rate

__all__ = ["REPORT_FILE", "write_report"]

REPORT_FILE = "report.md"


# what scopeguard's studies measured of a profile from generated questions (docs/research/calibration.md)
_PASSAGE_STUDY = (
    "measured on people's questions of six corpora, a profile from generated questions alone at a "
    "0.10 budget then refused 0-16% of answerable questions with both corrections (0-17% with the shift "
    "learned on the other five; 4-42% without either; SubjQA's 16%, the most, is 12% without 4 refused "
    "questions that were not answerable as asked when read again), but on ELOQ news, whose questions "
    "were themselves generated from its documents, it caught 0.30 less than the best threshold in "
    "hindsight (--generated-shift 0 there: 0.04 refused, 0.03 short); 50 questions labelled by people "
    "kept it at 8-9% and caught up to 0.90."
)
_SET_STUDY = (
    "this detector reads a question once against its passages together, and the shift is the one "
    "learned on such reads: measured on people's questions of three corpora (news, Wikipedia, policy "
    "pages), each read against its retriever's top 3, a profile from generated questions alone at a "
    "0.10 budget refused 0-13% of answerable questions with the shift learned on the other two (up to "
    "19% with none), and caught 28-50% of the out-of-scope ones (5-10% with the passage reads' larger "
    "shift)."
)


def _rate(r: Rate | None) -> str:
    return "n/a" if r is None else str(r)


def _trust(profile: CalibrationProfile, *, generated: bool, joined: int, rephrased: bool = True) -> str:
    fr = profile.false_refusals
    lines = [
        f"The threshold is the split-conformal quantile of the {fr.n} answerable calibration questions' "
        f"scores: a new answerable question like them (exchangeable with them) is refused with "
        f"probability at most {profile.budget:g}. The rates above are counted on these questions; their "
        f"95% intervals come from n alone (false refusals [{fr.low:.2f}, {fr.high:.2f}] with n={fr.n}, "
        f"caught [{profile.caught.low:.2f}, {profile.caught.high:.2f}] with n={profile.caught.n}): more "
        "questions (a larger --sample, or more --labelled questions) narrow them."
    ]
    if generated:
        lines.append(
            "Generated questions are easier than your users' questions: a model wrote them from one "
            "sentence, and kept the ones the reading model already finds answerable, while users' "
            "questions are vaguer and closer to the edge. "
            + (
                "The writer rephrased the in-scope ones in a reader's words and their"
                if rephrased
                else "The in-scope ones were not rephrased here (--no-rephrase), and their"
            )
            + " scores were moved up by a shift learned on other corpora before the threshold was chosen "
            "(scopeguard's studies, docs/research/calibration.md); "
            + (_SET_STUDY if profile.identity.get("read") == "set" else _PASSAGE_STUDY)
            + " Label a sample of real questions and calibrate with --labelled (and --also-generate)."
        )
    if joined:
        lines.append(
            f"{joined} of the documents the questions were written on were joined from short passages of "
            "one source, as a retriever's top passages are shown together to the guard; questions read "
            "against single short passages may score differently."
        )
    lines.append(
        "Recalibrate when the corpus changes (new kinds of documents), and when the detector, its "
        "head, its reading model or its adapter changes: a profile made for another detector is "
        "refused."
    )
    return "\n\n".join(lines)


def write_report(
    folder: str | os.PathLike[str],
    profile: CalibrationProfile,
    rows: Sequence[BudgetRow],
    *,
    plot: str,
    unread: int = 0,
    generated: bool = True,
    joined: int = 0,
    rephrased: bool = True,
    profiles: Mapping[str, OperatingPoint] | None = None,
    chosen: str = "",
) -> Path:
    """Write ``folder/report.md``. ``plot`` is the plot's file name, or the line saying why there
    is none (it then has a space); ``unread``: questions the detector could not read;
    ``profiles``: every profile the data offered, side by side, ``chosen`` the one applied."""
    identity = ", ".join(f"{k}={v}" for k, v in sorted(profile.identity.items()))
    hedge = (
        f"[{profile.hedge_from:.4f}, {profile.threshold:.4f}): answered with a caveat "
        f"(at most {profile.hedge_budget:g} of answerable questions refused or hedged)"
        if profile.hedge_from is not None and profile.hedge_budget is not None
        else "none"
    )
    fr, caught = profile.false_refusals, profile.caught
    table = [
        ("detector", f"`{profile.detector}`"),
        ("identity", f"`{identity}`"),
        ("false-refusal budget", f"{profile.budget:g}"),
        ("threshold", f"{profile.threshold:.4f} (a score at or above it is out of scope)"),
        ("hedge band", hedge),
        ("expected false refusals", f"{_rate(fr)} answerable questions refused"),
        ("expected caught", f"{_rate(caught)} out-of-scope questions refused"),
        ("hedged", f"{_rate(profile.hedged)} answerable questions answered with a caveat"),
        (
            "questions",
            f"{fr.n} in scope, {caught.n} out of scope"
            + (f"; {unread} could not be read and are left out" if unread else ""),
        ),
        ("made", f"{profile.created} on {profile.machine}, scopeguard {profile.scopeguard_version}"),
    ]
    out = [
        f"# Calibration report: `{profile.detector}` at a false-refusal budget of {profile.budget:g}",
        "",
        profile.summary(),
        "",
        "| | |",
        "|---|---|",
        *(f"| {k} | {v} |" for k, v in table),
        "",
        "## Data",
        "",
        *(f"- {s}" for s in profile.sources),
        "",
        "SHA-256 of the data:",
        "",
        *(f"- {name}: `{sha}`" for name, sha in sorted(profile.data.items())),
        "",
    ]
    if profile.notes:
        out += ["Notes:", "", *(f"- {n}" for n in profile.notes), ""]
    if profiles and len(profiles) > 1:
        out += [
            "## Profiles",
            "",
            "Each source of questions gives its own threshold; `profile.json` holds the one marked.",
            "",
            "| profile | threshold | false refusals | caught |",
            "|---|---|---|---|",
            *(
                f"| {name}{' (applied)' if name == chosen else ''} | {p.threshold:.4f} | "
                f"{p.false_refusals} | {p.caught} |"
                for name, p in profiles.items()
            ),
            "",
            "Labelled questions of your own log are what the guard will meet; questions generated from "
            "the documents are easier. Rates of the log's labels are weighted by how each question was "
            "chosen (the intervals use the effective number of labels).",
            "",
        ]
    out += [
        "## How far to trust it",
        "",
        _trust(profile, generated=generated, joined=joined, rephrased=rephrased),
        "",
    ]
    out += [
        "## Other budgets",
        "",
        "On the same questions, at the same rule:",
        "",
        "| budget | threshold | false refusals | caught |",
        "|---|---|---|---|",
    ]
    for row in rows:
        if row.point is None:
            out.append(f"| {row.budget:g} | needs {row.needed} in-scope questions, got {fr.n} | | |")
        else:
            p = row.point
            out.append(f"| {row.budget:g} | {p.threshold:.4f} | {p.false_refusals} | {p.caught} |")
    out += ["", "## Plot", ""]
    out.append(f"![scores and the false-refusal trade-off]({plot})" if " " not in plot else plot)
    out += [
        "",
        "## Use it",
        "",
        "```python",
        "from scopeguard import Guard",
        "",
        f'guard = Guard(detector="{profile.detector}", calibration="{Path(folder).as_posix()}")',
        "```",
        "",
    ]
    path = Path(folder) / REPORT_FILE
    atomic_write_text(path, "\n".join(out))
    return path
