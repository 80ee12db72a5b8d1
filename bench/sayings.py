"""What the metered benchmarks' user says and hears (bench.agentcore, bench.cost): short
sentences about a few subjects, so searches have something to find and texts have the length
of a chat's turns."""

from __future__ import annotations

SUBJECTS = ["tea", "coffee", "Lisbon", "Oslo", "the piano", "running", "chess", "Python", "Rust"]
SAYINGS = [
    "I really like {s} and I think about it every morning before work.",
    "Last week I told my sister about {s}; she was surprised I still care about it.",
    "Could you remind me what I said about {s} the other day?",
    "My manager asked me to write a short report on {s} by Friday.",
]
ANSWERS = [
    "Noted. I will keep that in mind for our next conversation about {s}.",
    "Thanks for telling me; {s} comes up often, so I saved it.",
]
