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
/// [`CpuGate::cpus`]), let in in the order they came: the computing steps of work that
/// mostly waits on devices (a switch's diff), so that their working memory follows the
/// CPUs rather than the forks. Never held across a wait on a device: that would stall
/// the other forks. First come, first in: a switch's check after its commit, with its
/// revert timer running, is not overtaken by diffs that came later.
struct CpuGate {
    turns: Mutex<Turns>,
    moved: Condvar,
    limit: u64,
}

struct Turns {
    /// Tickets given out: the next comer's is this.
    given: u64,
    /// Places given back.
    left: u64,
}

/// A place at a [`CpuGate`], given back when dropped.
struct OnCpu<'a>(&'a CpuGate);

impl CpuGate {
    fn new(limit: usize) -> CpuGate {
        CpuGate {
            turns: Mutex::new(Turns { given: 0, left: 0 }),
            moved: Condvar::new(),
            limit: limit.max(1) as u64,
        }
    }

    fn cpus() -> CpuGate {
        CpuGate::new(std::thread::available_parallelism().map_or(1, |n| n.get()))
    }

    /// Waits for a place: ticket `t` goes in once all but `limit - 1` of the tickets
    /// before it have left.
    fn enter(&self) -> OnCpu<'_> {
        let mut turns = self.turns.lock().unwrap_or_else(|e| e.into_inner());
        let ticket = turns.given;
        turns.given += 1;
        while ticket >= turns.left + self.limit {
            turns = self.moved.wait(turns).unwrap_or_else(|e| e.into_inner());
        }
        OnCpu(self)
    }
}

impl Drop for OnCpu<'_> {
    fn drop(&mut self) {
        let mut turns = self.0.turns.lock().unwrap_or_else(|e| e.into_inner());
        turns.left += 1;
        self.0.moved.notify_all();
    }
}

/// Runs `work` — computing a device's configuration (parse, diff, render) among forks
/// that wait on devices — once a CPU is free for it: those working sets are the largest
/// memory of a run over many switches (a leaf's items grow with the racks), so only as
/// many at once as there are CPUs to compute them, whatever the forks. `work` must not
/// wait on a device.
pub fn on_a_cpu<R>(work: impl FnOnce() -> R) -> R {
    static GATE: LazyLock<CpuGate> = LazyLock::new(CpuGate::cpus);
    let _place = GATE.enter();
    work()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// Waits until `gate` has given out `tickets` tickets.
    fn until_given(gate: &CpuGate, tickets: u64) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while gate.turns.lock().unwrap().given < tickets {
            assert!(Instant::now() < deadline, "no one came to the gate");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn a_gate_holds_the_one_over_its_limit_until_a_place_is_given_back() {
        let gate = CpuGate::new(2);
        let first = gate.enter();
        let second = gate.enter();
        let inside = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let _place = gate.enter();
                inside.store(true, Ordering::SeqCst);
            });
            until_given(&gate, 3);
            std::thread::sleep(Duration::from_millis(50));
            assert!(
                !inside.load(Ordering::SeqCst),
                "a third got in past a limit of 2"
            );
            drop(first);
        });
        assert!(inside.load(Ordering::SeqCst));
        drop(second);
        let turns = gate.turns.lock().unwrap();
        assert_eq!((turns.given, turns.left), (3, 3));
    }

    #[test]
    fn a_gate_lets_in_in_the_order_they_came() {
        let gate = CpuGate::new(1);
        let held = gate.enter();
        let order = Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            for comer in 0..4u64 {
                let (gate, order) = (&gate, &order);
                scope.spawn(move || {
                    let _place = gate.enter();
                    order.lock().unwrap().push(comer);
                });
                until_given(gate, comer + 2);
            }
            drop(held);
        });
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3]);
    }
}
