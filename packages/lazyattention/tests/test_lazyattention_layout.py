import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from icml26_kernels.attention import OFFSET_MAX, unpack_block_table
from icml26_lazyattention import DocumentLayout, OffsetOverflowError


def test_lazyattention_layout_hand_example():
    lay = DocumentLayout.from_lengths([5, 3, 9], 4)
    assert lay.doc_blocks == (2, 1, 3)
    assert lay.padded_lengths == (8, 4, 12)
    assert lay.doc_offsets == (0, 5, 8)
    assert lay.total_length == 17
    assert lay.block_offsets == [0, 0, 5, 8, 8, 8]
    assert lay.block_pads == [0, 3, 1, 0, 0, 3]
    row = lay.block_table([[10, 11], [3], [7, 8, 9]], private_block_ids=[1, 2], private_tokens=6)
    ids, off, pad, used = unpack_block_table(row)
    assert ids.tolist() == [10, 11, 3, 7, 8, 9, 1, 2]
    assert off.tolist() == [0, 0, 5, 8, 8, 8, 0, 0]
    assert pad.tolist() == [0, 3, 1, 0, 0, 3, 0, 2]
    assert bool(used.all())
    wide = lay.block_table([[10, 11], [3], [7, 8, 9]], width=9)
    assert wide.shape == (9,) and wide[6:].eq(0).all()


@settings(max_examples=50, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 100), min_size=1, max_size=10),
    bs=st.sampled_from([1, 2, 4, 8, 16, 5]),
)
def test_lazyattention_layout_properties(lengths, bs):
    lay = DocumentLayout.from_lengths(lengths, bs)
    # every document occupies whole blocks, never shares one, and pads less than a block
    assert all(p % bs == 0 and 0 <= p - n < bs for p, n in zip(lay.padded_lengths, lengths))
    assert len(lay.block_offsets) == sum(lay.doc_blocks) == len(lay.block_pads)
    assert sum(bs - p for p in lay.block_pads) == sum(lengths)  # valid slots == tokens
    # offsets are the unpadded starts
    assert list(lay.doc_offsets) == [sum(lengths[:i]) for i in range(len(lengths))]
    assert lay.max_rotation_offset == sum(lengths[:-1])


def test_lazyattention_layout_offset_bound():
    # paper design.md §4.4 anchors: 65 documents x 1024 tokens rejected, one 260k-token document accepted
    with pytest.raises(OffsetOverflowError, match="16-bit offset field"):
        DocumentLayout.from_lengths([1024] * 65, 16)
    DocumentLayout.from_lengths([1024] * 64, 16)
    lay = DocumentLayout.from_lengths([260_000], 16)
    assert lay.max_rotation_offset == 0
    DocumentLayout.from_lengths([OFFSET_MAX, 1], 16)
    with pytest.raises(OffsetOverflowError):
        DocumentLayout.from_lengths([OFFSET_MAX + 1, 1], 16)


def test_lazyattention_layout_bad_inputs():
    with pytest.raises(ValueError, match="at least one document"):
        DocumentLayout.from_lengths([], 16)
    with pytest.raises(ValueError, match=">= 1 token"):
        DocumentLayout.from_lengths([3, 0], 16)
    with pytest.raises(ValueError, match="block_size"):
        DocumentLayout.from_lengths([3], 0)
    lay = DocumentLayout.from_lengths([5], 4)
    with pytest.raises(ValueError, match="needs 2 blocks"):
        lay.block_table([[1]])
    with pytest.raises(ValueError, match="private blocks"):
        lay.block_table([[1, 2]], private_block_ids=[3], private_tokens=5)
    with pytest.raises(ValueError, match="1 documents"):
        lay.block_table([[1, 2], [3]])
    assert torch.is_tensor(lay.block_table([[1, 2]]))
