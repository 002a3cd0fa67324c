import Glibc
import LANSync

/// A netlink socket subscribed to the kernel's link and address notifications: the only file that
/// talks to netlink. Messages are not parsed; each burst just means "look at the interfaces again".
final class NetlinkSocket: Sendable {
    private let wait: WakeablePoll

    // From <linux/netlink.h> and <linux/rtnetlink.h>, which Glibc's module does not export.
    private static let netlinkRoute: Int32 = 0
    private static let groupLink: UInt32 = 0x1
    private static let groupIPv4Address: UInt32 = 0x10
    private static let groupIPv6Address: UInt32 = 0x100

    /// `struct sockaddr_nl`: family, padding, port ID (0: the kernel assigns one), groups.
    private struct Address {
        var family = UInt16(AF_NETLINK)
        var pad: UInt16 = 0
        var pid: UInt32 = 0
        var groups: UInt32
    }

    private init(wait: WakeablePoll) { self.wait = wait }

    /// A socket subscribed to link and address changes, or nil where netlink is not available.
    static func linkEvents() -> NetlinkSocket? {
        let fd = Glibc.socket(AF_NETLINK, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), netlinkRoute)
        guard fd >= 0 else { return nil }
        var address = Address(groups: groupLink | groupIPv4Address | groupIPv6Address)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<Address>.size)) }
        }
        guard bound == 0 else {
            close(fd)
            return nil
        }
        return WakeablePoll(owning: fd).map(NetlinkSocket.init(wait:))
    }

    /// Sleeps until the kernel sends something, then reads all of it. False once stopped.
    func waitForMessages() -> Bool {
        guard wait.waitUntilReadable() else { return false }
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while recv(wait.descriptor, &buffer, buffer.count, Int32(MSG_DONTWAIT)) > 0 {}
        return true
    }

    /// Wakes the waiting thread for good.
    func stop() { wait.stop() }
}
