//! Collectives as schedules of transfers: which chunk goes to whom, into what, after
//! which other transfer. Pure functions of the group, so every rank derives the same
//! schedule.
//!
//! - **Ring** (reduce-scatter then all-gather, 2(g−1) steps): at reduce-scatter step s
//!   member i sends chunk i−s to the next member and adds chunk i−s−1 from the previous
//!   one; at all-gather step t it sends chunk i+1−t and copies chunk i−t. Each send
//!   waits for the receive of the step before it.
//! - **Sharded** (transpose allreduce, and the parameter server): shard k of the
//!   servers' count belongs to server k. Every member sends each shard to its server
//!   (step 0), a server adds what it receives into its shard, then sends the reduced
//!   shard to every member (step 1), who copy it in. Transpose allreduce is the case
//!   where every member is a server (OptiReduce's two rounds of all-to-all).
//!
//! Every receive is posted when the collective starts, so data never arrives to no
//! buffer: the rendezvous READY goes out at once and each sender starts when its
//! dependency allows.

use crate::proto::Place;

/// One transfer of a collective.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transfer {
    pub direction: Direction,
    pub peer: u16,
    pub step: u16,
    /// Element range of the tensor.
    pub start: usize,
    pub len: usize,
    pub place: Place,
    /// Transfers (indices into the schedule) that must be done before this one starts.
    pub after: Vec<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    Send,
    Recv,
}

/// Start of chunk `k` of `n` over `len` elements (chunk sizes differ by at most one).
pub fn chunk(len: usize, n: usize, k: usize) -> (usize, usize) {
    let start = k * len / n;
    let end = (k + 1) * len / n;
    (start, end - start)
}

/// The ring allreduce of `len` elements for member `me` of `group`.
pub fn ring(group: &[u16], me: usize, len: usize) -> Vec<Transfer> {
    let g = group.len();
    if g < 2 {
        return Vec::new();
    }
    let next = group[(me + 1) % g];
    let prev = group[(me + g - 1) % g];
    let at = |i: isize| i.rem_euclid(g as isize) as usize;
    let mut schedule = Vec::new();
    let mut last_recv: Option<usize> = None;
    for s in 0..2 * (g - 1) {
        let (send_chunk, recv_chunk, place) = if s < g - 1 {
            (
                at(me as isize - s as isize),
                at(me as isize - s as isize - 1),
                Place::Add,
            )
        } else {
            let t = (s - (g - 1)) as isize;
            (at(me as isize + 1 - t), at(me as isize - t), Place::Copy)
        };
        let (start, len_send) = chunk(len, g, send_chunk);
        schedule.push(Transfer {
            direction: Direction::Send,
            peer: next,
            step: s as u16,
            start,
            len: len_send,
            place: Place::Copy,
            after: last_recv.into_iter().collect(),
        });
        let (start, len_recv) = chunk(len, g, recv_chunk);
        schedule.push(Transfer {
            direction: Direction::Recv,
            peer: prev,
            step: s as u16,
            start,
            len: len_recv,
            place,
            after: Vec::new(),
        });
        last_recv = Some(schedule.len() - 1);
    }
    schedule
}

/// How many pieces to cut a schedule's transfers into: about `slice_elems` values
/// each, at most `max_slices`, and few enough that every piece's step number stays
/// below `step_limit`.
pub fn slices(
    schedule: &[Transfer],
    slice_elems: usize,
    max_slices: usize,
    step_limit: u16,
) -> usize {
    let longest = schedule.iter().map(|t| t.len).max().unwrap_or(0);
    let steps = schedule
        .iter()
        .map(|t| usize::from(t.step) + 1)
        .max()
        .unwrap_or(1);
    let by_step = usize::from(step_limit) / steps;
    (longest / slice_elems.max(1))
        .clamp(1, max_slices)
        .min(by_step.max(1))
}

/// Cuts every transfer into `slices` pieces, piece j of a transfer depending on piece
/// j of each of its dependencies (which cover the same values): the pipelined
/// collective. A step's first pieces arrive early, so the next step starts while the
/// rest of this one is still on the wire. Piece j of step s is step s·slices + j.
pub fn pipelined(schedule: Vec<Transfer>, slices: usize) -> Vec<Transfer> {
    if slices <= 1 {
        return schedule;
    }
    let mut pieces = Vec::with_capacity(schedule.len() * slices);
    for t in &schedule {
        debug_assert!(t.after.iter().all(|&a| schedule[a].len == t.len));
        for j in 0..slices {
            let (offset, len) = chunk(t.len, slices, j);
            pieces.push(Transfer {
                direction: t.direction,
                peer: t.peer,
                step: t.step * slices as u16 + j as u16,
                start: t.start + offset,
                len,
                place: t.place,
                after: t.after.iter().map(|&a| a * slices + j).collect(),
            });
        }
    }
    pieces
}

/// The sharded allreduce of `len` elements for member `me` of `group`, with shards on
/// `servers` (a subset of the group, in order).
pub fn sharded(group: &[u16], servers: &[u16], me: usize, len: usize) -> Vec<Transfer> {
    let my_rank = group[me];
    let n = servers.len();
    let mut schedule = Vec::new();
    let my_shard = servers.iter().position(|&s| s == my_rank);
    let mut phase_one_recvs = Vec::new();
    for (k, &server) in servers.iter().enumerate() {
        let (start, shard_len) = chunk(len, n, k);
        if server != my_rank {
            schedule.push(Transfer {
                direction: Direction::Send,
                peer: server,
                step: 0,
                start,
                len: shard_len,
                place: Place::Copy,
                after: Vec::new(),
            });
            schedule.push(Transfer {
                direction: Direction::Recv,
                peer: server,
                step: 1,
                start,
                len: shard_len,
                place: Place::Copy,
                after: Vec::new(),
            });
        }
    }
    if let Some(k) = my_shard {
        let (start, shard_len) = chunk(len, n, k);
        for &member in group.iter().filter(|&&m| m != my_rank) {
            schedule.push(Transfer {
                direction: Direction::Recv,
                peer: member,
                step: 0,
                start,
                len: shard_len,
                place: Place::Add,
                after: Vec::new(),
            });
            phase_one_recvs.push(schedule.len() - 1);
        }
        for &member in group.iter().filter(|&&m| m != my_rank) {
            schedule.push(Transfer {
                direction: Direction::Send,
                peer: member,
                step: 1,
                start,
                len: shard_len,
                place: Place::Copy,
                after: phase_one_recvs.clone(),
            });
        }
    }
    schedule
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs schedules of every member on plain numbers, delivering everything, and
    /// returns each member's result.
    fn simulate(schedules: &[Vec<Transfer>], group: &[u16], inputs: &[Vec<f64>]) -> Vec<Vec<f64>> {
        let mut data: Vec<Vec<f64>> = inputs.to_vec();
        let g = group.len();
        let mut done = vec![vec![false; 0]; g];
        for (i, s) in schedules.iter().enumerate() {
            done[i] = vec![false; s.len()];
        }
        // Sends carry a snapshot taken when they start; receives apply it.
        loop {
            let mut progressed = false;
            for i in 0..g {
                for t in 0..schedules[i].len() {
                    let tr = &schedules[i][t];
                    if done[i][t] || tr.direction != Direction::Send {
                        continue;
                    }
                    if !tr.after.iter().all(|&a| done[i][a]) {
                        continue;
                    }
                    let j = group.iter().position(|&r| r == tr.peer).unwrap();
                    let Some(rt) = schedules[j].iter().position(|r| {
                        r.direction == Direction::Recv && r.peer == group[i] && r.step == tr.step
                    }) else {
                        panic!("no matching receive")
                    };
                    let recv = schedules[j][rt].clone();
                    assert_eq!((recv.start, recv.len), (tr.start, tr.len));
                    let values: Vec<f64> = data[i][tr.start..tr.start + tr.len].to_vec();
                    for (k, v) in values.into_iter().enumerate() {
                        let slot = &mut data[j][recv.start + k];
                        match recv.place {
                            Place::Add => *slot += v,
                            Place::Copy => *slot = v,
                        }
                    }
                    done[i][t] = true;
                    done[j][rt] = true;
                    progressed = true;
                }
            }
            if !progressed {
                break;
            }
        }
        assert!(
            done.iter().all(|d| d.iter().all(|&x| x)),
            "every transfer ran"
        );
        data
    }

    fn check(schedule_of: impl Fn(&[u16], usize) -> Vec<Transfer>, group: &[u16], len: usize) {
        let inputs: Vec<Vec<f64>> = (0..group.len())
            .map(|i| {
                (0..len)
                    .map(|k| (1u64 << i) as f64 + k as f64 * 1000.0)
                    .collect()
            })
            .collect();
        let expected: Vec<f64> = (0..len)
            .map(|k| inputs.iter().map(|v| v[k]).sum())
            .collect();
        let schedules: Vec<Vec<Transfer>> =
            (0..group.len()).map(|i| schedule_of(group, i)).collect();
        for result in simulate(&schedules, group, &inputs) {
            assert_eq!(result, expected);
        }
    }

    #[test]
    fn ring_and_sharded_schedules_sum_everything_everywhere() {
        for g in 2..7u16 {
            let group: Vec<u16> = (0..g).map(|r| r * 2 + 1).collect();
            for len in [1, g as usize, 37, 1000] {
                check(|grp, i| ring(grp, i, len), &group, len);
                check(|grp, i| sharded(grp, grp, i, len), &group, len);
                let servers: Vec<u16> = group.iter().copied().take(2).collect();
                check(|grp, i| sharded(grp, &servers, i, len), &group, len);
                for slices in [2, 3] {
                    check(|grp, i| pipelined(ring(grp, i, len), slices), &group, len);
                    check(
                        |grp, i| pipelined(sharded(grp, grp, i, len), slices),
                        &group,
                        len,
                    );
                }
            }
        }
    }

    #[test]
    fn pieces_cover_each_transfer_and_keep_steps_apart() {
        let group = [0, 1, 2, 3];
        let whole = ring(&group, 1, 1000);
        let pieces = pipelined(whole.clone(), 4);
        assert_eq!(pieces.len(), whole.len() * 4);
        for (i, t) in whole.iter().enumerate() {
            let mine = &pieces[i * 4..i * 4 + 4];
            assert_eq!(mine.iter().map(|p| p.len).sum::<usize>(), t.len);
            assert_eq!(mine[0].start, t.start);
            let steps: Vec<u16> = mine.iter().map(|p| p.step).collect();
            assert_eq!(steps, (0..4).map(|j| t.step * 4 + j).collect::<Vec<_>>());
        }
        // 64 MiB of f32 over 4 ranks in 1 MiB pieces: 16 MiB chunks, capped at 8.
        assert_eq!(slices(&whole, 1000, 8, u16::MAX - 1), 1);
        let big = ring(&group, 1, 16 << 20);
        assert_eq!(slices(&big, 1 << 18, 8, u16::MAX - 1), 8);
        assert_eq!(
            slices(&big, 1 << 18, 8, 12),
            2,
            "6 steps, step numbers below 12"
        );
    }

    #[test]
    fn chunks_cover_the_range_once() {
        for len in [0, 1, 5, 100] {
            for n in 1..6 {
                let mut next = 0;
                for k in 0..n {
                    let (start, l) = chunk(len, n, k);
                    assert_eq!(start, next);
                    next = start + l;
                }
                assert_eq!(next, len);
            }
        }
    }
}
