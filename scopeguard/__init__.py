"""scopeguard: catch out-of-scope questions before your RAG system hallucinates an answer.

The public surface::

    from scopeguard import Guard, Document, Verdict, get_detector, from_spec

A calibration profile (``scopeguard calibrate``'s folder) sets the detector's operating point:
``Guard(calibration=DIR)``, ``get_detector(name, calibration=DIR)``, ``load_profile(DIR)``.
"""

from scopeguard._prereading import PrereadJob, PrereadReport
from scopeguard.data import Dataset, LabeledQuestion, load_dataset, save_dataset
from scopeguard.detection.detectors import (
    BaseDetector,
    Detector,
    available_detectors,
    get_detector,
    register_detector,
)
from scopeguard.detection.profile import CalibrationProfile, load_profile
from scopeguard.errors import (
    ConfigurationError,
    DatasetError,
    DetectionError,
    DocumentTooLongError,
    InputError,
    LLMAuthError,
    LLMConnectionError,
    LLMError,
    LLMRateLimitError,
    LLMResponseError,
    LLMTimeoutError,
    MissingDependencyError,
    ModelError,
    ScopeGuardError,
)
from scopeguard.guard import Guard
from scopeguard.llm import ChatModel, Completion, StreamingChatModel, available_backends, from_spec
from scopeguard.policies import (
    CallablePolicy,
    ClarifyPolicy,
    DefusePolicy,
    FlagOnlyPolicy,
    Policy,
    RefusePolicy,
    available_policies,
    get_policy,
)
from scopeguard.types import Action, Document, GuardResult, Label, Verdict, Vote

__version__ = "0.1.0"

__all__ = [
    "Action",
    "BaseDetector",
    "CalibrationProfile",
    "CallablePolicy",
    "ChatModel",
    "ClarifyPolicy",
    "Completion",
    "ConfigurationError",
    "Dataset",
    "DatasetError",
    "DefusePolicy",
    "DetectionError",
    "Detector",
    "Document",
    "DocumentTooLongError",
    "FlagOnlyPolicy",
    "Guard",
    "GuardResult",
    "InputError",
    "LLMAuthError",
    "LLMConnectionError",
    "LLMError",
    "LLMRateLimitError",
    "LLMResponseError",
    "LLMTimeoutError",
    "Label",
    "LabeledQuestion",
    "MissingDependencyError",
    "ModelError",
    "Policy",
    "PrereadJob",
    "PrereadReport",
    "RefusePolicy",
    "ScopeGuardError",
    "StreamingChatModel",
    "Verdict",
    "Vote",
    "__version__",
    "available_backends",
    "available_detectors",
    "available_policies",
    "from_spec",
    "get_detector",
    "get_policy",
    "load_dataset",
    "load_profile",
    "register_detector",
    "save_dataset",
]
