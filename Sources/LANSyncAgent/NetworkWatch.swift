import Foundation

/// Which network interfaces are up, read from sysfs.
enum NetworkInterfaces {
    /// Names of the non-loopback interfaces whose operational state is up.
    static func up(root: String = "/sys/class/net") -> Set<String> {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: root) else { return [] }
        return Set(
            names.filter { name in
                name != "lo"
                    && (try? String(contentsOfFile: "\(root)/\(name)/operstate", encoding: .utf8))?
                        .trimmingCharacters(in: .whitespacesAndNewlines) == "up"
            }
        )
    }
}

/// Tells when a network interface comes up (a cable plugged in, Wi-Fi rejoined), so the agent
/// reconnects at once instead of waiting for TCP retransmissions and dial backoff.
///
/// The kernel says so on a netlink socket (`NETLINK_ROUTE`, link and address groups): a thread of
/// its own sleeps in `poll` until a message arrives, so an idle agent wakes for nothing. Where no
/// netlink socket can be had, sysfs is read twice a second instead.
final class NetworkWatch: Sendable {
    /// Interfaces that came up, each time some did.
    let changes: AsyncStream<Set<String>>
    private let continuation: AsyncStream<Set<String>>.Continuation
    private let netlink: NetlinkSocket?
    /// Reads sysfs twice a second where there is no netlink socket; `stop` cancels it.
    private let poller: Task<Void, Never>?

    init() {
        (changes, continuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(8))
        netlink = NetlinkSocket.linkEvents()
        let continuation = continuation
        if let netlink {
            let thread = Thread {
                var previous = NetworkInterfaces.up()
                // Each wait ends on a kernel message (or `stop`); bursts of messages read as one change.
                while netlink.waitForMessages() {
                    let current = NetworkInterfaces.up()
                    let cameUp = current.subtracting(previous)
                    previous = current
                    if !cameUp.isEmpty { continuation.yield(cameUp) }
                }
                continuation.finish()
            }
            thread.name = "lansync-network-watch"
            thread.start()
            poller = nil
        } else {
            poller = Task {
                var previous = NetworkInterfaces.up()
                while !Task.isCancelled {
                    try? await Task.sleep(for: .milliseconds(500))
                    let current = NetworkInterfaces.up()
                    let cameUp = current.subtracting(previous)
                    previous = current
                    if !cameUp.isEmpty { continuation.yield(cameUp) }
                }
                continuation.finish()
            }
        }
    }

    /// Whether the kernel's notifications are used (false: sysfs is polled).
    var isEventDriven: Bool { netlink != nil }

    func stop() {
        netlink?.stop()
        poller?.cancel()
        continuation.finish()
    }
}

extension Agent {
    /// When an interface comes up, drops connections that have heard nothing for longer than a
    /// ping interval (they are likely stuck from the outage), wakes every dial loop, and redials
    /// peers that left mDNS during the outage at their last known addresses.
    func watchNetwork() async {
        let watch = NetworkWatch()
        logger.debug(
            "watching network interfaces",
            metadata: ["watch.events": "\(watch.isEventDriven ? "netlink" : "sysfs polling")"]
        )
        await withTaskCancellationHandler {
            for await cameUp in watch.changes {
                logger.info(
                    "network interface up; reconnecting stale peers",
                    metadata: ["interfaces": "\(cameUp.sorted())"]
                )
                await networkCameBack()
            }
        } onCancel: {
            watch.stop()
        }
    }
}
