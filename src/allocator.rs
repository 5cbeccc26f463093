//! mltctl's allocator: mimalloc, with blocks of [`DIRECT_BYTES`] and more taken straight
//! from the kernel for commands whose forks wait on devices, and the settings that keep
//! a run over many switches small.
//!
//! mimalloc: planning and rendering allocate millions of small values across threads,
//! and glibc's malloc took a third of the render's CPU (docs/src/design/switches.md).
//! Big blocks — a spine's configuration, its JSON patch, the transcript of what was
//! sent, read-backs — are few, and each thread of an apply's forks held on to the
//! pages of its largest in mimalloc's per-thread segments: mapped on their own, they
//! go back to the system the moment they are freed, and grow without a copy
//! (`mremap`). Planning and rendering keep mimalloc's reuse of pages already touched:
//! mapped on their own (from 256 KiB), the 16,384-host plan's big vectors made `mltctl
//! plan` ~20% slower.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, Ordering};

use mimalloc::MiMalloc;

/// Blocks this big or bigger are mapped on their own.
pub const DIRECT_BYTES: usize = 64 << 10;
const PAGE_BYTES: usize = 4096;

/// mltctl's global allocator (`main.rs`).
pub struct Allocator;

/// Set by [`map_big_blocks_on_their_own`].
static MAP_BIG_BLOCKS: AtomicBool = AtomicBool::new(false);

/// Maps each block of [`DIRECT_BYTES`] and more made from now on on its own, for
/// commands whose forks wait on devices.
pub fn map_big_blocks_on_their_own() {
    MAP_BIG_BLOCKS.store(true, Ordering::Relaxed);
}

/// Whether a block of `size` bytes aligned to `align` may be mapped on its own (mmap's
/// pages are aligned to a page, no more).
fn direct(size: usize, align: usize) -> bool {
    size >= DIRECT_BYTES && align <= PAGE_BYTES
}

/// Whether a new block of this layout is mapped on its own.
fn maps(layout: Layout) -> bool {
    direct(layout.size(), layout.align()) && MAP_BIG_BLOCKS.load(Ordering::Relaxed)
}

/// Whether `block`, of this layout, was mapped on its own: it may be big and it is not
/// mimalloc's (whatever the setting was when it was made).
///
/// # Safety
/// `block` is a live block of this allocator.
unsafe fn mapped_block(block: *mut u8, layout: Layout) -> bool {
    // SAFETY: mi_is_in_heap_region only looks the address up in mimalloc's map.
    direct(layout.size(), layout.align())
        && !unsafe { libmimalloc_sys::mi_is_in_heap_region(block.cast()) }
}

/// The mapping that holds `size` bytes.
fn mapped(size: usize) -> usize {
    size.div_ceil(PAGE_BYTES) * PAGE_BYTES
}

fn or_null(p: *mut libc::c_void) -> *mut u8 {
    if p == libc::MAP_FAILED {
        std::ptr::null_mut()
    } else {
        p.cast()
    }
}

// SAFETY: every block goes back the way it came: a big one is told apart by asking
// mimalloc whether it is its own, and Rust gives `dealloc` and `realloc` the layout the
// block was made (or last resized) with, so a mapping is unmapped whole. Mapped blocks
// are page-aligned and zeroed, as `alloc_zeroed` needs.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !maps(layout) {
            // SAFETY: the caller's layout, as GlobalAlloc::alloc requires.
            return unsafe { MiMalloc.alloc(layout) };
        }
        // SAFETY: a new private anonymous mapping; no memory of ours is touched.
        or_null(unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                mapped(layout.size()),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        })
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for alloc; a new mapping is zeroed already.
        unsafe {
            if maps(layout) {
                self.alloc(layout)
            } else {
                MiMalloc.alloc_zeroed(layout)
            }
        }
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        // SAFETY: `block` came from alloc or realloc with this layout (see above).
        unsafe {
            if mapped_block(block, layout) {
                libc::munmap(block.cast(), mapped(layout.size()));
            } else {
                MiMalloc.dealloc(block, layout);
            }
        }
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let align = layout.align();
        // SAFETY: `block` is live, as GlobalAlloc::realloc requires of the caller.
        let was_mapped = unsafe { mapped_block(block, layout) };
        // SAFETY: `align` is a valid alignment (it is the block's) and `new_size` fits,
        // as GlobalAlloc::realloc requires of the caller.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, align) };
        match (was_mapped, maps(new_layout)) {
            // SAFETY: a block of mimalloc's, resized by mimalloc.
            (false, false) => unsafe { MiMalloc.realloc(block, layout, new_size) },
            // SAFETY: a mapping of ours, moved by the kernel if it must be.
            (true, true) => or_null(unsafe {
                libc::mremap(
                    block.cast(),
                    mapped(layout.size()),
                    mapped(new_size),
                    libc::MREMAP_MAYMOVE,
                )
            }),
            _ => {
                // SAFETY: a new block; the old one is copied up to the smaller size,
                // then given back the way it came.
                unsafe {
                    let moved = self.alloc(new_layout);
                    if !moved.is_null() {
                        std::ptr::copy_nonoverlapping(block, moved, layout.size().min(new_size));
                        self.dealloc(block, layout);
                    }
                    moved
                }
            }
        }
    }
}

/// Gives the memory this thread freed back to the system now: for a fork done with one
/// switch, which may wait on the next for seconds. Measured at 512 switches, 64 forks:
/// peaks of 134–145 MiB without, 122 with (before big blocks were mapped on their own).
pub fn return_this_threads_free_memory() {
    // SAFETY: mi_collect only frees what this thread's heap no longer uses.
    unsafe { libmimalloc_sys::mi_collect(true) };
}

/// mimalloc's `arena_eager_commit` option, by its index in `mi_option_e` (mimalloc v2's
/// `mimalloc.h`; the crate does not name it).
const MI_OPTION_ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;
/// mimalloc's `purge_delay` option, likewise.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

// Both sit where the options the crate does name put them: verbose (2), eager_commit,
// arena_eager_commit, purge_decommits, large_os_pages (6); eager_commit_delay (14),
// purge_delay, use_numa_nodes (16).
const _: () = assert!(
    MI_OPTION_ARENA_EAGER_COMMIT == libmimalloc_sys::mi_option_verbose + 2
        && MI_OPTION_ARENA_EAGER_COMMIT == libmimalloc_sys::mi_option_large_os_pages - 2
        && MI_OPTION_PURGE_DELAY == libmimalloc_sys::mi_option_eager_commit_delay + 1
        && MI_OPTION_PURGE_DELAY == libmimalloc_sys::mi_option_use_numa_nodes - 1
);

/// Asks mimalloc to give memory back to the system as soon
/// as it is freed, for commands whose forks wait on devices: their threads spend
/// seconds between allocations, and a delayed purge runs only when a thread allocates
/// again. Measured at 512 switches, 64 forks: 395 MiB with mimalloc's defaults, 157 MiB
/// with this and [`commit_arenas_as_they_fill`]. Other commands keep the default
/// delay, which reuses freed memory faster (an immediate purge made the 16k render
/// 0.3 s slower). To be called before any thread starts.
pub fn return_freed_memory_at_once() {
    // SAFETY: mi_option_set stores a plain value; no other thread runs yet to read it.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) };
}

/// Asks mimalloc to commit its arenas as they fill rather than at once. To be called
/// before the first allocation, when the first arena is not yet reserved: set after the
/// plan was built, the 512-switch apply above peaked at 225 MiB, not 157 (the likeliest
/// reason: the kernel backs an arena committed at once with transparent huge pages).
pub fn commit_arenas_as_they_fill() {
    // SAFETY: mi_option_set stores a plain value; it runs before main, on one thread.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_ARENA_EAGER_COMMIT, 0) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_option_indices_hold_the_defaults_of_arena_eager_commit_and_purge_delay() {
        // This test binary sets neither; each holds its documented default (2, 10 ms),
        // which the neighbours of each index (eager_commit 1, purge_decommits 1;
        // eager_commit_delay 1, use_numa_nodes 0) do not. (MIMALLOC_ARENA_EAGER_COMMIT
        // or MIMALLOC_PURGE_DELAY in the environment would change them.)
        // SAFETY: mi_option_get only reads an option.
        let (commit, delay) = unsafe {
            (
                libmimalloc_sys::mi_option_get(MI_OPTION_ARENA_EAGER_COMMIT),
                libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY),
            )
        };
        assert_eq!(commit, 2, "arena_eager_commit");
        assert_eq!(delay, 10, "purge_delay");
    }

    /// Blocks keep their bytes across every resize, between mimalloc's and mapped
    /// ones and within each, come zeroed when asked, and a big block made before the
    /// setting is still mimalloc's. (nextest runs each test in a process of its own.)
    #[test]
    fn blocks_keep_their_bytes_across_the_threshold() {
        let sizes = [
            24,
            DIRECT_BYTES - 1,
            DIRECT_BYTES,
            DIRECT_BYTES + 5,
            3 * DIRECT_BYTES + 123,
            100,
        ];
        let layout = |size| Layout::from_size_align(size, 8).unwrap();
        let fill = |block: *mut u8, size: usize| {
            for i in 0..size {
                // SAFETY: within the block's size.
                unsafe { block.add(i).write((i % 251) as u8) };
            }
        };
        // SAFETY: each block is used within its size and resized or freed with the
        // layout it has.
        unsafe {
            let early = Allocator.alloc(layout(2 * DIRECT_BYTES));
            assert!(!mapped_block(early, layout(2 * DIRECT_BYTES)));
            fill(early, 2 * DIRECT_BYTES);
            map_big_blocks_on_their_own();
            let early = Allocator.realloc(early, layout(2 * DIRECT_BYTES), 3 * DIRECT_BYTES);
            assert!(mapped_block(early, layout(3 * DIRECT_BYTES)));
            let bytes = std::slice::from_raw_parts(early, 2 * DIRECT_BYTES);
            assert!(bytes.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
            Allocator.dealloc(early, layout(3 * DIRECT_BYTES));

            let zeroed = Allocator.alloc_zeroed(layout(2 * DIRECT_BYTES));
            assert!(mapped_block(zeroed, layout(2 * DIRECT_BYTES)));
            let bytes = std::slice::from_raw_parts(zeroed, 2 * DIRECT_BYTES);
            assert!(bytes.iter().all(|&b| b == 0));
            Allocator.dealloc(zeroed, layout(2 * DIRECT_BYTES));

            let mut block = Allocator.alloc(layout(sizes[0]));
            let mut size = sizes[0];
            fill(block, size);
            for &next in &sizes[1..] {
                block = Allocator.realloc(block, layout(size), next);
                assert!(!block.is_null(), "{size} -> {next}");
                assert_eq!(mapped_block(block, layout(next)), next >= DIRECT_BYTES);
                let kept = size.min(next);
                let bytes = std::slice::from_raw_parts(block, kept);
                assert!(
                    bytes.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8),
                    "{size} -> {next}: bytes changed"
                );
                fill(block, next);
                size = next;
            }
            Allocator.dealloc(block, layout(size));
        }
    }

    #[test]
    fn big_blocks_and_over_aligned_ones_go_where_they_should() {
        assert!(!direct(DIRECT_BYTES - 1, 8));
        assert!(direct(DIRECT_BYTES, 8));
        assert!(direct(DIRECT_BYTES, PAGE_BYTES));
        // mmap cannot promise more than a page's alignment.
        assert!(!direct(DIRECT_BYTES, 2 * PAGE_BYTES));
        assert_eq!(mapped(DIRECT_BYTES + 1), DIRECT_BYTES + PAGE_BYTES);
    }
}
