"""Tests for toolslim.wire.codings: one Content-Encoding table, decoded whole or chunk by chunk."""

from __future__ import annotations

import contextlib
import gzip
import itertools
import zlib

import brotli
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from toolslim.wire import codings

BODY = b'{"model":"m","tools":[{"name":"caf\xc3\xa9","input_schema":{"type":"object"}}]}' * 20


def raw_deflate(data: bytes) -> bytes:
    compressor = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return compressor.compress(data) + compressor.flush()


def zstd(data: bytes) -> bytes:
    return zstandard.ZstdCompressor().compress(data)


# Content-Encoding token -> an encoder that produces what a peer sends under it.
ENCODERS = {
    "br": brotli.compress,
    "deflate": zlib.compress,
    "gzip": gzip.compress,
    "x-gzip": gzip.compress,
    "zstd": zstd,
}


def incremental(content_encoding: str, chunks: list[bytes], limit: int = 1 << 30) -> bytes:
    decoder = codings.decoder(content_encoding)
    assert decoder is not None
    out = b"".join(decoder.decode(chunk, limit) for chunk in chunks)
    decoder.finish()
    return out


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    edges = [0, *sorted(cut % (len(data) + 1) for cut in cuts), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges)]


# --- decode: one body, one coding ---------------------------------------------------------------


@pytest.mark.parametrize("coding", ENCODERS)
def test_each_coding_in_the_table_decodes_a_whole_body(coding: str) -> None:
    assert codings.decode(coding, ENCODERS[coding](BODY), len(BODY)) == BODY


def test_the_table_names_every_coding_the_proxy_decodes() -> None:
    assert sorted(codings.CODINGS) == sorted(ENCODERS)


@pytest.mark.parametrize("header", ["GZIP", " gzip ", "X-Gzip"])
def test_the_coding_is_read_in_any_case_and_without_surrounding_space(header: str) -> None:
    assert codings.decode(header, gzip.compress(BODY), len(BODY)) == BODY


@pytest.mark.parametrize("header", ["", "identity", "Identity", "  "])
def test_no_coding_and_identity_return_the_very_bytes_given(header: str) -> None:
    assert codings.decode(header, BODY, 0) is BODY


def test_deflate_is_accepted_raw_as_well_as_zlib_wrapped() -> None:
    assert codings.decode("deflate", raw_deflate(BODY), len(BODY)) == BODY


@pytest.mark.parametrize("header", ["compress", "bogus", "gzip, br", "identity, gzip"])
def test_an_unknown_coding_or_a_list_of_codings_is_unsupported(header: str) -> None:
    with pytest.raises(codings.Unsupported):
        codings.decode(header, gzip.compress(BODY), len(BODY))


@pytest.mark.parametrize("coding", ENCODERS)
def test_a_body_of_exactly_the_limit_decodes_and_one_byte_more_is_too_large(coding: str) -> None:
    encoded = ENCODERS[coding](BODY)
    assert codings.decode(coding, encoded, len(BODY)) == BODY
    with pytest.raises(codings.TooLarge):
        codings.decode(coding, encoded, len(BODY) - 1)


@pytest.mark.parametrize("coding", ENCODERS)
def test_a_small_body_that_expands_enormously_is_too_large(coding: str) -> None:
    encoded = ENCODERS[coding](b" " * (16 << 20))
    assert len(encoded) < 64 << 10
    with pytest.raises(codings.TooLarge):
        codings.decode(coding, encoded, 1 << 20)


@pytest.mark.parametrize("coding", ENCODERS)
def test_a_truncated_body_is_undecodable(coding: str) -> None:
    with pytest.raises(codings.Undecodable):
        codings.decode(coding, ENCODERS[coding](BODY)[:-4], len(BODY))


@pytest.mark.parametrize("coding", ENCODERS)
def test_bytes_that_are_not_in_the_coding_are_undecodable(coding: str) -> None:
    with pytest.raises(codings.Undecodable):
        codings.decode(coding, b"\x00\x01not compressed at all" * 4, 1 << 20)


@pytest.mark.parametrize("coding", ENCODERS)
def test_junk_after_the_end_of_the_coded_body_is_undecodable(coding: str) -> None:
    with pytest.raises(codings.Undecodable):
        codings.decode(coding, ENCODERS[coding](BODY) + b"junk", len(BODY))


@pytest.mark.parametrize("coding", ["br", "deflate", "gzip"])
def test_an_empty_body_is_undecodable_in_a_coding_that_needs_a_stream(coding: str) -> None:
    with pytest.raises(codings.Undecodable):
        codings.decode(coding, b"", 100)


def test_an_empty_zstd_body_is_zero_frames_and_decodes_to_nothing() -> None:
    assert codings.decode("zstd", b"", 100) == b""


def test_a_gzip_body_of_several_members_decodes_to_their_concatenation() -> None:
    encoded = gzip.compress(BODY[:100]) + gzip.compress(b"") + gzip.compress(BODY[100:])
    assert codings.decode("gzip", encoded, len(BODY)) == BODY


def test_a_gzip_body_of_a_hundred_thousand_tiny_members_decodes_right() -> None:
    members = [b"%d," % i for i in range(100_000)]
    encoded = b"".join(gzip.compress(member, mtime=0) for member in members)
    expected = b"".join(members)
    assert codings.decode("gzip", encoded, len(expected)) == expected
    with pytest.raises(codings.TooLarge):
        codings.decode("gzip", encoded, len(expected) - 1)


def test_a_zstd_body_of_a_hundred_thousand_tiny_frames_decodes_right() -> None:
    compressor = zstandard.ZstdCompressor()
    frames = [b"%d," % i for i in range(100_000)]
    encoded = b"".join(compressor.compress(frame) for frame in frames)
    expected = b"".join(frames)
    assert codings.decode("zstd", encoded, len(expected)) == expected


def test_a_last_gzip_member_cut_short_is_undecodable() -> None:
    encoded = gzip.compress(BODY) + gzip.compress(BODY)[:-1]
    with pytest.raises(codings.Undecodable):
        codings.decode("gzip", encoded, 2 * len(BODY))


# --- decoder: a response copy, chunk by chunk ---------------------------------------------------


@pytest.mark.parametrize("header", [None, "", "identity", " Identity ", "identity, identity"])
def test_no_decoder_is_needed_when_no_coding_is_named(header: str | None) -> None:
    assert codings.decoder(header) is None


@pytest.mark.parametrize("header", ["compress", "gzip, compress", "bogus"])
def test_a_list_with_an_unknown_coding_is_unsupported(header: str) -> None:
    with pytest.raises(codings.Unsupported):
        codings.decoder(header)


@pytest.mark.parametrize("coding", ENCODERS)
def test_a_body_split_anywhere_decodes_as_it_does_whole(coding: str) -> None:
    encoded = ENCODERS[coding](BODY)
    for i in range(len(encoded) + 1):
        assert incremental(coding, [encoded[:i], encoded[i:]]) == BODY, i
    assert incremental(coding.upper(), [encoded[i : i + 1] for i in range(len(encoded))]) == BODY


def test_raw_deflate_is_recognised_when_its_first_two_bytes_arrive_apart() -> None:
    encoded = raw_deflate(BODY)
    assert incremental("deflate", [encoded[:1], encoded[1:2], encoded[2:]]) == BODY


def test_stacked_codings_are_undone_in_reverse_order() -> None:
    encoded = brotli.compress(gzip.compress(BODY))
    assert incremental("gzip, br", [encoded]) == BODY
    assert incremental("identity, gzip , BR", [encoded[:7], encoded[7:]]) == BODY


def test_gzip_members_split_across_chunks_decode_to_their_concatenation() -> None:
    encoded = gzip.compress(BODY[:50]) + gzip.compress(BODY[50:])
    for i in range(len(encoded) + 1):
        assert incremental("gzip", [encoded[:i], encoded[i:]]) == BODY, i


@pytest.mark.parametrize("coding", ENCODERS)
def test_each_call_is_bounded_by_the_limit_it_is_given(coding: str) -> None:
    decoder = codings.decoder(coding)
    assert decoder is not None
    with pytest.raises(codings.TooLarge):
        decoder.decode(ENCODERS[coding](b" " * (16 << 20)), 1 << 20)


@pytest.mark.parametrize("coding", ENCODERS)
def test_finish_tells_a_truncated_stream_from_a_whole_one(coding: str) -> None:
    encoded = ENCODERS[coding](BODY)
    decoder = codings.decoder(coding)
    assert decoder is not None
    decoder.decode(encoded[:-4], len(BODY))
    with pytest.raises(codings.Undecodable):
        decoder.finish()
    decoder.decode(encoded[-4:], len(BODY))
    decoder.finish()


@settings(max_examples=200, deadline=None)
@given(
    coding=st.sampled_from(sorted(ENCODERS)),
    body=st.binary(max_size=400),
    cuts=st.lists(st.integers(min_value=0), max_size=6),
)
def test_chunked_and_whole_decoding_agree_on_any_body_and_split(
    coding: str, body: bytes, cuts: list[int]
) -> None:
    encoded = ENCODERS[coding](body)
    assert incremental(coding, split_at(encoded, cuts)) == codings.decode(coding, encoded, 1 << 20)


@settings(max_examples=300, deadline=None)
@given(
    coding=st.sampled_from(sorted(ENCODERS)),
    data=st.binary(max_size=200),
    limit=st.integers(min_value=0, max_value=1000),
    cuts=st.lists(st.integers(min_value=0), max_size=4),
)
def test_garbage_raises_nothing_but_coding_errors(
    coding: str, data: bytes, limit: int, cuts: list[int]
) -> None:
    with contextlib.suppress(codings.CodingError):
        codings.decode(coding, data, limit)
    with contextlib.suppress(codings.CodingError):
        incremental(coding, split_at(data, cuts), limit)
