//! SIGINT and SIGTERM during a run that changes devices. The first signal asks the run
//! to stop at the next safe point: no new device is started, a staged change is
//! discarded and a committed one rolled back (the journal says which). A second signal
//! ends the process at once; a switch with a revert timer then undoes an unconfirmed
//! change by itself, as its journal entry (`pending`) says.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::flag;

/// The exit code of a run cut short by a signal (128 + SIGINT, as shells report it).
pub const EXIT_CODE: u8 = 130;

static REQUESTED: OnceLock<Arc<AtomicBool>> = OnceLock::new();
static INSTALLED: Mutex<bool> = Mutex::new(false);

/// Starts watching for SIGINT and SIGTERM; once per process, however often called (a
/// second pair of handlers would end the process at the first signal).
pub fn install() -> io::Result<()> {
    let mut installed = INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
    if *installed {
        return Ok(());
    }
    let requested = REQUESTED.get_or_init(|| Arc::new(AtomicBool::new(false)));
    for signal in [SIGINT, SIGTERM] {
        // Registered first, so that it sees the flag as the previous signal left it.
        flag::register_conditional_shutdown(signal, i32::from(EXIT_CODE), requested.clone())?;
        flag::register(signal, requested.clone())?;
    }
    *installed = true;
    Ok(())
}

/// Whether a signal asked the run to stop.
pub fn requested() -> bool {
    REQUESTED
        .get()
        .is_some_and(|flag| flag.load(Ordering::Relaxed))
}
