"""Human review: a local web page to label generated questions (a dataset folder) or the questions
a calibration chose (a calibration folder), label files, and agreement statistics."""

from scopeguard.review._calibration import TO_LABEL_FILE
from scopeguard.review.agreement import AgreementReport, agreement_report, cohen_kappa, export_resolved
from scopeguard.review.server import make_server, serve
from scopeguard.review.store import LABELS_FILE, LabelStore, QuestionLabel, read_question_labels

__all__ = [
    "LABELS_FILE",
    "TO_LABEL_FILE",
    "AgreementReport",
    "LabelStore",
    "QuestionLabel",
    "agreement_report",
    "cohen_kappa",
    "export_resolved",
    "make_server",
    "read_question_labels",
    "serve",
]
