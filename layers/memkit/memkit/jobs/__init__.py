"""Background work, run by the stream functions, the worker, the schedule and the rebuild
(never request-time logic, which is memkit.service):

- indexing: stream records -> embeddings -> the vector index; pending memories -> records;
- curation: what a session needs (summary, extraction, title) and the jobs that do it;
- the lifecycle: the scheduled cleanup run (cleanup) and its phases (phases: expiry,
  policies, orphans), forgetting (forget), compaction (compact), a user's deletion (users)
  and the index rebuild (reindex). A phase is bounded by the run's deadline and resumed by
  the next run from a saved cursor.
"""
