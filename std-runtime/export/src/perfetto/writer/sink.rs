//! The writer as the decoder's record sink: each record becomes its packet as it arrives.

use super::*;

impl Sink for PacketWriter<'_> {
    /// The span's own track if detached, `STEP` and its track for a step, else 0 (the thread's).
    type Span = u64;

    /// Writes the process's track and its threads' tracks, each thread's as the first packet
    /// of its sequence (with the sequence's defaults), then each sequence's clock.
    fn process(&mut self, _source: &str, header: &Header) {
        self.process = self.process.wrapping_add(1);
        let p = self.process;
        self.cal = self.next_calibration.take().unwrap_or(header.calibration).converter();
        self.keys.next_process();
        self.steps.next_process();
        let part = self.parts.next().unwrap_or_default();
        self.order = part.order;
        if self.plan.apart {
            // As if this process were the first the writer met: what the files before met
            // comes from the plan.
            for i in self.touched.drain(..) {
                self.met[i as usize] = Met::default();
            }
            for (i, met) in part.met {
                self.met[i as usize] = met;
                self.touched.push(i);
            }
        }
        self.made_uuid = made_uuids(p);
        let (first_uuid, first_seq) = self.plan.firsts[p];
        self.process_track = first_uuid;
        let mut packet = first_packet(first_seq);
        let plan: &crate::process::ProcessInfo = &self.plan.processes[p];
        packet.track_descriptor = Some(process_track(&plan.header, self.plan.pids[p], self.process_track));
        self.message(&packet);
        self.seqs.clear();
        let mut queues = part.queues.into_iter();
        for t in 0..self.plan.processes[p].threads.len() {
            let (track, id) = (first_uuid + 1 + t as u64, first_seq + 1 + t as u32);
            let thread = &self.plan.processes[p].threads[t];
            let mut packet = first_packet(id);
            packet.previous_packet_dropped = (thread.dropped > 0).then_some(true);
            let ids = (self.plan.pids[p], self.plan.tids[p][t]);
            packet.track_descriptor =
                Some(crate::perfetto::track::thread_track(thread, track, self.process_track, ids));
            packet.trace_packet_defaults = Some(crate::perfetto::defaults(track));
            self.message(&packet);
            self.message(&clock_snapshot(id));
            self.seqs.push(Seq::new(id, queues.next().unwrap_or_default()));
        }
    }

    fn thread(&mut self, thread: usize, _stream: u32) {
        if thread >= self.seqs.len() && self.error.is_none() {
            self.error = Some(io::Error::other("a trace file changed while it was being exported"));
        }
    }

    fn thread_named(&mut self, _thread: usize, _tid: u64, _name: &str) {}

    #[inline(always)]
    fn span_begin(&mut self, t: usize, r: &Item<'_>) -> u64 {
        if t >= self.seqs.len() {
            return 0;
        }
        let target = self.target(t, r.id);
        if !target.is_some_and(|i| self.plan.targets[i].detached) {
            if self.steps.is_step(r) {
                return self.step_begin(t, r, target);
            }
            self.item(t, r, TYPE_SLICE_BEGIN, None, target);
            self.seqs[t].open.push(r.id);
            return 0;
        }
        let track = self.uuid();
        let packet = proto::TracePacket {
            trusted_packet_sequence_id: Some(self.seqs[t].id),
            track_descriptor: Some(proto::TrackDescriptor {
                uuid: Some(track),
                parent_uuid: Some(self.process_track),
                name: Some(r.callsite.name.to_string()),
                ..Default::default()
            }),
            ..Default::default()
        };
        self.message(&packet);
        self.item(t, r, TYPE_SLICE_BEGIN, Some(track), target);
        track
    }

    #[inline(always)]
    fn event(&mut self, t: usize, r: &Item<'_>) {
        if t >= self.seqs.len() {
            return;
        }
        let target = self.target(t, r.id);
        self.item(t, r, TYPE_INSTANT, None, target);
    }

    #[inline(always)]
    fn span_end(&mut self, t: usize, span: u64, ticks: u64, ended: bool) {
        if t >= self.seqs.len() {
            return;
        }
        if span != 0 {
            // A step, or on a track of its own yet ended on its stack: only if the two passes
            // read different records. It still ends on its own track.
            return self.off_thread_end(t, span, ticks, ended);
        }
        let ts = self.time(t, ticks);
        let seq = &mut self.seqs[t];
        seq.open.pop();
        if ended {
            self.ev.slice_end(seq.advance(ts), seq.key);
            self.drain(false);
        } else {
            self.end_packet(t, ts, None, false);
        }
    }

    fn detach(&mut self, t: usize, span: u64, id: u64) {
        // The plan knows every detached span, so it began on a track of its own. Were it on the
        // thread's track (the two passes read different records), it ends there now, where it
        // leaves the thread, rather than never.
        if span == 0 && t < self.seqs.len() && self.seqs[t].open.last() == Some(&id) {
            self.seqs[t].open.pop();
            let ts = self.seqs[t].last_ts;
            self.end_packet(t, ts, None, false);
        }
    }

    fn detached_end(&mut self, t: usize, span: u64, ticks: u64, ended: bool) {
        if t >= self.seqs.len() || span == 0 {
            return;
        }
        let ts = self.cal.to_unix_ns(ticks);
        self.seqs[t].ends.push(Reverse((ts, span, ended)));
    }

    fn finish(&mut self, _end: &FileEnd) {
        for t in 0..self.seqs.len() {
            while let Some(Reverse((ts, track, ended))) = self.seqs[t].ends.pop() {
                self.end_packet(t, ts, Some(track), ended);
            }
        }
    }
}
