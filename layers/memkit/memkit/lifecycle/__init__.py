"""Memory over time: expiry, forgetting, compaction, full deletion, reindex, orphans.

The scheduled cleanup run (functions/cleanup) works through phases (memkit.lifecycle.phases),
each bounded by the run's deadline and resumed by the next run from a saved cursor.
"""
