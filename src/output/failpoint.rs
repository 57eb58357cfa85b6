//! Test hooks: `ROLLOVER_FAILPOINT` stops a run at a point a test chooses, so that the kill,
//! interrupt and failure tests prove what they claim without timing a process. Read once; a
//! call costs one atomic load otherwise. The stages: `reader`, `prefetch`, `plan`, `convert`,
//! `placed` (a rollout placed), `journal` (a manifest journal line written), `prune` (a
//! session pruned).

/// Test hook: `ROLLOVER_FAILPOINT=STAGE` makes that stage panic, so the tests can prove that
/// a failing thread fails the run (exit 2, the stage named) instead of ending it early with a
/// summary that looks complete; `ROLLOVER_FAILPOINT=sigterm-at:STAGE:N` sends the process
/// SIGTERM at that stage's N-th call, and says on stderr of every call after it that the stage
/// went on (`failpoint STAGE reached after SIGTERM`), so that a test proves a loop stops at
/// once without timing it. `ROLLOVER_FAILPOINT=die-after:N` sends the process
/// SIGKILL once the writers have placed N rollouts (`kill -9`: no destructor, flush or cleanup
/// runs) and `sigint-after:N` sends it SIGINT there, so that the kill and interrupt tests stop a
/// run at a point they choose instead of polling its output (`sigint-twice-after:N` sends a
/// second SIGINT 300 ms after the first, as a person pressing Ctrl-C again). Read once; costs one atomic load
/// per call otherwise. `die-at:STAGE:N` sends SIGKILL at that stage's N-th call.
pub fn hit(stage: &str) {
    static FAILPOINT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    static PLACED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let armed = FAILPOINT.get_or_init(|| std::env::var("ROLLOVER_FAILPOINT").ok());
    let Some(armed) = armed.as_deref() else {
        return;
    };
    if armed == stage {
        panic!("failpoint `{stage}` reached (ROLLOVER_FAILPOINT)");
    }
    let at_call = armed
        .strip_prefix("sigterm-at:")
        .and_then(|rest| rest.split_once(':'))
        .filter(|(named, _)| *named == stage)
        .and_then(|(_, n)| n.parse::<u64>().ok());
    if let Some(n) = at_call {
        static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        if call == n && signal_hook::low_level::raise(signal_hook::consts::SIGTERM).is_err() {
            panic!("failpoint `{armed}`: cannot send the signal");
        }
        if call > n {
            eprintln!("failpoint {stage} reached after SIGTERM");
        }
    }
    // `die-at:STAGE:N`: SIGKILL at the stage's N-th call (a journal line, a prune's removal).
    let die_at = armed
        .strip_prefix("die-at:")
        .and_then(|rest| rest.rsplit_once(':'))
        .filter(|(named, _)| *named == stage)
        .and_then(|(_, n)| n.parse::<u64>().ok());
    if let Some(n) = die_at {
        static DIE_CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let call = DIE_CALLS.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        if call == n && signal_hook::low_level::raise(signal_hook::consts::SIGKILL).is_err() {
            panic!("failpoint `{armed}`: cannot send the signal");
        }
    }
    let after = |prefix: &str| armed.strip_prefix(prefix)?.parse::<u64>().ok();
    let signal = match (
        after("die-after:"),
        after("sigint-after:"),
        after("sigint-twice-after:"),
    ) {
        (Some(n), _, _) => Some((n, signal_hook::consts::SIGKILL, false)),
        (None, Some(n), _) => Some((n, signal_hook::consts::SIGINT, false)),
        (None, None, Some(n)) => Some((n, signal_hook::consts::SIGINT, true)),
        (None, None, None) => None,
    };
    if let (Some((n, signal, twice)), "placed") = (signal, stage) {
        // Counted over every writer thread: the one that places the N-th rollout signals.
        let placed = PLACED.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        if placed == n && signal_hook::low_level::raise(signal).is_err() {
            panic!("failpoint `{armed}`: cannot send the signal");
        }
        // A person's second Ctrl-C: well after the first was seen, with the batch in flight.
        if placed == n && twice {
            std::thread::sleep(std::time::Duration::from_millis(300));
            if signal_hook::low_level::raise(signal).is_err() {
                panic!("failpoint `{armed}`: cannot send the signal");
            }
        }
    }
}
