//! Resource limits of a program ([`Limits`]), how they are applied (a `/bin/sh` prelude of
//! `ulimit` commands), and which one a finished program ran into ([`LimitExceeded`]), so a
//! tool can name it in its error.

use std::time::Duration;

use super::exit::Exit;

/// `SIGXCPU`: what the kernel sends a process at its CPU time limit.
const SIGXCPU: i32 = 24;

/// Resource limits of a program, applied with `ulimit` by a `/bin/sh` prelude; each is
/// inherited by the processes it starts. In a sandbox ([`crate::sandbox`]) every field has a
/// default the program's own value replaces.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    /// CPU time in seconds of each process (`ulimit -t`): the kernel stops a process that
    /// uses more (`SIGXCPU`).
    pub cpu_secs: Option<u64>,
    /// Address space in bytes of each process (`ulimit -v`): allocations beyond it fail.
    pub memory_bytes: Option<u64>,
    /// Processes (`ulimit -u`, `-p` in dash). The kernel counts every process of the user in
    /// its user namespace: outside a sandbox that is every process of the server's user, so
    /// set it above what the user already runs; in a sandbox, only the sandbox's own.
    pub processes: Option<u64>,
}

impl Limits {
    pub(crate) fn is_empty(&self) -> bool {
        *self == Limits::default()
    }

    /// These limits where set, else `defaults`'.
    pub(crate) fn or(self, defaults: Limits) -> Limits {
        Limits {
            cpu_secs: self.cpu_secs.or(defaults.cpu_secs),
            memory_bytes: self.memory_bytes.or(defaults.memory_bytes),
            processes: self.processes.or(defaults.processes),
        }
    }

    /// The `ulimit` commands, each failing the prelude (exit 126) if it cannot be applied. The
    /// CPU limit's hard limit is a second above the soft one, so a process over it gets
    /// `SIGXCPU` (which names the cause) rather than a bare `SIGKILL`. `extra_processes` are
    /// counted in the process limit without being the program's (a sandbox's init).
    pub(crate) fn prelude(&self, extra_processes: u64) -> String {
        let cpu = self.cpu_secs.map(|t| t.max(1));
        let cpu = cpu.map(|t| format!("ulimit -S -t {t} && ulimit -H -t {}", t + 1));
        let memory = self.memory_bytes.map(|m| (m / 1024).max(1));
        let memory = memory.map(|kib| format!("ulimit -v {kib}"));
        let processes = self.processes.map(|p| p.max(1) + extra_processes);
        let processes =
            processes.map(|p| format!("{{ ulimit -u {p} 2>/dev/null || ulimit -p {p}; }}"));
        let commands = [cpu, memory, processes].into_iter().flatten();
        commands.map(|c| format!("{c} || exit 126; ")).collect()
    }
}

/// A limit a program ran into; its `Display` names the limit and its value, for the tool's
/// error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LimitExceeded {
    /// It ran past its wall-clock time limit and was stopped.
    #[error("the time limit of {}", secs(*.0))]
    Time(Duration),
    /// A process used up its CPU time (seconds).
    #[error("the CPU time limit of {0} s per process")]
    Cpu(u64),
    /// An allocation failed at the address-space limit (bytes per process).
    #[error("the memory limit of {} of address space per process", bytes(*.0))]
    Memory(u64),
    /// Starting a process failed at the process limit.
    #[error("the process limit of {0} processes")]
    Processes(u64),
    /// A write failed: a writable mount of the sandbox (bytes each) is full.
    #[error("the disk limit of {} (each of the workspace, /tmp and /dev/shm)", bytes(*.0))]
    Disk(u64),
    /// It printed more than is kept (bytes per stream); the rest was dropped.
    #[error("the output limit of {} per stream (the rest was dropped)", bytes(*.0 as u64))]
    Output(usize),
}

/// What a finished program's limits were, for [`detect`].
pub(crate) struct Applied {
    pub(crate) timeout: Option<Duration>,
    pub(crate) limits: Limits,
    /// The sandbox's disk size, when it ran in one.
    pub(crate) disk: Option<u64>,
    pub(crate) max_output: usize,
}

/// The limit a finished program ran into, if any: the time limit and output caps from what
/// happened, the CPU limit from `SIGXCPU`, and memory, processes and disk from the errors the
/// kernel's refusal makes programs print (an allocation, a `fork` or a write that failed).
/// The first that applies, in that order.
pub(crate) fn detect(
    exit: Exit,
    stderr: &str,
    truncated: bool,
    applied: &Applied,
) -> Option<LimitExceeded> {
    if exit == Exit::TimedOut {
        return applied.timeout.map(LimitExceeded::Time);
    }
    let l = &applied.limits;
    let says = |needles: &[&str]| needles.iter().any(|n| stderr.contains(n));
    let cpu = l.cpu_secs.filter(|_| {
        // A shell that ran the process (not exec'd into it) exits 128 + SIGXCPU.
        exit == Exit::Signal(SIGXCPU)
            || exit == Exit::Code(128 + SIGXCPU)
            || says(&["CPU time limit exceeded"])
    });
    let memory = || l.memory_bytes.filter(|_| says(OUT_OF_MEMORY));
    let processes = || l.processes.filter(|_| says(NO_PROCESS));
    let disk = || applied.disk.filter(|_| says(NO_SPACE));
    cpu.map(LimitExceeded::Cpu)
        .or_else(|| memory().map(LimitExceeded::Memory))
        .or_else(|| processes().map(LimitExceeded::Processes))
        .or_else(|| disk().map(LimitExceeded::Disk))
        .or_else(|| truncated.then_some(LimitExceeded::Output(applied.max_output)))
}

/// What programs print when the kernel refuses them memory (at the address-space limit).
const OUT_OF_MEMORY: &[&str] = &[
    "MemoryError",
    "Cannot allocate memory",
    "std::bad_alloc",
    "out of memory",
    "memory exhausted",
    "memory allocation of",
];

/// What programs print when the kernel refuses them a process (at the process limit).
const NO_PROCESS: &[&str] = &[
    "Cannot fork",
    "can't fork",
    "fork: retry",
    "fork: Resource temporarily unavailable",
    "BlockingIOError",
    "Resource temporarily unavailable",
];

/// What programs print when a write fails on a full mount.
const NO_SPACE: &[&str] = &["No space left on device", "Errno 28"];

/// `64 KiB`, `2 GiB`, `100 B`.
pub(crate) fn bytes(n: u64) -> String {
    const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (unit, size) in UNITS {
        if n >= size && n % size == 0 {
            return format!("{} {unit}", n / size);
        }
    }
    for (unit, size) in UNITS {
        if n >= size {
            return format!("{:.1} {unit}", n as f64 / size as f64);
        }
    }
    format!("{n} B")
}

/// `10 s`, `1.5 s`.
fn secs(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn applied(limits: Limits) -> Applied {
        Applied {
            timeout: Some(Duration::from_secs(10)),
            limits,
            disk: Some(64 << 20),
            max_output: 64 * 1024,
        }
    }

    #[test]
    fn each_limit_is_named_from_what_happened() {
        let all = Limits {
            cpu_secs: Some(5),
            memory_bytes: Some(1 << 30),
            processes: Some(64),
        };
        let a = applied(all);
        let d = |exit, err: &str, cut| detect(exit, err, cut, &a).map(|l| l.to_string());
        assert_eq!(
            d(Exit::TimedOut, "", false).as_deref(),
            Some("the time limit of 10 s")
        );
        assert_eq!(
            d(Exit::Signal(24), "", false).as_deref(),
            Some("the CPU time limit of 5 s per process")
        );
        assert_eq!(
            d(Exit::Code(1), "MemoryError\n", false).as_deref(),
            Some("the memory limit of 1 GiB of address space per process")
        );
        assert_eq!(
            d(Exit::Code(2), "sh: 1: Cannot fork\n", false).as_deref(),
            Some("the process limit of 64 processes")
        );
        assert_eq!(
            d(
                Exit::Code(1),
                "cat: write error: No space left on device",
                false
            )
            .as_deref(),
            Some("the disk limit of 64 MiB (each of the workspace, /tmp and /dev/shm)")
        );
        assert_eq!(
            d(Exit::Code(0), "", true).as_deref(),
            Some("the output limit of 64 KiB per stream (the rest was dropped)")
        );
        assert_eq!(d(Exit::Code(0), "fine", false), None);
        // Without a memory limit, a program's own "out of memory" names no limit of ours.
        let none = applied(Limits::default());
        assert_eq!(detect(Exit::Code(1), "MemoryError", false, &none), None);
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(bytes(64 * 1024), "64 KiB");
        assert_eq!(bytes(2 << 30), "2 GiB");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(100), "100 B");
    }

    #[test]
    fn the_prelude_sets_each_limit_or_fails() {
        let l = Limits {
            cpu_secs: Some(3),
            memory_bytes: Some(1 << 20),
            processes: Some(10),
        };
        assert_eq!(
            l.prelude(1),
            "ulimit -S -t 3 && ulimit -H -t 4 || exit 126; ulimit -v 1024 || exit 126; \
             { ulimit -u 11 2>/dev/null || ulimit -p 11; } || exit 126; "
        );
        assert_eq!(Limits::default().prelude(0), "");
    }
}
