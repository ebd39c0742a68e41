//! The layout the RPC server's JNI entries share with `org.mote.rpc.RpcBridge`: the server
//! modes and the indexes of a state snapshot's numbers and strings, generated into `RpcBridge`
//! as constants (`gen.rs`). Compiled with and without the `rpc` feature, so that the generator
//! (`src/bin/java-natives.rs`) writes the same `RpcBridge.java` from any build; the entries
//! themselves (`rpc.rs`) and the server they start exist only with the feature.

/// Modes, as `RpcBridge.MODE_*`.
pub const MODE_LISTEN: i32 = 0;
/// Tracker mode (docs/rpc.md "Tracker mode").
pub const MODE_TRACKER: i32 = 1;
/// Proxy mode (docs/rpc.md "Proxy mode").
pub const MODE_PROXY: i32 = 2;

/// Indexes of the numbers of a state snapshot (`RpcBridge.S_*`); booleans are 0 or 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum Num {
    Stopped = 0,
    Active,
    Served,
    Refused,
    /// The listening port, -1 in proxy mode.
    Port,
    HasTracker,
    TrackerConnected,
    TrackerRegistrations,
    HasProxy,
    ProxyWaiting,
    ProxySessions,
}

/// How many numbers a snapshot has.
pub const NUMS: usize = Num::ProxySessions as usize + 1;

/// Indexes of the strings of a state snapshot (`RpcBridge.T_*`); null when absent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum Text {
    /// The listening IP address (`IpAddr`'s text), null in proxy mode.
    Address = 0,
    /// The tracker client's last error.
    TrackerError,
    /// The offers registered at the tracker, one per line.
    TrackerOffers,
    /// The proxy client's last error.
    ProxyError,
}

/// How many strings a snapshot has.
pub const TEXTS: usize = Text::ProxyError as usize + 1;

/// The constants generated into `RpcBridge`.
pub fn constants() -> Vec<(&'static str, i32)> {
    vec![
        ("MODE_LISTEN", MODE_LISTEN),
        ("MODE_TRACKER", MODE_TRACKER),
        ("MODE_PROXY", MODE_PROXY),
        ("S_STOPPED", Num::Stopped as i32),
        ("S_ACTIVE", Num::Active as i32),
        ("S_SERVED", Num::Served as i32),
        ("S_REFUSED", Num::Refused as i32),
        ("S_PORT", Num::Port as i32),
        ("S_HAS_TRACKER", Num::HasTracker as i32),
        ("S_TRACKER_CONNECTED", Num::TrackerConnected as i32),
        ("S_TRACKER_REGISTRATIONS", Num::TrackerRegistrations as i32),
        ("S_HAS_PROXY", Num::HasProxy as i32),
        ("S_PROXY_WAITING", Num::ProxyWaiting as i32),
        ("S_PROXY_SESSIONS", Num::ProxySessions as i32),
        ("S_LENGTH", NUMS as i32),
        ("T_ADDRESS", Text::Address as i32),
        ("T_TRACKER_ERROR", Text::TrackerError as i32),
        ("T_TRACKER_OFFERS", Text::TrackerOffers as i32),
        ("T_PROXY_ERROR", Text::ProxyError as i32),
        ("T_LENGTH", TEXTS as i32),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_layout_is_dense() {
        let c = constants();
        let nums: Vec<i32> = c
            .iter()
            .filter(|(n, _)| n.starts_with("S_") && *n != "S_LENGTH")
            .map(|(_, v)| *v)
            .collect();
        assert_eq!(nums, (0..NUMS as i32).collect::<Vec<_>>());
        let texts: Vec<i32> = c
            .iter()
            .filter(|(n, _)| n.starts_with("T_") && *n != "T_LENGTH")
            .map(|(_, v)| *v)
            .collect();
        assert_eq!(texts, (0..TEXTS as i32).collect::<Vec<_>>());
    }
}
