"""OpenAI Batch API execution, job-agnostic: requests in, replies out, resumable in a run folder.

    from scopeguard.batch import BatchJobs, BatchSettings
    jobs = BatchJobs("out/", BatchSettings(poll_interval_s=60))
    state = jobs.write(model, {"req-1": model.request_body("Hello")})   # .batch/job-00001.*
    outcome = jobs.run(model, state)      # upload, submit, poll, download (resumes any step)
    ...store outcome.replies...; jobs.close(model, outcome.state)   # deletes its files

``model`` is an :class:`~scopeguard.llm.openai_compat.OpenAIChatModel` (any server that
implements ``/v1/files`` and ``/v1/batches``). ``scopeguard generate --execution batch`` runs the
ELOQ generator this way (:mod:`scopeguard.generation.batch`). See :mod:`scopeguard.batch._jobs`
for the steps and what a resumed run does at each.

Jobs whose items are short chains of dependent calls run in **waves** over a reply cache
(:func:`run_waves`: record the misses, submit them as one job, merge the results, replay), as
``scopeguard generate``, ``evaluate`` and ``verify`` do with ``--execution batch``; see
:mod:`scopeguard.batch._waves`. A closed job's files are deleted from the server.
"""

from scopeguard.batch._jobs import BatchJobs, BatchJobState, BatchOutcome, BatchSettings
from scopeguard.batch._waves import Deferred, ReplyStore, Wave, run_waves

__all__ = [
    "BatchJobState",
    "BatchJobs",
    "BatchOutcome",
    "BatchSettings",
    "Deferred",
    "ReplyStore",
    "Wave",
    "run_waves",
]
