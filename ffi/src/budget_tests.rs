//! The budgets and the interrupt through the C entry points, on hand-written models
//! (`mote::fuzzing::craft`; docs/untrusted-models.md §3-§4). The C suite
//! (`tests/c/test_budgets.c`) checks the same from C threads.

use std::io::Write;
use std::ptr;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use mote::fuzzing::craft;

use crate::error::{mote_error_free, MoteError, MoteErrorCode};
use crate::model::*;
use crate::session::*;
use crate::tensor::MoteTensorList;

/// A returned error as (code, message), freed; `Ok` for NULL.
fn result(e: *mut MoteError) -> Result<(), (u32, String)> {
    if e.is_null() {
        return Ok(());
    }
    // SAFETY: a non-NULL error returned by an entry point, read once and freed once here.
    let r = unsafe { ((*e).code, (*e).message.to_string_lossy().into_owned()) };
    // SAFETY: as above.
    unsafe { mote_error_free(e) };
    Err(r)
}

fn code(e: *mut MoteError) -> Option<u32> {
    result(e).err().map(|(c, _)| c)
}

/// Handles are tokens, not pointers, so they may cross threads as integers.
#[derive(Clone, Copy)]
struct SessionToken(usize);

impl SessionToken {
    fn ptr(self) -> *mut MoteSession {
        self.0 as *mut MoteSession
    }
}

fn load(bytes: &[u8]) -> *mut MoteModel {
    let mut m = ptr::null_mut();
    // SAFETY: a live slice and a valid out-param.
    let e = unsafe {
        mote_model_load_from_memory_with_options(
            bytes.as_ptr(),
            bytes.len(),
            MOTE_LOAD_CODE_FREE,
            &mut m,
        )
    };
    result(e).expect("the crafted model loads");
    m
}

/// A session of the endless loop with `max_instructions`.
fn endless_session(max_instructions: u64) -> (*mut MoteModel, SessionToken) {
    let model = load(&craft::endless_loop());
    let mut options = ptr::null_mut();
    let mut session = ptr::null_mut();
    // SAFETY: valid out-params and live handles made here.
    unsafe {
        result(mote_session_options_new(&mut options)).unwrap();
        result(mote_session_options_set_max_instructions(
            options,
            max_instructions,
        ))
        .unwrap();
        result(mote_session_new(model, options, &mut session)).unwrap();
        mote_session_options_free(options);
    }
    (model, SessionToken(session as usize))
}

fn run_main(s: SessionToken) -> Result<(), (u32, String)> {
    let mut outputs: *mut MoteTensorList = ptr::null_mut();
    // SAFETY: a live session, a NUL-terminated name, no inputs, a valid out-param.
    let e = unsafe { mote_session_run(s.ptr(), c"main".as_ptr(), ptr::null(), 0, &mut outputs) };
    assert!(outputs.is_null(), "the loop never returns a value");
    result(e)
}

fn free(model: *mut MoteModel, s: SessionToken) {
    // SAFETY: handles made by these tests, freed once.
    unsafe {
        mote_session_free(s.ptr());
        mote_model_free(model);
    }
}

#[test]
fn budget_setters_refuse_zero_and_store_the_value() {
    let mut o = ptr::null_mut();
    // SAFETY: a valid out-param; `o` is live until freed at the end.
    unsafe {
        result(mote_session_options_new(&mut o)).unwrap();
        let invalid = Some(MoteErrorCode::InvalidArgument as u32);
        assert_eq!(code(mote_session_options_set_memory_budget(o, 0)), invalid);
        assert_eq!(code(mote_session_options_set_max_registers(o, 0)), invalid);
        assert_eq!(code(mote_session_options_set_stack_budget(o, 0)), invalid);
        assert_eq!(
            code(mote_session_options_set_max_instructions(o, 0)),
            invalid
        );
        let null = Some(MoteErrorCode::NullArgument as u32);
        assert_eq!(
            code(mote_session_options_set_max_instructions(
                ptr::null_mut(),
                5
            )),
            null
        );
        result(mote_session_options_set_memory_budget(o, 1 << 20)).unwrap();
        result(mote_session_options_set_max_registers(o, 300)).unwrap();
        result(mote_session_options_set_stack_budget(o, 64 << 10)).unwrap();
        result(mote_session_options_set_max_instructions(o, 1234)).unwrap();
        let stored = options_of(o);
        assert_eq!(stored.memory_budget_bytes, 1 << 20);
        assert_eq!(stored.max_registers, 300);
        assert_eq!(stored.stack_budget_bytes, 64 << 10);
        assert_eq!(stored.max_instructions, 1234);
        mote_session_options_free(o);
    }
}

#[test]
fn opencl_setters_store_the_value() {
    let mut o = ptr::null_mut();
    // SAFETY: a valid out-param; `o` is live until freed at the end; the strings are
    // NUL-terminated literals.
    unsafe {
        result(mote_session_options_new(&mut o)).unwrap();
        let stored = options_of(o);
        assert_eq!(stored.opencl_device, None);
        assert!(!stored.opencl_profiling);
        assert_eq!(stored.opencl_program_cache, None);
        result(mote_session_options_set_opencl_device(o, 3)).unwrap();
        result(mote_session_options_set_opencl_profiling(o, true)).unwrap();
        result(mote_session_options_set_opencl_program_cache(
            o,
            c"/tmp/cl".as_ptr(),
        ))
        .unwrap();
        let stored = options_of(o);
        assert_eq!(stored.opencl_device, Some(3));
        assert!(stored.opencl_profiling);
        assert_eq!(
            stored.opencl_program_cache.as_deref(),
            Some(std::path::Path::new("/tmp/cl"))
        );
        assert_eq!(
            code(mote_session_options_set_opencl_program_cache(
                o,
                c"".as_ptr()
            )),
            Some(MoteErrorCode::InvalidArgument as u32)
        );
        result(mote_session_options_set_opencl_program_cache(
            o,
            ptr::null(),
        ))
        .unwrap();
        assert_eq!(options_of(o).opencl_program_cache, None);
        assert_eq!(
            code(mote_session_options_set_opencl_device(ptr::null_mut(), 0)),
            Some(MoteErrorCode::NullArgument as u32)
        );
        mote_session_options_free(o);
    }
}

#[test]
fn an_endless_loop_ends_at_the_instruction_budget_every_call() {
    let (model, s) = endless_session(1000);
    for _ in 0..2 {
        let (c, m) = run_main(s).unwrap_err();
        assert_eq!(c, MoteErrorCode::ResourceExhausted as u32, "{m}");
        assert!(
            m.contains("SessionOptions::max_instructions")
                && m.contains("budget of 1000 instructions"),
            "{m}"
        );
    }
    free(model, s);
}

#[test]
fn an_interrupt_stops_a_running_call_without_waiting_for_the_session() {
    let (model, s) = endless_session(u64::MAX);
    let (tx, rx) = mpsc::channel();
    let runner = std::thread::spawn(move || {
        let started = Instant::now();
        let r = run_main(s);
        tx.send(()).ok();
        (r, started.elapsed())
    });
    std::thread::sleep(Duration::from_millis(50));
    // If the interrupt waited for the session's lock, it would never return (and the loop
    // would never end): it runs on a helper thread watched with a deadline.
    let (itx, irx) = mpsc::channel();
    std::thread::spawn(move || {
        // SAFETY: a live session handle (freed only after the runner is joined).
        itx.send(result(unsafe { mote_session_interrupt(s.ptr()) }))
            .ok();
    });
    irx.recv_timeout(Duration::from_secs(20))
        .expect("mote_session_interrupt waited for the running call")
        .expect("the interrupt is accepted");
    rx.recv_timeout(Duration::from_secs(20))
        .expect("the interrupted call did not return");
    let (r, elapsed) = runner.join().unwrap();
    let (c, m) = r.unwrap_err();
    assert_eq!(c, MoteErrorCode::Cancelled as u32, "{m}");
    assert!(elapsed >= Duration::from_millis(40), "{elapsed:?}");
    free(model, s);
}

#[test]
fn an_idle_interrupt_cancels_exactly_the_next_call() {
    let (model, s) = endless_session(1000);
    // SAFETY: a live session handle.
    unsafe {
        result(mote_session_interrupt(s.ptr())).unwrap();
        result(mote_session_interrupt(s.ptr())).unwrap();
    }
    let cancelled = Some(MoteErrorCode::Cancelled as u32);
    let exhausted = Some(MoteErrorCode::ResourceExhausted as u32);
    assert_eq!(run_main(s).err().map(|e| e.0), cancelled);
    assert_eq!(run_main(s).err().map(|e| e.0), exhausted);
    free(model, s);
    // SAFETY: NULL and a freed token: both are checked, never dereferenced.
    unsafe {
        assert_eq!(
            code(mote_session_interrupt(ptr::null_mut())),
            Some(MoteErrorCode::NullArgument as u32)
        );
        assert_eq!(
            code(mote_session_interrupt(s.ptr())),
            Some(MoteErrorCode::InvalidHandle as u32)
        );
    }
}

/// `craft::endless_loop()` then `zeros` zero bytes, gzip-compressed.
fn inflating(zeros: usize) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&craft::endless_loop()).unwrap();
    gz.write_all(&vec![0u8; zeros]).unwrap();
    gz.finish().unwrap()
}

fn load_budgeted(bytes: &[u8], flags: u32, budget: u64) -> Result<*mut MoteModel, (u32, String)> {
    let mut m = ptr::null_mut();
    // SAFETY: a live slice and a valid out-param.
    let e = unsafe {
        mote_model_load_from_memory_with_budget(bytes.as_ptr(), bytes.len(), flags, budget, &mut m)
    };
    result(e).map(|()| m)
}

#[test]
fn a_code_free_load_stops_inflating_at_its_budget() {
    let file = inflating(32 << 20);
    assert!(file.len() < 1 << 20, "{} bytes", file.len());
    let (c, m) = load_budgeted(&file, MOTE_LOAD_CODE_FREE, 4 << 20).unwrap_err();
    assert_eq!(c, MoteErrorCode::ResourceExhausted as u32, "{m}");
    assert!(m.contains("LoadOptions::memory_budget"), "{m}");
    // Under a budget it fits, and under the default, the same file loads.
    let model = load_budgeted(&file, MOTE_LOAD_CODE_FREE, 64 << 20).expect("fits 64 MiB");
    // SAFETY: a model made here, freed once.
    unsafe { mote_model_free(model) };
    let model = load(&file);
    // SAFETY: a model made here, freed once.
    unsafe { mote_model_free(model) };
    // A budget needs a code-free load, and is never 0.
    let invalid = MoteErrorCode::InvalidArgument as u32;
    assert_eq!(load_budgeted(&file, 0, 64 << 20).unwrap_err().0, invalid);
    assert_eq!(
        load_budgeted(&file, MOTE_LOAD_CODE_FREE, 0).unwrap_err().0,
        invalid
    );
    // The path variant applies the same budget.
    let path =
        std::env::temp_dir().join(format!("mote-ffi-inflating-{}.tar.gz", std::process::id()));
    std::fs::write(&path, &file).unwrap();
    let cpath = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    let mut m = ptr::null_mut();
    // SAFETY: a NUL-terminated path and a valid out-param.
    let e = unsafe {
        mote_model_load_with_budget(cpath.as_ptr(), MOTE_LOAD_CODE_FREE, 4 << 20, &mut m)
    };
    std::fs::remove_file(&path).ok();
    let (c, msg) = result(e).unwrap_err();
    assert_eq!(c, MoteErrorCode::ResourceExhausted as u32, "{msg}");
    assert!(m.is_null(), "out-param untouched on failure");
}
