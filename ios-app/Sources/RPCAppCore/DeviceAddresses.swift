import Foundation
#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#endif

/// This device's IPv4 addresses, as `"en0 192.168.1.23"`: what a laptop connects to in
/// standalone mode (the status screen shows them). Loopback and interfaces that are down are
/// left out; an empty list when the system gives none.
public func deviceIPv4Addresses() -> [String] {
    var head: UnsafeMutablePointer<ifaddrs>?
    guard getifaddrs(&head) == 0, let first = head else { return [] }
    defer { freeifaddrs(head) }
    var out: [String] = []
    var cursor: UnsafeMutablePointer<ifaddrs>? = first
    while let ifa = cursor {
        defer { cursor = ifa.pointee.ifa_next }
        let flags = Int32(ifa.pointee.ifa_flags)
        guard let addr = ifa.pointee.ifa_addr, addr.pointee.sa_family == sa_family_t(AF_INET),
              flags & Int32(IFF_UP) != 0, flags & Int32(IFF_LOOPBACK) == 0 else { continue }
        var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
        let ok = addr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { sin -> Bool in
            var a = sin.pointee.sin_addr
            return inet_ntop(AF_INET, &a, &text, socklen_t(INET_ADDRSTRLEN)) != nil
        }
        if ok {
            let address = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            out.append("\(String(cString: ifa.pointee.ifa_name)) \(address)")
        }
    }
    return out
}
