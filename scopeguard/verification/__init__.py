"""Answer verification against a corpus (Huo, Arabzadeh & Clarke: retrieve with question + answer,
optionally read, then ask the LLM whether the answers agree: Yes / No / Not Related).

Out-of-scope detection guards the question; this guards the answer::

    from scopeguard.verification import AnswerVerifier, verify_guard_result
    verifier = AnswerVerifier("local", reader=True)
    result = verifier.verify("Who won?", "The home team.", documents)
    result.verdict  # "supported" | "contradicted" | "not_related" | "unknown"
"""

from scopeguard.verification.guard_result import (
    OnContradiction,
    OnVerifyError,
    VerifyAnswers,
    averify_guard_result,
    verify_guard_result,
)
from scopeguard.verification.hybrid import (
    BM25_MSMARCO,
    VERIFIER_RETRIEVERS,
    HybridRetriever,
    make_retriever,
    rrf_fuse,
)
from scopeguard.verification.loop import AnswerVerifier, Evidence, Source, VerificationResult
from scopeguard.verification.msmarco import (
    Query,
    iter_collection,
    iter_queries,
    read_qrels,
    sample_collection,
)
from scopeguard.verification.parsing import VerificationLabel, parse_verification
from scopeguard.verification.passages import dataset_passages, iter_passages, split_passages, split_sentences
from scopeguard.verification.report import (
    AgreementMatrix,
    ClassDistribution,
    agreement_markdown,
    agreement_matrix,
    class_distribution,
    distribution_markdown,
    read_results,
    write_run_report,
)
from scopeguard.verification.run import VerificationConfig, VerificationRunReport, run_verification
from scopeguard.verification.sampling import CheckItem, check_summary, sample_for_check, write_check_sample

__all__ = [
    "BM25_MSMARCO",
    "VERIFIER_RETRIEVERS",
    "AgreementMatrix",
    "AnswerVerifier",
    "CheckItem",
    "ClassDistribution",
    "Evidence",
    "HybridRetriever",
    "OnContradiction",
    "OnVerifyError",
    "Query",
    "Source",
    "VerificationConfig",
    "VerificationLabel",
    "VerificationResult",
    "VerificationRunReport",
    "VerifyAnswers",
    "agreement_markdown",
    "agreement_matrix",
    "averify_guard_result",
    "check_summary",
    "class_distribution",
    "dataset_passages",
    "distribution_markdown",
    "iter_collection",
    "iter_passages",
    "iter_queries",
    "make_retriever",
    "parse_verification",
    "read_qrels",
    "read_results",
    "rrf_fuse",
    "run_verification",
    "sample_collection",
    "sample_for_check",
    "split_passages",
    "split_sentences",
    "verify_guard_result",
    "write_check_sample",
    "write_run_report",
]
