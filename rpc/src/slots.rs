//! Session capacity shared by the listener, the tracker client and the proxy client.
//!
//! A [`Slots`] holds `max_sessions` places. A place is either *free*, *offered* (reserved for
//! one random match key that the tracker client registered, see docs/rpc.md "Tracker mode"),
//! or *in use* (a [`Slot`] value exists for it). A [`Slot`] gives its place back when it is
//! dropped, so a session that ends in any way (return, error, panic unwinding) frees its place.
//!
//! Offers reserve capacity: [`Slots::try_take`] only hands out places that are neither in use
//! nor offered, so a client holding a match key from the tracker always finds its place, and
//! the capacity is never exceeded whatever mix of listener, tracker and proxy uses it.
//!
//! Everything lives behind one `Mutex` with a `Condvar` for waiters; no globals. A poisoned lock
//! is recovered: every critical section only updates counters and a map, so the state stays
//! consistent even if a thread panicked elsewhere while holding it.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The session capacity of one server. Cloning gives another handle to the same capacity.
#[derive(Clone)]
pub struct Slots {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

struct State {
    capacity: usize,
    in_use: usize,
    /// Live offers: match key -> tracker bookkeeping.
    offers: HashMap<String, Offer>,
    stopped: bool,
    /// Bumped on every change a waiter may care about (a place freed, an offer claimed or
    /// withdrawn, stop).
    generation: u64,
    /// Mixed into every random key so two keys made in the same nanosecond still differ.
    key_counter: u64,
}

struct Offer {
    /// Consecutive GET_PENDING_MATCHKEYS polls in which the tracker no longer listed this key.
    unpending_polls: u32,
}

/// One place of the capacity, held for the length of a session. Dropping it frees the place.
///
/// A `Slot` is deliberately neither `Clone` nor `Copy`: one session, one place.
pub struct Slot {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Slot")
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut st = lock(&self.shared.state);
        st.in_use = st.in_use.saturating_sub(1);
        st.generation = st.generation.wrapping_add(1);
        drop(st);
        self.shared.changed.notify_all();
    }
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl State {
    fn unreserved(&self) -> usize {
        self.capacity
            .saturating_sub(self.in_use)
            .saturating_sub(self.offers.len())
    }

    fn bump(&mut self) {
        self.generation = self.generation.wrapping_add(1);
    }

    /// A fresh `"<rpc_key>:<random>"` that is not a live offer. The random part is 64 bits from
    /// a freshly seeded std hasher (OS-seeded per thread), so a key that was claimed or
    /// withdrawn comes back only with probability 2^-64 per new key.
    fn fresh_key(&mut self, rpc_key: &str) -> String {
        loop {
            self.key_counter = self.key_counter.wrapping_add(1);
            let mut h = RandomState::new().build_hasher();
            h.write_u64(self.key_counter);
            let nanos = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            h.write_u128(nanos);
            // Shaped like TVM's keys ("mykey:0.6944405046415325"): no spaces, no ':' inside.
            let key = format!("{rpc_key}:0.{:020}", h.finish());
            if !self.offers.contains_key(&key) {
                return key;
            }
        }
    }
}

impl Slots {
    /// A capacity of `max_sessions` concurrent sessions.
    pub fn new(max_sessions: usize) -> Slots {
        Slots {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    capacity: max_sessions,
                    in_use: 0,
                    offers: HashMap::new(),
                    stopped: false,
                    generation: 0,
                    key_counter: 0,
                }),
                changed: Condvar::new(),
            }),
        }
    }

    /// `max_sessions`.
    pub fn capacity(&self) -> usize {
        lock(&self.shared.state).capacity
    }

    /// Places held by a live [`Slot`].
    pub fn in_use(&self) -> usize {
        lock(&self.shared.state).in_use
    }

    /// Places neither in use nor reserved by an offer.
    pub fn unreserved(&self) -> usize {
        lock(&self.shared.state).unreserved()
    }

    /// Takes a free, unreserved place, or `None` when there is none or after [`Slots::stop`].
    pub fn try_take(&self) -> Option<Slot> {
        let mut st = lock(&self.shared.state);
        if st.stopped || st.unreserved() == 0 {
            return None;
        }
        st.in_use += 1;
        st.bump();
        drop(st);
        Some(Slot {
            shared: Arc::clone(&self.shared),
        })
    }

    /// Like [`Slots::try_take`], but waits up to `timeout` for a place to come free.
    /// Returns `None` on timeout or stop.
    pub fn take_timeout(&self, timeout: Duration) -> Option<Slot> {
        let deadline = Instant::now() + timeout;
        let mut st = lock(&self.shared.state);
        loop {
            if st.stopped {
                return None;
            }
            if st.unreserved() > 0 {
                st.in_use += 1;
                st.bump();
                drop(st);
                return Some(Slot {
                    shared: Arc::clone(&self.shared),
                });
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            st = self
                .shared
                .changed
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Turns the offer `match_key` (the part after `"client:"` in a client's handshake key,
    /// e.g. `"mykey:0.69…"`) into a [`Slot`]. The offer is consumed: the same key never
    /// claims again. `None` if the key is not a live offer or after [`Slots::stop`].
    pub fn claim_offer(&self, match_key: &str) -> Option<Slot> {
        let mut st = lock(&self.shared.state);
        if st.stopped {
            return None;
        }
        st.offers.remove(match_key)?;
        // The offer reserved this place, so in_use + offers stays <= capacity.
        st.in_use += 1;
        st.bump();
        drop(st);
        self.shared.changed.notify_all();
        Some(Slot {
            shared: Arc::clone(&self.shared),
        })
    }

    /// Creates one offer per unreserved place, each with a fresh random match key
    /// `"<rpc_key>:<random>"`, and returns the new keys (the tracker client PUTs each of them).
    /// Empty after [`Slots::stop`].
    pub fn make_offers(&self, rpc_key: &str) -> Vec<String> {
        let mut st = lock(&self.shared.state);
        if st.stopped {
            return Vec::new();
        }
        let n = st.unreserved();
        let mut keys = Vec::with_capacity(n);
        for _ in 0..n {
            let key = st.fresh_key(rpc_key);
            st.offers.insert(key.clone(), Offer { unpending_polls: 0 });
            keys.push(key);
        }
        if n > 0 {
            st.bump();
        }
        keys
    }

    /// Bookkeeping after one GET_PENDING_MATCHKEYS poll. A live offer missing from `pending`
    /// was handed to a client by the tracker; if that client does not arrive for
    /// `renew_after` consecutive polls, the offer is withdrawn (its key becomes invalid) and its
    /// place becomes unreserved, so the next [`Slots::make_offers`] renews it under a new key.
    /// An offer seen pending again starts counting from zero. Returns the withdrawn keys.
    pub fn observe_pending(&self, pending: &[String], renew_after: u32) -> Vec<String> {
        let mut st = lock(&self.shared.state);
        let mut withdrawn = Vec::new();
        for (key, offer) in st.offers.iter_mut() {
            if pending.iter().any(|p| p == key) {
                offer.unpending_polls = 0;
            } else {
                offer.unpending_polls = offer.unpending_polls.saturating_add(1);
                if offer.unpending_polls >= renew_after {
                    withdrawn.push(key.clone());
                }
            }
        }
        for key in &withdrawn {
            st.offers.remove(key);
        }
        if !withdrawn.is_empty() {
            st.bump();
            drop(st);
            self.shared.changed.notify_all();
        }
        withdrawn
    }

    /// Withdraws every live offer (the tracker connection that knew them is gone) and returns
    /// how many there were.
    pub fn withdraw_all_offers(&self) -> usize {
        let mut st = lock(&self.shared.state);
        let n = st.offers.len();
        st.offers.clear();
        if n > 0 {
            st.bump();
            drop(st);
            self.shared.changed.notify_all();
        }
        n
    }

    /// The live offers' match keys, in no particular order.
    pub fn offers(&self) -> Vec<String> {
        lock(&self.shared.state).offers.keys().cloned().collect()
    }

    /// Whether `match_key` is a live offer.
    pub fn has_offer(&self, match_key: &str) -> bool {
        lock(&self.shared.state).offers.contains_key(match_key)
    }

    /// A counter that changes whenever a place is freed or taken, an offer is made, claimed or
    /// withdrawn, or the slots stop. Pair with [`Slots::wait_change`].
    pub fn generation(&self) -> u64 {
        lock(&self.shared.state).generation
    }

    /// Waits until the generation differs from `seen`, the slots stop, or `timeout` passes;
    /// returns the current generation.
    pub fn wait_change(&self, seen: u64, timeout: Duration) -> u64 {
        let st = lock(&self.shared.state);
        let (st, _) = self
            .shared
            .changed
            .wait_timeout_while(st, timeout, |st| st.generation == seen && !st.stopped)
            .unwrap_or_else(PoisonError::into_inner);
        st.generation
    }

    /// Stops handing out places and offers, withdraws the offers and wakes every waiter.
    /// Slots already held stay valid until dropped.
    pub fn stop(&self) {
        let mut st = lock(&self.shared.state);
        st.stopped = true;
        st.offers.clear();
        st.bump();
        drop(st);
        self.shared.changed.notify_all();
    }

    /// Whether [`Slots::stop`] was called.
    pub fn is_stopped(&self) -> bool {
        lock(&self.shared.state).stopped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::thread;

    #[test]
    fn take_release_respects_capacity() {
        let slots = Slots::new(2);
        let a = slots.try_take().expect("first place");
        let b = slots.try_take().expect("second place");
        assert!(slots.try_take().is_none());
        assert_eq!(slots.in_use(), 2);
        drop(a);
        assert_eq!(slots.in_use(), 1);
        let c = slots.try_take().expect("freed place");
        drop((b, c));
        assert_eq!(slots.in_use(), 0);
        assert_eq!(slots.unreserved(), 2);
    }

    #[test]
    fn offers_reserve_and_claim_once() {
        let slots = Slots::new(2);
        let keys = slots.make_offers("k");
        assert_eq!(keys.len(), 2);
        assert_ne!(keys[0], keys[1]);
        for k in &keys {
            assert!(k.starts_with("k:0."), "{k}");
            assert!(!k.contains(' '));
        }
        // Every place is reserved: no more offers, no anonymous take.
        assert!(slots.make_offers("k").is_empty());
        assert!(slots.try_take().is_none());
        assert!(slots.claim_offer("k:nope").is_none());
        let s = slots.claim_offer(&keys[0]).expect("live offer");
        assert!(slots.claim_offer(&keys[0]).is_none(), "claimed twice");
        assert_eq!(slots.in_use(), 1);
        assert_eq!(slots.offers(), vec![keys[1].clone()]);
        drop(s);
        // The freed place gets a new key, never the claimed one.
        let again = slots.make_offers("k");
        assert_eq!(again.len(), 1);
        assert_ne!(again[0], keys[0]);
        assert!(slots.claim_offer(&keys[0]).is_none());
    }

    #[test]
    fn unpending_offers_are_withdrawn_after_n_polls() {
        let slots = Slots::new(1);
        let key = slots.make_offers("k").remove(0);
        let pending = vec![key.clone()];
        for _ in 0..10 {
            assert!(slots.observe_pending(&pending, 3).is_empty());
        }
        assert!(slots.observe_pending(&[], 3).is_empty());
        assert!(slots.observe_pending(&[], 3).is_empty());
        // Seen pending again: the count restarts.
        assert!(slots.observe_pending(&pending, 3).is_empty());
        assert!(slots.observe_pending(&[], 3).is_empty());
        assert!(slots.observe_pending(&[], 3).is_empty());
        assert_eq!(slots.observe_pending(&[], 3), vec![key.clone()]);
        assert!(
            slots.claim_offer(&key).is_none(),
            "withdrawn key still valid"
        );
        assert_eq!(slots.unreserved(), 1);
        let renewed = slots.make_offers("k");
        assert_eq!(renewed.len(), 1);
        assert_ne!(renewed[0], key);
    }

    #[test]
    fn stop_wakes_waiters_and_refuses() {
        let slots = Slots::new(1);
        let held = slots.try_take().expect("place");
        let waiter = {
            let slots = slots.clone();
            thread::spawn(move || {
                let t = Instant::now();
                let got = slots.take_timeout(Duration::from_secs(10));
                (got.is_some(), t.elapsed())
            })
        };
        thread::sleep(Duration::from_millis(50));
        slots.stop();
        let (got, waited) = waiter.join().expect("waiter thread");
        assert!(!got);
        assert!(waited < Duration::from_secs(2), "{waited:?}");
        drop(held);
        assert!(slots.try_take().is_none());
        assert!(slots.make_offers("k").is_empty());
        let g = slots.generation();
        let t = Instant::now();
        slots.wait_change(g, Duration::from_secs(5));
        assert!(t.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn take_timeout_gets_a_released_place() {
        let slots = Slots::new(1);
        let held = slots.try_take().expect("place");
        let waiter = {
            let slots = slots.clone();
            thread::spawn(move || slots.take_timeout(Duration::from_secs(10)).is_some())
        };
        thread::sleep(Duration::from_millis(50));
        drop(held);
        assert!(waiter.join().expect("waiter thread"));
        assert!(slots.take_timeout(Duration::from_millis(20)).is_some());
    }

    /// Many threads take, claim, renew and release at once: the number of live `Slot`s never
    /// exceeds the capacity, and no offer key is claimed twice.
    ///
    /// The roles run until every one of them has done its share (3000 rounds each, at least
    /// `MIN_CLAIMS` claims and `MIN_TAKES` anonymous takes), not for a fixed count: on a loaded
    /// two-core machine the scheduler may run one role's whole loop before another starts, and
    /// a fixed count then exercised no claim at all. A run that cannot reach its share within
    /// the deadline fails, naming what was missing.
    #[test]
    fn concurrent_stress() {
        const CAP: usize = 3;
        const ROUNDS: usize = 3000;
        const MIN_CLAIMS: usize = 100;
        const MIN_TAKES: usize = 100;
        let slots = Slots::new(CAP);
        let live = Arc::new(AtomicUsize::new(0));
        let max_seen = Arc::new(AtomicUsize::new(0));
        let takes = Arc::new(AtomicUsize::new(0));
        let claimed = Arc::new(Mutex::new(HashSet::<String>::new()));
        let published = Arc::new(Mutex::new(Vec::<String>::new()));
        // Threads still short of their rounds; the run ends when this is 0 and the minimums met.
        let busy = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));

        let hold = |slot: Slot, live: &AtomicUsize, max_seen: &AtomicUsize| {
            let now = live.fetch_add(1, Ordering::SeqCst) + 1;
            max_seen.fetch_max(now, Ordering::SeqCst);
            thread::yield_now();
            live.fetch_sub(1, Ordering::SeqCst);
            drop(slot);
        };
        // Runs `round` until `stop`, and at least ROUNDS times.
        let spawn = |threads: &mut Vec<thread::JoinHandle<()>>,
                     mut round: Box<dyn FnMut(usize) + Send>| {
            let (busy, stop) = (Arc::clone(&busy), Arc::clone(&stop));
            busy.fetch_add(1, Ordering::SeqCst);
            threads.push(thread::spawn(move || {
                let mut i = 0;
                while i < ROUNDS || !stop.load(Ordering::SeqCst) {
                    round(i);
                    i += 1;
                    if i == ROUNDS {
                        busy.fetch_sub(1, Ordering::SeqCst);
                    }
                }
            }));
        };

        let mut threads = Vec::new();
        // Offer makers (the tracker thread's role), also withdrawing now and then.
        for t in 0..2 {
            let (slots, published) = (slots.clone(), Arc::clone(&published));
            spawn(
                &mut threads,
                Box::new(move |i| {
                    let keys = slots.make_offers("stress");
                    lock_vec(&published).extend(keys);
                    if i % 97 == t {
                        slots.observe_pending(&[], 1);
                    }
                }),
            );
        }
        // Claimers (the listener's role): several threads race for the newest published keys,
        // the ones most likely still live.
        for _ in 0..4 {
            let (slots, published, claimed) =
                (slots.clone(), Arc::clone(&published), Arc::clone(&claimed));
            let (live, max_seen) = (Arc::clone(&live), Arc::clone(&max_seen));
            spawn(
                &mut threads,
                Box::new(move |i| {
                    let key = {
                        let p = lock_vec(&published);
                        let recent = p.len().min(2 * CAP);
                        (recent > 0).then(|| p[p.len() - 1 - i % recent].clone())
                    };
                    if let Some(key) = key {
                        if let Some(slot) = slots.claim_offer(&key) {
                            let fresh = claimed
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .insert(key.clone());
                            assert!(fresh, "offer {key} claimed twice");
                            hold(slot, &live, &max_seen);
                        }
                    }
                }),
            );
        }
        // Anonymous takers (listen / proxy roles).
        for _ in 0..3 {
            let (slots, takes) = (slots.clone(), Arc::clone(&takes));
            let (live, max_seen) = (Arc::clone(&live), Arc::clone(&max_seen));
            spawn(
                &mut threads,
                Box::new(move |_| {
                    if let Some(slot) = slots.try_take() {
                        takes.fetch_add(1, Ordering::SeqCst);
                        hold(slot, &live, &max_seen);
                    }
                }),
            );
        }

        let n_claimed = || claimed.lock().unwrap_or_else(PoisonError::into_inner).len();
        let deadline = Instant::now() + Duration::from_secs(120);
        while busy.load(Ordering::SeqCst) > 0
            || n_claimed() < MIN_CLAIMS
            || takes.load(Ordering::SeqCst) < MIN_TAKES
        {
            if Instant::now() > deadline {
                break;
            }
            thread::sleep(Duration::from_millis(5));
        }
        stop.store(true, Ordering::SeqCst);
        for t in threads {
            t.join().expect("stress thread panicked");
        }
        assert_eq!(
            busy.load(Ordering::SeqCst),
            0,
            "some role never finished its rounds"
        );
        assert!(
            n_claimed() >= MIN_CLAIMS,
            "only {} offers claimed in 120 s (want {MIN_CLAIMS})",
            n_claimed()
        );
        assert!(
            takes.load(Ordering::SeqCst) >= MIN_TAKES,
            "only {} anonymous takes in 120 s (want {MIN_TAKES})",
            takes.load(Ordering::SeqCst)
        );
        assert!(max_seen.load(Ordering::SeqCst) <= CAP);
        assert!(max_seen.load(Ordering::SeqCst) >= 1);
        assert_eq!(slots.in_use(), 0);
        // Keys are unique across the whole run.
        let all = lock_vec(&published);
        let unique: HashSet<&String> = all.iter().collect();
        assert_eq!(unique.len(), all.len());
    }

    fn lock_vec(m: &Mutex<Vec<String>>) -> MutexGuard<'_, Vec<String>> {
        m.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
