//! What an endpoint sends, and when: acknowledgements first, then data as the line and
//! every destination's pacer allow, with the link's time accounted.

use super::*;

impl Endpoint {
    /// The next datagram to send now, written into `buf` (at least MTU bytes): pending
    /// acknowledgements first, then class probes, then data as the pacers allow.
    pub fn poll_transmit(&mut self, now: u64, buf: &mut [u8]) -> Option<Transmit> {
        let transmit = self.next_transmit(now, buf)?;
        let wire_bytes = ETHERNET_HEADER + IP_UDP_HEADERS + transmit.len;
        self.nic.hand_over(now, wire_bytes, self.config.line_bps);
        Some(transmit)
    }

    fn next_transmit(&mut self, now: u64, buf: &mut [u8]) -> Option<Transmit> {
        self.account(now);
        if self.activity == Activity::Idle {
            self.link
                .rest(now, self.config.line_bps, self.frame_bytes());
        }
        if let Some((peer, message, sequence)) = self.acks.pop_front() {
            let header = Header {
                kind: Kind::Ack,
                flags: Flags::default(),
                job_tag: job_tag(self.config.job),
                rank: self.config.rank,
                length: 0,
                message,
                sequence,
            };
            Packet::new_unchecked(&mut buf[..HEADER_LEN]).emit(&header);
            self.counters.peers[usize::from(peer)].acks_sent += 1;
            return Some(Transmit {
                peer,
                path: 0,
                tos: tagging::tos(self.classes.control_dscp(), false),
                len: HEADER_LEN,
            });
        }
        if let Some(probe) = self.poll_class_probe(buf) {
            return Some(probe);
        }
        let frame = self.frame_bytes();
        let has_tokens = self.link.has(now, self.config.line_bps, frame);
        // Tokens the full bucket spilled while data waited for them: line time lost
        // to polling late.
        let spilled = self.link.take_spilled();
        if self.activity == Activity::Busy {
            self.counters.link.late_ns += (spilled * 8e9 / self.config.line_bps) as u64;
        }
        if !has_tokens {
            // Peers whose sends ran out leave the rotation (and rest) now, not when the
            // link next has tokens: a pause then reads as idle and ends with one batch.
            for _ in 0..self.rotation.len() {
                let peer_rank = self.rotation.pop_front()?;
                if self.next_send(peer_rank).is_some() {
                    self.rotation.push_back(peer_rank);
                } else {
                    self.peers[usize::from(peer_rank)].resting = true;
                }
            }
            self.activity = if self.rotation.is_empty() {
                Activity::Idle
            } else {
                Activity::Busy
            };
            return None;
        }
        for _ in 0..self.rotation.len() {
            let peer_rank = self.rotation.pop_front()?;
            let Some(id) = self.next_send(peer_rank) else {
                self.peers[usize::from(peer_rank)].resting = true;
                continue;
            };
            self.rotation.push_back(peer_rank);
            let peer = &mut self.peers[usize::from(peer_rank)];
            if std::mem::take(&mut peer.resting) {
                peer.pacer.rest(now, peer.timely.rate_bps(), frame);
            }
            if !peer.pacer.take(now, peer.timely.rate_bps(), frame) {
                continue;
            }
            self.link.take(now, self.config.line_bps, frame);
            self.activity = Activity::Busy;
            return Some(self.emit_data(now, (peer_rank, id), buf));
        }
        // What is left in the rotation has data its peers' pacers hold back.
        self.activity = if self.rotation.is_empty() {
            Activity::Idle
        } else {
            Activity::RateLimited
        };
        None
    }

    /// The oldest send to `peer_rank` with data to send. Sends without data (stopped,
    /// or waiting for a probe's answer) leave the peer's queue; `activate` puts them
    /// back.
    fn next_send(&mut self, peer_rank: u16) -> Option<MessageId> {
        let peer = &mut self.peers[usize::from(peer_rank)];
        while let Some(&(_, id)) = peer.queue.front() {
            if self
                .sends
                .get(&(peer_rank, id))
                .is_some_and(Outgoing::has_data)
            {
                return Some(id);
            }
            peer.queue.pop_front();
        }
        None
    }

    /// Counts the time since the last poll as what the link was doing then. A burst
    /// handed over in one poll keeps the NIC sending after the endpoint has nothing
    /// left: that time is busy too, whatever the endpoint waits for meanwhile.
    fn account(&mut self, now: u64) {
        let since = self.activity_since;
        let elapsed = now.saturating_sub(since);
        self.activity_since = now;
        let sending = match self.activity {
            Activity::Busy => elapsed,
            _ => self.nic.clear_at().clamp(since, now.max(since)) - since,
        };
        let link = &mut self.counters.link;
        link.busy_ns += sending;
        match self.activity {
            Activity::Busy => {}
            Activity::RateLimited => link.rate_limited_ns += elapsed - sending,
            Activity::Idle => link.idle_ns += elapsed - sending,
        }
    }

    /// Bytes a full data packet takes on the link.
    pub(super) fn frame_bytes(&self) -> usize {
        frame_bytes(self.payload_elems)
    }

    fn emit_data(&mut self, now: u64, key: (u16, MessageId), buf: &mut [u8]) -> Transmit {
        let payload_elems = self.payload_elems;
        let send = self.sends.get_mut(&key).expect("an active send");
        let (seq, retransmit) = match send.resend.pop_front() {
            Some(seq) => {
                send.queued[seq as usize / 64] &= !(1u64 << (seq % 64));
                (seq, true)
            }
            None => {
                send.next += 1;
                (send.next - 1, false)
            }
        };
        let first = seq as usize * payload_elems;
        let elems = send.region.len.saturating_sub(first).min(payload_elems);
        let absolute = send.region.start + first;
        let layer = match send
            .layers
            .binary_search_by(|(start, _)| start.cmp(&absolute))
        {
            Ok(i) => send.layers[i].1,
            Err(0) => 0,
            Err(i) => send.layers[i - 1].1,
        };
        let buffer = send.region.buffer.borrow();
        let values = &buffer[absolute..absolute + elems];
        let important = tagging::important(values, send.threshold);
        let mut flags = 0;
        if send.region.inexact.borrow().any(absolute..absolute + elems) {
            flags |= Flags::INEXACT;
        }
        if seq + 1 == send.packets {
            flags |= Flags::LAST;
        }
        if important {
            flags |= Flags::IMPORTANT;
        }
        if retransmit {
            flags |= Flags::RETRANSMIT;
        }
        let message = send
            .handle
            .expect("a send with data has its receiver's handle");
        let peer = &mut self.peers[usize::from(key.0)];
        let departs = self.nic.departs_at(now);
        // First-pass packets only: a retransmission's ACK could be the original's.
        if !retransmit {
            peer.since_ack_request += 1;
            if peer.since_ack_request >= self.config.rate.ack_every.max(1) {
                peer.since_ack_request = 0;
                flags |= Flags::ACK_REQUEST;
                if peer.ack_requests.len() == ACK_REQUESTS_KEPT {
                    peer.ack_requests.pop_front();
                }
                peer.ack_requests.push_back((message, seq, departs));
            }
        }
        let class = self.classes.class(layer);
        let header = Header {
            kind: Kind::Data,
            flags: Flags(flags),
            job_tag: job_tag(self.config.job),
            rank: self.config.rank,
            length: (elems * 4) as u16,
            message,
            sequence: seq,
        };
        let len = HEADER_LEN + elems * 4;
        let mut packet = Packet::new_unchecked(&mut buf[..len]);
        packet.emit(&header);
        for (out, v) in packet.payload_mut().chunks_exact_mut(4).zip(values) {
            out.copy_from_slice(&v.to_le_bytes());
        }
        drop(buffer);
        let pass_over = send.next == send.packets && send.resend.is_empty();
        if pass_over && send.probe_deadline.is_none() {
            let timely = &self.peers[usize::from(key.0)].timely;
            if retransmit {
                // Retransmissions are still on their way: probe once they have landed,
                // or the bitmap would ask for them again.
                let settle_us = timely
                    .srtt_us()
                    .unwrap_or(PROBE_FLOOR_US)
                    .max(PROBE_SETTLE_US);
                send.probe_deadline = Some(departs + (settle_us * 1_000.0) as u64);
            } else {
                let rto = timely.rto_us(PROBE_FLOOR_US);
                send.probe_deadline = Some(departs + probe_wait_ns(rto, send.unanswered));
                send.awaiting_answer = true;
                self.control.push_back((key.0, Control::Probe(key.1)));
                self.counters.probes_sent += 1;
            }
        }
        let peer = &mut self.peers[usize::from(key.0)];
        let path = peer.next_path % peer.paths;
        peer.next_path = peer.next_path.wrapping_add(1);
        let counters = &mut self.counters.peers[usize::from(key.0)];
        counters.packets_sent += 1;
        counters.bytes_sent += (elems * 4) as u64;
        if retransmit {
            counters.packets_retransmitted += 1;
        }
        let class_counters = self.counters.class(class);
        class_counters.packets_sent += 1;
        if important {
            class_counters.important_sent += 1;
        }
        Transmit {
            peer: key.0,
            path,
            tos: tagging::tos(self.classes.dscp(layer), important),
            len,
        }
    }
}
