"""OpenAI Batch API execution, job-agnostic: requests in, replies out, resumable in a run folder.

    from scopeguard.batch import BatchJobs, BatchSettings
    jobs = BatchJobs("out/", BatchSettings(poll_interval_s=60))
    state = jobs.write(model, {"req-1": model.request_body("Hello")})   # .batch/job-00001.*
    outcome = jobs.run(model, state)      # upload, submit, poll, download (resumes any step)
    ...store outcome.replies...; jobs.close(outcome.state)

``model`` is an :class:`~scopeguard.llm.openai_compat.OpenAIChatModel` (any server that
implements ``/v1/files`` and ``/v1/batches``). ``scopeguard generate --execution batch`` runs the
ELOQ generator this way (:mod:`scopeguard.generation.batch`). See :mod:`scopeguard.batch._jobs`
for the steps and what a resumed run does at each.
"""

from scopeguard.batch._jobs import BatchJobs, BatchJobState, BatchOutcome, BatchSettings

__all__ = ["BatchJobState", "BatchJobs", "BatchOutcome", "BatchSettings"]
