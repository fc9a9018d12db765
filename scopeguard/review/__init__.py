"""Human review of generated questions: a local web page, label files, and agreement statistics."""

from scopeguard.review.agreement import AgreementReport, agreement_report, cohen_kappa, export_resolved
from scopeguard.review.server import make_server, serve
from scopeguard.review.store import LabelStore

__all__ = [
    "AgreementReport",
    "LabelStore",
    "agreement_report",
    "cohen_kappa",
    "export_resolved",
    "make_server",
    "serve",
]
