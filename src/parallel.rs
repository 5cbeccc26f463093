//! Work over many devices or hosts, a bounded number at a time, with progress reported
//! on the calling thread as items start and finish.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, LazyLock, Mutex, mpsc};

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

/// At most `limit` holders at once (as many as the machine has CPUs, for
/// [`CpuGate::cpus`]): the computing steps of work that mostly waits on devices (a
/// switch's diff), so that their working memory follows the CPUs rather than the forks.
/// Never held across a wait on a device: that would stall the other forks.
pub struct CpuGate {
    busy: Mutex<usize>,
    freed: Condvar,
    limit: usize,
}

/// A place at the process's [`CpuGate`] for computing a device's configuration (parse,
/// diff, render) among forks that wait on devices: those working sets are the largest
/// memory of a run over many switches (a leaf's items grow with the racks), so only as
/// many at once as there are CPUs to compute them, whatever the forks.
pub fn computing() -> OnCpu<'static> {
    static GATE: LazyLock<CpuGate> = LazyLock::new(CpuGate::cpus);
    GATE.enter()
}

/// As many malloc arenas as CPUs (glibc's default is eight a CPU, created as threads
/// contend): memory one fork frees after its computing step is then reused by the next
/// fork's on the same arena, not kept idle beside it in another. Call before threads
/// start.
pub fn one_malloc_arena_per_cpu() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    // SAFETY: mallopt only sets a parameter of the allocator, under its own lock.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, i32::try_from(cpus).unwrap_or(i32::MAX));
    }
}

/// A place at a [`CpuGate`], given back when dropped.
pub struct OnCpu<'a>(&'a CpuGate);

impl CpuGate {
    pub fn new(limit: usize) -> CpuGate {
        CpuGate {
            busy: Mutex::new(0),
            freed: Condvar::new(),
            limit: limit.max(1),
        }
    }

    pub fn cpus() -> CpuGate {
        CpuGate::new(std::thread::available_parallelism().map_or(1, |n| n.get()))
    }

    /// Waits for a place.
    pub fn enter(&self) -> OnCpu<'_> {
        let mut busy = self.busy.lock().unwrap_or_else(|e| e.into_inner());
        while *busy >= self.limit {
            busy = self.freed.wait(busy).unwrap_or_else(|e| e.into_inner());
        }
        *busy += 1;
        OnCpu(self)
    }
}

impl Drop for OnCpu<'_> {
    fn drop(&mut self) {
        let mut busy = self.0.busy.lock().unwrap_or_else(|e| e.into_inner());
        *busy -= 1;
        self.0.freed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_gate_lets_in_at_most_its_limit_at_once() {
        let gate = CpuGate::new(2);
        let inside = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for _ in 0..8 {
                scope.spawn(|| {
                    let _place = gate.enter();
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(20));
                    inside.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        assert_eq!(most.load(Ordering::SeqCst), 2);
        assert_eq!(*gate.busy.lock().unwrap(), 0);
    }
}
