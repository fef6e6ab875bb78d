//! How a program ended ([`Exit`]): below the limits, which read it to name the one a program
//! ran into, and the runs that report it.

/// How a program ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this code.
    Code(i32),
    /// A signal ended it (for example 9 after exceeding a CPU limit, 24 for `SIGXCPU`).
    Signal(i32),
    /// It ran past its timeout and its process group was killed.
    TimedOut,
    /// The call was cancelled (session deleted, server shutdown) and its group was killed.
    Cancelled,
}
