//! Strided elements: the C-order strides of a shape, whether strides are C order, and the
//! elements of a strided array gathered in C order.

/// The strides, in elements, of a C-order array of `shape`.
pub(super) fn c_strides(shape: &[usize]) -> Vec<isize> {
    let mut strides = vec![0isize; shape.len()];
    let mut next = 1isize;
    for (s, &n) in strides.iter_mut().zip(shape).rev() {
        *s = next;
        next = next.saturating_mul(n as isize);
    }
    strides
}

/// Whether elements laid out by `strides` are in C order. The stride of a dimension of one
/// element says nothing (PyTorch gives such dimensions any stride).
pub(super) fn in_c_order(shape: &[usize], strides: &[isize]) -> bool {
    let want = c_strides(shape);
    shape.iter().zip(strides.iter().zip(&want)).all(|(&n, (s, w))| n == 1 || s == w)
}

/// Copies the elements of a strided array into `out` in C order. `extent` holds every element,
/// the first (all indices zero) at byte `first`; `strides` are in bytes.
pub(super) fn gather(
    extent: &[u8],
    first: usize,
    shape: &[usize],
    strides: &[isize],
    item: usize,
    out: &mut [u8],
) {
    match item {
        1 => gather_as::<1>(extent, first, shape, strides, out),
        2 => gather_as::<2>(extent, first, shape, strides, out),
        4 => gather_as::<4>(extent, first, shape, strides, out),
        _ => gather_as::<8>(extent, first, shape, strides, out),
    }
}

/// [`gather`] for elements of `N` bytes: a row of the last dimension at a time, copied whole
/// when its elements are adjacent, element by element (fixed-size copies) when not; the row's
/// start kept as the index moves, not recomputed.
pub(super) fn gather_as<const N: usize>(
    extent: &[u8],
    first: usize,
    shape: &[usize],
    strides: &[isize],
    out: &mut [u8],
) {
    let Some((&inner_n, outer)) = shape.split_last() else {
        out[..N].copy_from_slice(&extent[first..first + N]);
        return;
    };
    let inner_s = strides[outer.len()];
    let row = inner_n * N;
    let mut index = vec![0usize; outer.len()];
    let mut base = first as isize;
    for dst in out.chunks_exact_mut(row) {
        if inner_s == N as isize {
            let at = base as usize;
            dst.copy_from_slice(&extent[at..at + row]);
        } else {
            let mut at = base;
            for el in dst.chunks_exact_mut(N) {
                let src: &[u8; N] = extent[at as usize..][..N].try_into().expect("N bytes");
                el.copy_from_slice(src);
                at += inner_s;
            }
        }
        // The next index of the outer dimensions, the last fastest.
        for d in (0..outer.len()).rev() {
            index[d] += 1;
            base += strides[d];
            if index[d] < outer[d] {
                break;
            }
            base -= strides[d] * outer[d] as isize;
            index[d] = 0;
        }
    }
}
