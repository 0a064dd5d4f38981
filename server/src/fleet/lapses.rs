//! Leases a worker let lapse: held and never reported. A worker that pulls again while it holds
//! a lease, registers again, goes silent or runs past the hard deadline loses the piece to the
//! queue, and the piece goes to another worker first (`Piece::lapsed_on`); one that does so
//! `LAPSES_TO_QUARANTINE` times in a row without a report in between is quarantined, as a
//! device whose compiler fails is: a worker that pulls and never reports would otherwise hold
//! every piece of its pool in turn, unseen.

use std::fmt;

/// Leases in a row lapsing without a report that quarantine a worker. Not 1: an honest
/// device loses a lease now and then (a restart, a network blip longer than the grace), and
/// the piece costs only a re-measurement elsewhere. Not more than 3: each lapse of a worker
/// that heartbeats but never reports can cost a piece its hard deadline, and a pull-only loop
/// is caught after three pulls.
pub const LAPSES_TO_QUARANTINE: u32 = 3;

/// How a lease lapsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lapse {
    /// The worker pulled again while holding it (one piece at a time per device).
    RePulled,
    /// The worker registered again while holding it (it restarted, or says it did).
    Reregistered,
    /// The worker's heartbeats stopped for longer than the grace.
    Silent,
    /// The piece's hard deadline passed (a hung build, or a worker that never reports).
    PastDeadline,
}

impl fmt::Display for Lapse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Lapse::RePulled => "pulled again while holding it",
            Lapse::Reregistered => "registered again while holding it",
            Lapse::Silent => "heartbeats stopped",
            Lapse::PastDeadline => "past its hard deadline",
        })
    }
}

/// A worker's lapsed leases since its last report.
#[derive(Debug, Default, Clone)]
pub struct Lapses {
    in_a_row: u32,
}

impl Lapses {
    /// One more lease lapsed; the quarantine's reason when it makes `LAPSES_TO_QUARANTINE`.
    pub fn lapsed(&mut self, how: Lapse) -> Option<String> {
        self.in_a_row += 1;
        (self.in_a_row >= LAPSES_TO_QUARANTINE).then(|| {
            format!(
                "{} leases in a row lapsed without a report; last: {how}",
                self.in_a_row
            )
        })
    }

    /// A report came under a live lease: the worker does report.
    pub fn reported(&mut self) {
        self.in_a_row = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_third_lapse_in_a_row_names_the_quarantine() {
        let mut l = Lapses::default();
        assert_eq!(l.lapsed(Lapse::RePulled), None);
        assert_eq!(l.lapsed(Lapse::Silent), None);
        l.reported();
        assert_eq!(l.lapsed(Lapse::RePulled), None);
        assert_eq!(l.lapsed(Lapse::RePulled), None);
        let why = l.lapsed(Lapse::PastDeadline).expect("the third in a row");
        assert!(why.contains("3 leases in a row lapsed"), "{why}");
        assert!(why.contains("hard deadline"), "{why}");
    }
}
