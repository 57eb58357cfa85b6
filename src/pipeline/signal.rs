//! The signal that asked a run to stop, as the command's handlers record it in
//! [`Options::stop`](super::Options::stop): the run names it in its summary, the command
//! takes its exit code from it.

use signal_hook::consts::{SIGINT, SIGTERM};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Int,
    Term,
    Other(i32),
}

impl Signal {
    /// The signal recorded in a run's stop flag, if one came (0: none yet).
    pub fn recorded(stop: usize) -> Option<Signal> {
        match stop as i32 {
            0 => None,
            SIGINT => Some(Signal::Int),
            SIGTERM => Some(Signal::Term),
            other => Some(Signal::Other(other)),
        }
    }

    /// Its number (the exit code is 128 plus it).
    pub fn number(self) -> i32 {
        match self {
            Signal::Int => SIGINT,
            Signal::Term => SIGTERM,
            Signal::Other(number) => number,
        }
    }

    /// The signal a summary names ([`Signal::name`]): a merged run reads its shards' from disk.
    pub fn named(name: &str) -> Option<Signal> {
        match name {
            "SIGINT" => Some(Signal::Int),
            "SIGTERM" => Some(Signal::Term),
            other => other
                .strip_prefix("signal ")
                .and_then(|n| n.parse().ok())
                .map(Signal::Other),
        }
    }

    /// As the summary and the messages name it.
    pub fn name(self) -> String {
        match self {
            Signal::Int => "SIGINT".to_string(),
            Signal::Term => "SIGTERM".to_string(),
            Signal::Other(number) => format!("signal {number}"),
        }
    }
}
