//! The C ABI (`include/mlt.h`): MLT §5.1's asynchronous post and poll interface for
//! frameworks written in C or C++.
//!
//! A send's values are copied when it is posted. A receive or an allreduce writes its
//! result into the caller's buffer when its completion is polled, so that buffer must
//! stay valid and untouched until then (as MLT's buffers are shared with the library
//! until completion). Every function is safe to call with a null transport (it fails);
//! errors leave a message for `mlt_last_error` on the calling thread.
//!
//! Threads: every function but `mlt_stop` may be called on one transport from several
//! threads at once. Posts take turns on one lock; waiting for a completion takes another
//! (so a thread waiting in `mlt_wait_cq` never holds up a posting one), and the first
//! only to write the result into its buffer. `mlt_stop` must be the last call on a
//! transport, made once no other call on it is under way.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{CStr, CString, c_char};
use std::sync::Mutex;
use std::sync::mpsc::Receiver;
use std::time::Duration;

use crate::transport::Finished;
use crate::{Options, Transport};
use endhost_core::collective::{Done, OpError};
use endhost_core::config::TransportConfig;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_error(message: impl std::fmt::Display) {
    let text = CString::new(message.to_string().replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = text);
}

/// A running transport, opaque to C.
pub struct MltTransport {
    runtime: tokio::runtime::Runtime,
    /// Posts, one caller at a time.
    state: Mutex<State>,
    /// Completions, one waiter at a time.
    completions: Mutex<Receiver<Finished>>,
}

struct State {
    transport: Option<Transport>,
    /// Where the result of each posted receive or allreduce goes.
    outputs: HashMap<u64, (*mut f32, usize)>,
}

// SAFETY: the output pointers are the caller's buffers, which the caller keeps valid
// until their completion is polled (whichever thread polls); everything else is
// behind the lock.
unsafe impl Send for State {}

/// A completion, as C sees it.
#[repr(C)]
pub struct MltCompletion {
    pub op: u64,
    /// 0: done; -1: failed (see `error`).
    pub status: i32,
    /// Fraction of the values that arrived (1 for sends).
    pub delivered: f64,
    /// Fraction of the result's values no loss reached (1 for sends).
    pub exact: f64,
    pub elapsed_ns: u64,
    pub error: [c_char; 256],
}

/// Starts a transport from a host configuration (JSON, as `mltctl plan --host` prints
/// it), waiting up to `connect_timeout_ms` for every peer. NULL on failure.
///
/// # Safety
/// `config_json` is a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlt_start(
    config_json: *const c_char,
    connect_timeout_ms: u32,
) -> *mut MltTransport {
    if config_json.is_null() {
        set_error("mlt_start: no configuration");
        return std::ptr::null_mut();
    }
    // SAFETY: the caller passes a NUL-terminated string.
    let text = unsafe { CStr::from_ptr(config_json) }.to_string_lossy();
    let config: TransportConfig = match serde_json::from_str(&text) {
        Ok(c) => c,
        Err(e) => {
            set_error(format!("mlt_start: not a host configuration: {e}"));
            return std::ptr::null_mut();
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            set_error(format!("mlt_start: {e}"));
            return std::ptr::null_mut();
        }
    };
    let options = Options {
        connect_timeout: Duration::from_millis(u64::from(connect_timeout_ms)),
        bind: None,
    };
    match runtime.block_on(Transport::start(config, options)) {
        Ok(mut transport) => Box::into_raw(Box::new(MltTransport {
            runtime,
            completions: Mutex::new(transport.take_completions()),
            state: Mutex::new(State {
                transport: Some(transport),
                outputs: HashMap::new(),
            }),
        })),
        Err(e) => {
            set_error(format!("mlt_start: {e}"));
            std::ptr::null_mut()
        }
    }
}

/// The last error on this thread, or "".
#[unsafe(no_mangle)]
pub extern "C" fn mlt_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

fn with<R>(t: *mut MltTransport, f: impl FnOnce(&mut State) -> Result<R, String>) -> Option<R> {
    if t.is_null() {
        set_error("no transport");
        return None;
    }
    // SAFETY: the caller passes a pointer from mlt_start that was not stopped; shared
    // access only, the state behind the lock.
    let t = unsafe { &*t };
    // A caller that panicked mid-call left nothing half-done that matters here.
    let mut state = t.state.lock().unwrap_or_else(|e| e.into_inner());
    f(&mut state).map_err(set_error).ok()
}

/// The caller's `len` floats at `data`, copied; `None` (and the error set) when `data`
/// is null but `len` is not 0.
///
/// # Safety
/// `data` points to `len` readable floats, or `len` is 0.
unsafe fn copy_in(data: *const f32, len: usize, function: &str) -> Option<Vec<f32>> {
    if len == 0 {
        return Some(Vec::new());
    }
    if data.is_null() {
        set_error(format!("{function}: no data"));
        return None;
    }
    // SAFETY: non-null, and the caller guarantees `len` readable floats.
    Some(unsafe { std::slice::from_raw_parts(data, len) }.to_vec())
}

fn transport(t: &mut State) -> Result<&mut Transport, String> {
    t.transport
        .as_mut()
        .ok_or_else(|| "the transport has stopped".to_string())
}

/// Posts a send of `len` values to `peer` as the next message of `tensor`; the values
/// are copied. Returns the operation's handle, or -1.
///
/// # Safety
/// `data` points to `len` floats.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlt_post_send(
    t: *mut MltTransport,
    peer: u32,
    tensor: u32,
    data: *const f32,
    len: usize,
    layer: u16,
) -> i64 {
    // SAFETY: the caller passes `len` readable floats.
    let Some(values) = (unsafe { copy_in(data, len, "mlt_post_send") }) else {
        return -1;
    };
    with(t, |t| {
        let peer = u16::try_from(peer).map_err(|e| e.to_string())?;
        transport(t)?
            .post_send(peer, tensor, values, layer)
            .map_err(|e| e.to_string())
    })
    .map_or(-1, |h| h as i64)
}

/// Posts a receive of `len` values from `peer`, the next message of `tensor`, done once
/// all but `loss_bound` arrived; the result goes to `out` when its completion is
/// polled. Returns the handle, or -1.
///
/// # Safety
/// `out` points to `len` floats that stay valid until the completion is polled.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlt_post_recv(
    t: *mut MltTransport,
    peer: u32,
    tensor: u32,
    out: *mut f32,
    len: usize,
    loss_bound: f64,
) -> i64 {
    if out.is_null() && len > 0 {
        set_error("mlt_post_recv: no buffer");
        return -1;
    }
    with(t, |t| {
        let peer = u16::try_from(peer).map_err(|e| e.to_string())?;
        let handle = transport(t)?
            .post_recv(peer, tensor, len, loss_bound)
            .map_err(|e| e.to_string())?;
        t.outputs.insert(handle, (out, len));
        Ok(handle)
    })
    .map_or(-1, |h| h as i64)
}

/// Posts an allreduce (sum) of `len` values over the whole job, with the job's
/// collective and `loss_bound`; the result replaces `data` when its completion is
/// polled. Returns the handle, or -1.
///
/// # Safety
/// `data` points to `len` floats that stay valid until the completion is polled.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlt_post_allreduce(
    t: *mut MltTransport,
    tensor: u32,
    data: *mut f32,
    len: usize,
    layer: u16,
    loss_bound: f64,
) -> i64 {
    // SAFETY: the caller passes `len` readable floats.
    let Some(values) = (unsafe { copy_in(data, len, "mlt_post_allreduce") }) else {
        return -1;
    };
    with(t, |t| {
        let transport = transport(t)?;
        let spec = transport.allreduce_spec(tensor, values, vec![(0, layer)], Some(loss_bound));
        let handle = transport.post_allreduce(spec).map_err(|e| e.to_string())?;
        t.outputs.insert(handle, (data, len));
        Ok(handle)
    })
    .map_or(-1, |h| h as i64)
}

fn fill(t: &mut State, handle: u64, result: Result<Done, OpError>, out: &mut MltCompletion) {
    out.op = handle;
    out.error = [0; 256];
    let target = t.outputs.remove(&handle);
    match result {
        Ok(done) => {
            out.status = 0;
            out.delivered = done.delivered;
            out.exact = done.exact;
            out.elapsed_ns = done.elapsed_ns;
            if let Some((ptr, len)) = target {
                let n = len.min(done.data.len());
                // SAFETY: the caller keeps `len` writable floats until this completion.
                unsafe { std::ptr::copy_nonoverlapping(done.data.as_ptr(), ptr, n) };
            }
        }
        Err(e) => {
            out.status = -1;
            out.delivered = 0.0;
            out.exact = 0.0;
            out.elapsed_ns = 0;
            for (slot, byte) in out.error.iter_mut().zip(e.0.bytes().take(255)) {
                *slot = byte as c_char;
            }
        }
    }
}

/// Takes the next completion if there is one: 1 and `*out` filled, 0 if none, -1 on
/// error. Never blocks.
///
/// # Safety
/// `out` points to a writable `mlt_completion`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlt_poll_cq(t: *mut MltTransport, out: *mut MltCompletion) -> i32 {
    // SAFETY: as documented, `out` is writable.
    unsafe { mlt_wait_cq(t, out, 0) }
}

/// Like `mlt_poll_cq`, waiting up to `timeout_ms` for a completion.
///
/// # Safety
/// `out` points to a writable `mlt_completion`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlt_wait_cq(
    t: *mut MltTransport,
    out: *mut MltCompletion,
    timeout_ms: u32,
) -> i32 {
    if out.is_null() {
        set_error("mlt_poll_cq: no completion to fill");
        return -1;
    }
    if t.is_null() {
        set_error("no transport");
        return -1;
    }
    // SAFETY: the caller passes a pointer from mlt_start that was not stopped.
    let shared = unsafe { &*t };
    let next = {
        let completions = shared.completions.lock().unwrap_or_else(|e| e.into_inner());
        if timeout_ms == 0 {
            completions.try_recv().ok()
        } else {
            completions
                .recv_timeout(Duration::from_millis(u64::from(timeout_ms)))
                .ok()
        }
    };
    let Some((handle, result)) = next else {
        return 0;
    };
    with(t, |t| {
        // SAFETY: as documented, `out` is writable.
        fill(t, handle, result, unsafe { &mut *out });
        Ok(1)
    })
    .unwrap_or(-1)
}

/// Finishes the operations in flight and frees the transport.
///
/// # Safety
/// `t` comes from `mlt_start` and is not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlt_stop(t: *mut MltTransport) {
    if t.is_null() {
        return;
    }
    // SAFETY: the caller gives back a pointer from mlt_start, once, with no other call
    // on it under way.
    let t = unsafe { Box::from_raw(t) };
    let taken = t
        .state
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .transport
        .take();
    if let Some(transport) = taken {
        t.runtime.block_on(transport.shutdown());
    }
}
