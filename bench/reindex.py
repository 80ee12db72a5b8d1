"""Reindex throughput on the local stack's parts: records per second of a full rebuild.

RECORDS long-term records are written through the real API handler into DynamoDB Local where
Java 17+ is here (else moto in process; MEMKIT_BENCH_ENGINE=moto forces it), then the vector
index is rebuilt three times by
memkit.jobs.reindex: a parallel Scan of the table (4 segments), the stream indexer's
code embedding each page with the local embedder, `_bulk` writes into a new generation of
the local stack's index (the loopback OpenSearch, domain flavour, through the real
adapter), each record's index state written back to the table, the alias switch, the catch-up
Scan, and the old generation's deletion. The catch-up margin is 0 here (every record was
written before the rebuild started), so each record is embedded once per rebuild.
Prints the median of the three rebuilds, and, to show where the time goes, the Scan alone
(three dry runs) and the index-state writes alone.
"""

from __future__ import annotations

import random
import time

from bench import environment
from bench.figures import median, report
from bench.indexing import table_with_records

RECORDS = 5_000
RUNS = 3
SEGMENTS = 4


def reindex_throughput() -> None:
    from bench.dynamodb_requests import dynamodb_engine
    from memkit.config import IndexSettings
    from memkit.embeddings.local import LocalEmbedder
    from memkit.jobs.reindex import Reindexer
    from memkit.vectors.opensearch import opensearch_index
    from memkit_dev.local.opensearch import LoopbackOpenSearch

    rng = random.Random(11)
    embedder = LocalEmbedder()
    with dynamodb_engine() as engine, LoopbackOpenSearch(embedder.dimensions) as server:
        index = opensearch_index(
            IndexSettings(opensearch_endpoint=server.url, opensearch_auth="none"),
            "us-east-1",
            embedder.dimensions,
        )
        store = table_with_records(index, embedder, rng, RECORDS)
        embedder.embed(["warm up"], "document")
        rates = []
        for _ in range(RUNS):
            result = Reindexer(store, index, embedder, segments=SEGMENTS, catch_up_margin=0).run()
            assert (result.indexed, result.failed) == (RECORDS, 0), result
            rates.append(result.rate)
        # The Scan alone (a dry run reads and counts): what the engine's serving costs of it.
        scans = [
            Reindexer(store, index, embedder, segments=SEGMENTS).run(dry_run=True)
            for _ in range(RUNS)
        ]
        # The index states alone: one conditional UpdateItem per record, as each rebuild
        # writes them (here all refused: the states already hold these versions).
        versions = {f"r{i}": 1 for i in range(RECORDS)}
        started = time.perf_counter()
        store.records.mark_indexed("default", versions, {})
        states = RECORDS / (time.perf_counter() - started)
        assert server.rejected == [], server.rejected
        assert len(server.documents("memkit-memories")) == RECORDS
    report(
        f"reindex: records/s of a full rebuild of {RECORDS} records, {SEGMENTS} Scan segments, "
        f"local embedder, loopback OpenSearch (domain), on {engine} (median of {RUNS})",
        median(rates),
        "records/s",
    )
    report(
        f"reindex: records/s of the parallel Scan alone (a dry run), same table (median of {RUNS})",
        median([scan.indexable / scan.seconds for scan in scans]),
        "records/s",
    )
    report(
        f"reindex: records/s of the index-state writes alone (one UpdateItem each, {engine})",
        states,
        "records/s",
    )


def main() -> None:
    environment.apply()
    reindex_throughput()


if __name__ == "__main__":
    main()
