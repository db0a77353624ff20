"""Variable-length fields as tensors: :func:`pad` and :func:`unpad`.

A variable-length field (shape ``[-1]``: a step's or an item's token
list) comes back from ``fetch_group``, ``sample`` and ``follow`` as
``(values, offsets)``: the rows' elements one after another and
``rows + 1`` offsets from 0, without padding. :func:`pad` makes the ``[steps, max_len]`` array (and a mask of
the real elements) that a model takes; :func:`unpad` goes back, for
``submit_steps``. Both are numpy, vectorised: no Python loop per step.
"""

from typing import Optional, Tuple

import numpy as np


def pad(values, offsets, *, pad_value=0, max_len: Optional[int] = None,
        ) -> Tuple[np.ndarray, np.ndarray]:
    """``(padded, mask)``: ``padded[i, :n_i]`` holds step ``i``'s elements
    (``n_i = offsets[i + 1] - offsets[i]``) and ``pad_value`` after them,
    ``mask`` is ``True`` where an element is real. ``max_len`` (default:
    the longest step) sets the width; a longer step is a ``ValueError``.
    ``values`` is 1-D (a field of shape ``[-1]``)."""
    values = np.asarray(values)
    offsets = np.asarray(offsets, dtype=np.int64)
    if values.ndim != 1:
        raise ValueError(f"values: shape {values.shape}, expected one dimension")
    if offsets.ndim != 1 or offsets.size < 1 or offsets[0] != 0:
        raise ValueError("offsets: expected steps + 1 integers from 0")
    lengths = np.diff(offsets)
    if (lengths < 0).any():
        raise ValueError(f"offsets: go backwards at step {int(np.argmax(lengths < 0))}")
    if offsets[-1] != values.size:
        raise ValueError(f"offsets end at {int(offsets[-1])}, values hold {values.size}")
    longest = int(lengths.max()) if lengths.size else 0
    width = longest if max_len is None else int(max_len)
    if longest > width:
        raise ValueError(
            f"step {int(np.argmax(lengths))} holds {longest} elements, more than max_len {width}")
    mask = np.arange(width)[None, :] < lengths[:, None]
    padded = np.full((lengths.size, width), pad_value, dtype=values.dtype)
    padded[mask] = values
    return padded, mask


def unpad(padded, mask) -> Tuple[np.ndarray, np.ndarray]:
    """``(values, offsets)`` of the elements of ``padded`` where ``mask``
    is ``True`` (each row's real elements first): :func:`pad`'s inverse."""
    padded = np.asarray(padded)
    mask = np.asarray(mask, dtype=bool)
    if padded.shape != mask.shape or padded.ndim != 2:
        raise ValueError(f"padded {padded.shape} and mask {mask.shape}: expected one 2-D shape")
    offsets = np.zeros(padded.shape[0] + 1, dtype=np.int64)
    np.cumsum(mask.sum(axis=1), out=offsets[1:])
    return np.ascontiguousarray(padded[mask]), offsets
