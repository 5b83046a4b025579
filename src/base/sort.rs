//! A compact stable sort.
//!
//! The standard library's sorts are excellent but large: each element type instantiates
//! several kilobytes of wasm (driftsort, quicksort, small-sort networks), and this crate
//! sorts five different types. This merge sort (insertion sort for short runs) is a few
//! hundred bytes per type and fast enough for the sizes sorted here (at most a few
//! thousand facts, and `explain()` of 10 000).

/// Sorts `v` stably so that `before(a, b)` holds for no pair where `b` comes first.
/// `before` must be a strict weak order ("a goes strictly before b").
pub(crate) fn sort_by<T: Copy>(v: &mut [T], mut before: impl FnMut(&T, &T) -> bool) {
    let mut buf = Vec::new();
    merge_sort(v, &mut buf, &mut before);
}

fn merge_sort<T: Copy>(v: &mut [T], buf: &mut Vec<T>, before: &mut impl FnMut(&T, &T) -> bool) {
    let n = v.len();
    if n <= 12 {
        for i in 1..n {
            let x = v[i];
            let mut j = i;
            while j > 0 && before(&x, &v[j - 1]) {
                v[j] = v[j - 1];
                j -= 1;
            }
            v[j] = x;
        }
        return;
    }
    let mid = n / 2;
    merge_sort(&mut v[..mid], buf, before);
    merge_sort(&mut v[mid..], buf, before);
    if !before(&v[mid], &v[mid - 1]) {
        return; // already in order
    }
    buf.clear();
    buf.extend_from_slice(&v[..mid]);
    let (mut i, mut j, mut k) = (0, mid, 0);
    while i < buf.len() && j < n {
        // Take from the right only when strictly before: equal elements keep their order.
        if before(&v[j], &buf[i]) {
            v[k] = v[j];
            j += 1;
        } else {
            v[k] = buf[i];
            i += 1;
        }
        k += 1;
    }
    while i < buf.len() {
        v[k] = buf[i];
        i += 1;
        k += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn sorts_like_the_standard_stable_sort(v in proptest::collection::vec((0u8..8, any::<u16>()), 0..300)) {
            let mut ours = v.clone();
            sort_by(&mut ours, |a, b| a.0 < b.0);
            let mut std = v;
            std.sort_by_key(|x| x.0);
            prop_assert_eq!(ours, std);
        }
    }
}
