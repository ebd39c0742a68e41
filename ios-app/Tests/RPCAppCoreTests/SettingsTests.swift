import Foundation
import XCTest
@testable import RPCAppCore

final class SettingsTests: XCTestCase {
    func testParseTrimsAndAcceptsGoodValues() throws {
        let s = try AppSettings.parse(host: " 10.0.0.5 ", port: " 9190", key: "ios ", mode: .tracker)
        XCTAssertEqual(s, AppSettings(host: "10.0.0.5", port: 9190, key: "ios", mode: .tracker))
        XCTAssertEqual(s.address, "10.0.0.5:9190")
        XCTAssertEqual(AppSettings(host: "::1", port: 9091, key: "", mode: .proxy).address, "[::1]:9091")
        // Port 0 (any free port) and an empty key are fine when listening.
        XCTAssertNoThrow(try AppSettings.parse(host: "127.0.0.1", port: "0", key: "", mode: .standalone))
        XCTAssertNoThrow(try AppSettings.defaults.validate())
    }

    func testBadValuesAreTypedErrors() {
        func refused(_ host: String, _ port: String, _ key: String, _ mode: AppSettings.Mode,
                     _ want: SettingsError, line: UInt = #line) {
            XCTAssertThrowsError(try AppSettings.parse(host: host, port: port, key: key, mode: mode), line: line) {
                XCTAssertEqual($0 as? SettingsError, want, "\($0)", line: line)
            }
        }
        refused("0.0.0.0", "abc", "k", .standalone, .portNotANumber("abc"))
        refused("0.0.0.0", "", "k", .standalone, .portNotANumber(""))
        refused("0.0.0.0", "65536", "k", .standalone, .portOutOfRange(65536))
        refused("0.0.0.0", "-1", "k", .standalone, .portOutOfRange(-1))
        refused("0.0.0.0", "99999999999999999999", "k", .standalone, .portNotANumber("99999999999999999999"))
        refused("", "9090", "k", .standalone, .emptyHost)
        refused("  ", "9190", "k", .tracker, .emptyTrackerAddress)
        refused("", "9091", "k", .proxy, .emptyProxyAddress)
        refused("10.0.0.5", "0", "k", .tracker, .portZeroNeedsStandalone(.tracker))
        refused("10.0.0.5", "0", "k", .proxy, .portZeroNeedsStandalone(.proxy))
        refused("10.0.0.5", "9190", "", .tracker, .emptyKeyForTracker)
        refused("10.0.0.5", "9190", "a key", .tracker, .invalidKey("a key"))
        refused("10.0 .0.5", "9190", "k", .tracker, .invalidHost("10.0 .0.5"))
        refused("http://x", "9190", "k", .tracker, .invalidHost("http://x"))
        // A value built directly is checked too, and every error reads as a sentence.
        XCTAssertThrowsError(try AppSettings(host: "h", port: 70000, key: "", mode: .standalone).validate()) {
            XCTAssertEqual("\($0)", "port 70000 is out of range (0-65535)")
        }
    }

    func testInMemoryStoreRoundTrip() {
        let store = InMemorySettingsStore()
        XCTAssertNil(store.load())
        XCTAssertEqual(store.loadOrDefaults(), .defaults)
        let s = AppSettings(host: "192.168.1.20", port: 9190, key: "ipad", mode: .tracker)
        store.save(s)
        XCTAssertEqual(store.load(), s)
        let t = AppSettings(host: "10.1.1.1", port: 9091, key: "", mode: .proxy)
        store.save(t)
        XCTAssertEqual(store.load(), t)
    }

    func testUserDefaultsStoreRoundTripAndUnreadableValue() throws {
        let suite = "org.mote.rpcapp.tests.\(UUID().uuidString)"
        let defaults = try XCTUnwrap(UserDefaults(suiteName: suite))
        defer { defaults.removePersistentDomain(forName: suite) }
        let store = UserDefaultsSettingsStore(defaults)
        XCTAssertNil(store.load())
        let s = AppSettings(host: "0.0.0.0", port: 9090, key: "phone", mode: .standalone)
        store.save(s)
        XCTAssertEqual(store.load(), s)
        XCTAssertEqual(UserDefaultsSettingsStore(defaults).load(), s, "a second store reads what the first saved")
        defaults.set(Data("not json".utf8), forKey: store.key)
        XCTAssertNil(store.load(), "an unreadable value is no settings, not a crash")
        XCTAssertEqual(store.loadOrDefaults(), .defaults)
    }
}

final class DeviceAddressesTests: XCTestCase {
    /// Each entry is "interface a.b.c.d", never loopback (the list itself depends on the machine).
    func testAddressesAreIPv4AndNotLoopback() {
        let all = deviceIPv4Addresses()
        for entry in all {
            let parts = entry.split(separator: " ")
            XCTAssertEqual(parts.count, 2, entry)
            let octets = parts.last.map { $0.split(separator: ".").compactMap { UInt8($0) } } ?? []
            XCTAssertEqual(octets.count, 4, entry)
            XCTAssertNotEqual(octets.first, 127, entry)
        }
        print("ios app: device addresses here: \(all)")
    }
}
