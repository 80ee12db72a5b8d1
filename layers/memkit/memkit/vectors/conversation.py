"""How search reads a message in its conversation, and how a question refers to one.

A message alone is often not what answers a question: "I'm an assistant manager now!" is the
answer to "what was John promoted to?" because of the turn before it ("Congrats on the
promotion!"), and because John said it. A question, for its part, names people and uses
words ("what", "did") that say nothing of what it asks about. So memkit indexes and asks:

- **Who said it** (`speaker_of`): a message's `name` when it has one, else the speaker label
  that starts its content when it is a transcript line ("Caroline: I went to a support group
  yesterday": up to three capitalised words before a colon). The indexer stores it, lowercased,
  as the doc's `speaker`; the default (hybrid) search ranks a message a little higher when the
  question names its speaker (`names_speaker`, memkit.vectors.hybrid.SPEAKER_BOOST).
- **What it replies to** (`context_of`): the turn before it in its session, kept with the doc
  as `context` and searched by keywords at memkit.vectors.protocol.CONTEXT_WEIGHT (never shown).
- **What a question means** (`meaning_of`): what of a search text is embedded for the vector
  side. Function words ("what", "did", "I", "my") and the names of the conversation's
  speakers ("Caroline", when Caroline speaks in it) are left out: in a vector they pull a
  question towards every chatty message and every message of that person, whatever it says.
  Who is asked about still counts, through the speaker and on the keyword side; other names
  ("Lisbon") are what the question is about and stay. Every embedder gets the same text.

What each bought on the LoCoMo development split (bench/locomo.py), and the plateaus
CONTEXT_WEIGHT and SPEAKER_BOOST sit on, is measured in docs/benchmarks.md ("LoCoMo
development split").
"""

from __future__ import annotations

import re
from collections.abc import Collection

from memkit.text import words

# English function words (pronouns, auxiliaries, determiners, prepositions, conjunctions,
# wh-words): NLTK's English stop list, as keyword terms, so the pieces of "what's" and
# "I'm" ("s", "m") are in it; less its negations ("no", "nor", "not", and "don" "t" of
# "don't"), which a contextual embedder (Titan, Cohere) reads ("restaurants I do not
# like"). Keeping them changed nothing for the local model on LoCoMo (recall@10 0.751 and
# 0.753).
_FUNCTION_WORDS = """
    i me my myself we our ours ourselves you your yours yourself yourselves he him his himself
    she her hers herself it its itself they them their theirs themselves what which who whom
    this that these those am is are was were be been being have has had having do does did
    doing a an the and but if or because as until while of at by for with about against
    between into through during before after above below to from up down in out on off over
    under again further then once here there when where why how all any both each few more
    most other some such only own same so than too very s can will just
    should now d ll m o re ve y
"""
FUNCTION_WORDS = frozenset(_FUNCTION_WORDS.split())

# The turn before a message, as its context: at most this many characters, its last ones
# (the end of a turn is what the reply answers). A bound on what each doc carries, not a
# tuning knob: conversation turns are far shorter.
CONTEXT_CHARS = 2_000

# A transcript line's speaker label: up to three capitalised words of at most 40 characters,
# then a colon and a space (a heading such as "Reminder:" reads as one too: then a question
# about reminders is about those lines).
_LABEL = re.compile(r"\s*([A-Z][\w.'\u2019-]{0,39}(?: [A-Z][\w.'\u2019-]{0,39}){0,2}):\s")


def speaker_of(content: str, name: str | None = None) -> str | None:
    """Who said a message, lowercased (None: it does not say)."""
    if name and name.strip():
        return " ".join(words(name)) or None
    label = _LABEL.match(content)
    return " ".join(words(label.group(1))) if label else None


def context_of(previous: str | None) -> str:
    """What a message's doc keeps of the turn before it ("" when there is none)."""
    if not previous:
        return ""
    return previous[-CONTEXT_CHARS:]


def drop_function_words(text: str) -> str:
    """A text's words without English function words, lowercased ("What's my dog's name?"
    -> "dog name"); the text itself if nothing is left."""
    kept = [word for word in words(text) if word not in FUNCTION_WORDS]
    return " ".join(kept) if kept else text


def meaning_of(question: str, speakers: Collection[str] = ()) -> str:
    """What of a search text is embedded: its words without function words and without
    the names of `speakers` (the people of the conversation it names: memkit.vectors.hybrid
    finds them among the keyword candidates' speakers), lowercased. "What did Caroline
    research?" of a conversation Caroline takes part in -> "research"; "Where did I stay in
    Lisbon?" -> "stay lisbon". When nothing else is left, the text without function words."""
    names = {part for speaker in speakers for part in speaker.split()}
    meant = [word for word in words(question) if word not in FUNCTION_WORDS | names]
    return " ".join(meant) if meant else drop_function_words(question)


def names_speaker(question_words: Collection[str], speaker: object) -> bool:
    """Whether a question (its words, as `words` makes them) names a doc's speaker."""
    if not isinstance(speaker, str) or not speaker:
        return False
    return all(part in question_words for part in speaker.split())
