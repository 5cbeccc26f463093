//! Which values of a buffer a loss has reached: a bit per value, set where a packet
//! went missing or arrived marked [`Flags::INEXACT`](crate::wire::Flags::INEXACT), and
//! read to mark what is sent on. A collective's messages share one mask over its buffer,
//! so the result knows which of its values are exact.

use std::cell::RefCell;
use std::ops::Range;
use std::rc::Rc;

/// A mask shared by a buffer's messages (one thread owns them).
pub type Inexact = Rc<RefCell<InexactMask>>;

/// One bit per value; the words grow as values are marked (unmarked: exact).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InexactMask {
    words: Vec<u64>,
}

/// The 64-bit words a range of bit positions touches, each with the range's bits in it
/// (a word at a time: the work is in words, not bits).
pub(super) fn word_spans(range: Range<usize>) -> impl Iterator<Item = (usize, u64)> {
    let (start, end) = (range.start, range.end.max(range.start));
    let words = if start == end {
        0..0
    } else {
        start / 64..(end - 1) / 64 + 1
    };
    words.map(move |word| {
        let base = word * 64;
        let low = start.max(base) - base;
        let high = end.min(base + 64) - base;
        let bits = if high - low == 64 {
            u64::MAX
        } else {
            ((1u64 << (high - low)) - 1) << low
        };
        (word, bits)
    })
}

impl InexactMask {
    pub fn mark(&mut self, range: Range<usize>) {
        for (word, bits) in word_spans(range) {
            if word >= self.words.len() {
                self.words.resize(word + 1, 0);
            }
            self.words[word] |= bits;
        }
    }

    /// Makes a range exact again (values overwritten by exact ones).
    pub fn clear(&mut self, range: Range<usize>) {
        for (word, bits) in word_spans(range) {
            if let Some(w) = self.words.get_mut(word) {
                *w &= !bits;
            }
        }
    }

    pub fn any(&self, range: Range<usize>) -> bool {
        word_spans(range).any(|(word, bits)| self.words.get(word).is_some_and(|w| w & bits != 0))
    }

    /// Values of the range a loss reached.
    pub fn count(&self, range: Range<usize>) -> usize {
        word_spans(range)
            .map(|(word, bits)| {
                self.words
                    .get(word)
                    .map_or(0, |w| (w & bits).count_ones() as usize)
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The mask agrees with a plain vector of flags under any marks and clears.
        #[test]
        fn the_mask_is_a_set_of_values(
            ops in proptest::collection::vec((any::<bool>(), 0usize..300, 0usize..150), 0..20),
            probe in (0usize..320, 0usize..200),
        ) {
            let mut mask = InexactMask::default();
            let mut plain = vec![false; 600];
            for (set, start, len) in ops {
                let range = start..start + len;
                if set {
                    mask.mark(range.clone());
                } else {
                    mask.clear(range.clone());
                }
                plain[range].iter_mut().for_each(|v| *v = set);
            }
            let range = probe.0..probe.0 + probe.1;
            let marked = plain[range.clone()].iter().filter(|&&v| v).count();
            prop_assert_eq!(mask.count(range.clone()), marked);
            prop_assert_eq!(mask.any(range), marked > 0);
        }
    }

    #[test]
    fn empty_ranges_mark_nothing() {
        let mut mask = InexactMask::default();
        mask.mark(5..5);
        assert_eq!(mask, InexactMask::default());
        assert!(!mask.any(0..1000));
    }
}
