/// The configuration file: one `key = value` per line, `#` starts a comment, `peer` may repeat.
///
///     # /etc/lansync/lansync.conf
///     data-dir = /var/lib/lansync
///     listen = [::]:7741
///     peer = 192.168.1.20:7741
///     log-level = info
///     max-clock-skew = 120
///     max-connections = 64
///     mdns = on
///     mdns-name = LANSync therapy room
///
/// Every key is optional; command-line flags override the file. An unknown key or a bad value is
/// an error naming the file, the line and the reason, and nothing runs.
package struct ConfigFile: Sendable, Equatable {
    package var dataDir: String?
    package var listen: PeerAddress?
    package var peers: [PeerAddress] = []
    package var logLevel: String?
    package var maxClockSkewSeconds: Int?
    package var maxConnections: Int?
    package var mdns: Bool?
    package var mdnsName: String?
    /// Where the local HTTP API listens (loopback HOST:PORT), or nil; `apiOff` when `api = off`.
    package var api: PeerAddress?
    package var apiOff = false

    package init() {}

    /// The keys, in the order the documentation lists them.
    package static let keys = [
        "data-dir", "listen", "peer", "log-level", "max-clock-skew", "max-connections", "mdns", "mdns-name", "api",
    ]
    package static let logLevels = ["trace", "debug", "info", "notice", "warning", "error", "critical"]

    package struct Problem: Error, Equatable, CustomStringConvertible {
        package let path: String
        package let line: Int
        package let reason: String
        package var description: String { "\(path):\(line): \(reason)" }
    }

    package static func parse(_ text: String, path: String) throws(Problem) -> ConfigFile {
        var config = ConfigFile()
        var seen = Set<String>()
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let number = index + 1
            func problem(_ reason: String) -> Problem { Problem(path: path, line: number, reason: reason) }
            let line = raw.trimmingWhitespace()
            if line.isEmpty || line.hasPrefix("#") { continue }
            guard let equals = line.firstIndex(of: "=") else {
                throw problem("expected `key = value`, found '\(line)'")
            }
            let key = line[..<equals].trimmingWhitespace()
            let value = line[line.index(after: equals)...].trimmingWhitespace()
            guard keys.contains(key) else {
                throw problem("unknown key '\(key)' (known keys: \(keys.joined(separator: ", ")))")
            }
            if key != "peer", !seen.insert(key).inserted { throw problem("'\(key)' is set twice") }
            guard !value.isEmpty else { throw problem("'\(key)' has no value") }
            switch key {
            case "data-dir":
                guard value.hasPrefix("/") else { throw problem("data-dir must be an absolute path, not '\(value)'") }
                config.dataDir = value
            case "listen":
                guard let address = PeerAddress(value) else { throw problem("listen: '\(value)' is not HOST:PORT") }
                config.listen = address
            case "peer":
                guard let address = PeerAddress(value) else {
                    throw problem("peer: '\(value)' is not HOST:PORT (e.g. 192.168.1.20:7741)")
                }
                config.peers.append(address)
            case "log-level":
                guard logLevels.contains(value) else {
                    throw problem("log-level: '\(value)' is not one of \(logLevels.joined(separator: ", "))")
                }
                config.logLevel = value
            case "max-clock-skew":
                guard let seconds = Int(value), (1...86_400).contains(seconds) else {
                    throw problem("max-clock-skew: '\(value)' is not a number of seconds from 1 to 86400")
                }
                config.maxClockSkewSeconds = seconds
            case "max-connections":
                guard let count = Int(value), (1...4_096).contains(count) else {
                    throw problem("max-connections: '\(value)' is not a number from 1 to 4096")
                }
                config.maxConnections = count
            case "mdns":
                switch value {
                case "on", "yes", "true": config.mdns = true
                case "off", "no", "false": config.mdns = false
                default: throw problem("mdns: '\(value)' is not on or off")
                }
            case "api":
                if ["off", "no", "false"].contains(value) {
                    config.apiOff = true
                } else {
                    guard let address = PeerAddress(value), PeerAddress.isLoopback(host: address.host) else {
                        throw problem("api: '\(value)' is not a loopback HOST:PORT (e.g. 127.0.0.1:7742) or off")
                    }
                    config.api = address
                }
            default:  // mdns-name
                guard value.utf8.count <= 63 else { throw problem("mdns-name: longer than 63 bytes (a DNS label)") }
                config.mdnsName = value
            }
        }
        return config
    }

    /// Applies the file's settings to an agent configuration (flags are applied after, and win).
    package func apply(to configuration: inout AgentConfiguration) {
        if let listen {
            configuration.listenHost = listen.host
            configuration.listenPort = listen.port
        }
        configuration.staticPeers += peers
        if let maxClockSkewSeconds { configuration.maxClockSkewMilliseconds = UInt64(maxClockSkewSeconds) * 1000 }
        if let maxConnections { configuration.maxConnections = maxConnections }
        if let mdns { configuration.discovery = mdns }
        if let mdnsName { configuration.mdnsName = mdnsName }
    }
}

extension StringProtocol {
    fileprivate func trimmingWhitespace() -> String {
        String(drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }
}
