//! Panics unwound by the `unwinding` crate's unwinder (see Cargo.toml): each must reach its
//! `catch_unwind` with its payload, running every destructor on the way, as the JNI entry
//! points rely on. Prints `unwind check: N panics caught` and exits 0, or names what failed.
use std::cell::RefCell;
use std::panic;

thread_local! {
    static DROPPED: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
}

struct Guard(u32);

impl Drop for Guard {
    fn drop(&mut self) {
        DROPPED.with(|d| d.borrow_mut().push(self.0));
    }
}

#[inline(never)]
fn deep(n: u32, at: u32) -> u32 {
    let _g = Guard(n);
    if n == at {
        panic::panic_any(format!("boom at {n}"));
    }
    // Keep the recursion a real call chain (no tail call): the result uses the callee's.
    deep(n + 1, at).wrapping_add(std::hint::black_box(n))
}

fn main() {
    panic::set_hook(Box::new(|_| {}));
    let mut caught = 0u32;
    for round in 0..2000u32 {
        let at = 1 + round % 40;
        DROPPED.with(|d| d.borrow_mut().clear());
        let r = panic::catch_unwind(|| deep(0, at));
        let payload = match r {
            Ok(v) => fail(&format!("round {round}: no panic (returned {v})")),
            Err(p) => p,
        };
        let msg = payload.downcast_ref::<String>().cloned().unwrap_or_default();
        if msg != format!("boom at {at}") {
            fail(&format!("round {round}: payload {msg:?}"));
        }
        let dropped = DROPPED.with(|d| d.borrow().clone());
        let want: Vec<u32> = (0..=at).rev().collect();
        if dropped != want {
            fail(&format!("round {round}: destructors ran {dropped:?}, expected {want:?}"));
        }
        caught += 1;
    }
    // A panic on another thread ends that thread with its payload.
    let joined = std::thread::spawn(|| deep(0, 7)).join();
    match joined {
        Err(p) if p.downcast_ref::<String>().map(String::as_str) == Some("boom at 7") => caught += 1,
        other => fail(&format!("thread: {:?}", other.map_err(|_| "another payload"))),
    }
    println!("unwind check: {caught} panics caught");
}

fn fail(what: &str) -> ! {
    println!("unwind check: FAILED: {what}");
    std::process::exit(1);
}
