//! Work over many devices or hosts, a bounded number at a time, with progress reported
//! on the calling thread as items start and finish.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

/// Progress of a run: the index (into the items) of what started or finished. A
/// finished item's result may be trimmed before it is kept.
pub enum Progress<'a, R> {
    Started(usize),
    Finished(usize, &'a mut R),
}

/// Runs `work` on every item, `forks` at a time, and calls `on_progress` on this thread
/// as items start and finish. Results come back in item order.
pub fn run<T: Sync, R: Send>(
    items: &[T],
    forks: usize,
    work: impl Fn(&T) -> R + Sync,
    on_progress: &mut dyn FnMut(Progress<'_, R>),
) -> Vec<R> {
    enum Event<R> {
        Started(usize),
        Finished(usize, R),
    }
    let next = AtomicUsize::new(0);
    let (tx, rx) = mpsc::channel::<Event<R>>();
    let mut results: Vec<Option<R>> = (0..items.len()).map(|_| None).collect();
    std::thread::scope(|scope| {
        for _ in 0..forks.clamp(1, items.len().max(1)) {
            let tx = tx.clone();
            let (next, work) = (&next, &work);
            scope.spawn(move || {
                loop {
                    let slot = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(slot) else {
                        break;
                    };
                    if tx.send(Event::Started(slot)).is_err() {
                        break;
                    }
                    if tx.send(Event::Finished(slot, work(item))).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        for event in rx {
            match event {
                Event::Started(slot) => on_progress(Progress::Started(slot)),
                Event::Finished(slot, mut result) => {
                    on_progress(Progress::Finished(slot, &mut result));
                    results[slot] = Some(result);
                }
            }
        }
    });
    results.into_iter().flatten().collect()
}
