"""The local embedder: model2vec's vectors, without model2vec, torch or a network."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from memkit.embeddings.local import DIMENSIONS, LocalEmbedder

REFERENCE = Path(__file__).resolve().parents[1] / "fixtures" / "model2vec_reference.json"


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    return LocalEmbedder()


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def test_vectors_match_model2vecs_own_encoder(embedder: LocalEmbedder) -> None:
    # the fixture holds model2vec 0.10.0's StaticModel.encode output for these texts
    reference = json.loads(REFERENCE.read_text(encoding="utf-8"))

    vectors = embedder.embed(reference["texts"], "document")

    for ours, theirs in zip(vectors, reference["vectors"], strict=True):
        assert _cosine(ours, theirs) > 0.9999


def test_vectors_are_unit_length_in_order_and_batch_independent(embedder: LocalEmbedder) -> None:
    texts = ["green tea in the morning", "a flight to Oslo", "quarterly revenue grew"]

    batch = embedder.embed(texts, "document")
    alone = [embedder.embed([text], "document")[0] for text in texts]

    assert [len(v) for v in batch] == [DIMENSIONS] * 3
    assert all(abs(math.sqrt(sum(x * x for x in v)) - 1) < 1e-5 for v in batch)
    assert all(_cosine(a, b) > 0.99999 for a, b in zip(batch, alone, strict=True))


def test_a_query_and_a_document_of_the_same_text_are_embedded_alike(
    embedder: LocalEmbedder,
) -> None:
    # what a search embeds is chosen before (memkit.vectors.conversation.meaning_of), for
    # every embedder alike
    (query,) = embedder.embed(["What is my dog's name?"], "query")
    (document,) = embedder.embed(["What is my dog's name?"], "document")
    (content,) = embedder.embed(["dog name"], "document")

    assert _cosine(query, document) > 0.99999
    assert _cosine(query, content) < 0.99


def test_related_texts_are_closer_than_unrelated_ones(embedder: LocalEmbedder) -> None:
    tea, drink, tax = embedder.embed(
        ["She drinks green tea every morning", "Her favourite drink is tea", "File the tax return"],
        "document",
    )

    assert _cosine(tea, drink) > _cosine(tea, tax) + 0.2


def test_text_with_no_known_token_gets_the_zero_vector(embedder: LocalEmbedder) -> None:
    (empty,) = embedder.embed([""], "query")

    assert empty == [0.0] * DIMENSIONS


TEXTS = [
    "I like green tea",
    "The meeting moved to Tuesday at 3pm, didn't it?",
    "Ünïcödé naïve café — résumé",
    "e-mail: ada@example.com; phone +47 22 33 44 55",
    "中文字符和日本語のテキスト",
    "emoji 🙂 and symbols ∑ ≠ ∞ and tabs\tand\nnewlines",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "x" * 150,
    "control\x00chars\u200bzero\ufffdwidth",
    "Ada's flight to Oslo leaves on Friday; she prefers an aisle seat.",
    "",
]


@pytest.mark.parametrize("text", TEXTS)
def test_the_wordpiece_ids_are_those_of_the_tokenizers_library(text: str) -> None:
    from tokenizers import Tokenizer

    from memkit.embeddings.local import MAX_TOKENS, MODEL_DIR
    from memkit.embeddings.wordpiece import WordPiece

    reference = Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))
    reference.no_padding()
    reference.enable_truncation(MAX_TOKENS)
    ours = WordPiece.from_file(MODEL_DIR / "tokenizer.json")

    assert ours.encode(text, MAX_TOKENS) == reference.encode(text, add_special_tokens=False).ids


def test_long_text_is_cut_at_512_tokens() -> None:
    from memkit.embeddings.local import MODEL_DIR
    from memkit.embeddings.wordpiece import WordPiece

    ids = WordPiece.from_file(MODEL_DIR / "tokenizer.json").encode("tea " * 1_000, 512)

    assert len(ids) == 512


def test_text_of_more_distinct_characters_than_a_warm_environment_keeps_is_tokenized_alike() -> (
    None
):
    # Given every accented Latin letter and every CJK ideograph (over 21,000 distinct
    # characters), each with an accent and a punctuation mark after it
    from tokenizers import Tokenizer

    from memkit.embeddings.local import MODEL_DIR
    from memkit.embeddings.wordpiece import WordPiece

    text = " ".join(f"{chr(c)}é," for c in [*range(0xC0, 0x250), *range(0x4E00, 0xA000)])
    reference = Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))
    reference.no_padding()
    reference.no_truncation()

    # When it is tokenized twice (the second time from what the first remembered)
    ours = WordPiece.from_file(MODEL_DIR / "tokenizer.json")
    first, second = ours.encode(text), ours.encode(text)

    # Then the ids are the tokenizers library's each time
    expected = reference.encode(text, add_special_tokens=False).ids
    assert first == second == expected
