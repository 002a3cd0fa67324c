import Foundation

/// Which network interfaces are up, read from sysfs: the agent polls it to notice a link that
/// comes back (a cable plugged in, Wi-Fi rejoined) and reconnect at once instead of waiting for
/// TCP retransmissions and dial backoff.
enum NetworkInterfaces {
    /// Names of the non-loopback interfaces whose operational state is up.
    static func up(root: String = "/sys/class/net") -> Set<String> {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: root) else { return [] }
        return Set(
            names.filter { name in
                name != "lo"
                    && (try? String(contentsOfFile: "\(root)/\(name)/operstate", encoding: .utf8))?
                        .trimmingCharacters(in: .whitespacesAndNewlines) == "up"
            })
    }
}

extension Agent {
    /// Polls interface states twice a second; when one comes up, drops connections that have
    /// heard nothing for longer than a ping interval (they are likely stuck from the outage) and
    /// wakes every dial loop.
    func watchNetwork() async {
        var previous = NetworkInterfaces.up()
        while !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(500))
            let current = NetworkInterfaces.up()
            let cameUp = current.subtracting(previous)
            previous = current
            guard !cameUp.isEmpty else { continue }
            logger.info("network interface up; reconnecting stale peers", metadata: ["interfaces": "\(cameUp.sorted())"])
            await networkCameBack()
        }
    }
}
