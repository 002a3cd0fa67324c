import Foundation
import LANSyncIdentity
package import LANSyncWire

/// How an agent runs. Every field has a default that suits a home or therapy-room machine.
public struct AgentConfiguration: Sendable {
    /// Called when `lansync group create`, `join` or `leave` changed the node's groups while the
    /// agent runs (the control socket's `groups-changed`): `lansync run` restarts itself to serve
    /// the groups the node has now. Returns whether it acts on it. nil: the agent keeps serving
    /// what it started with.
    package var whenGroupsChange: (@Sendable () -> Bool)?

    /// The TCP port LANSync listens on unless told otherwise.
    public static let defaultPort = 7741

    /// Every IPv6 and IPv4 address (dual stack), so peers found over IPv6 link-local can connect;
    /// falls back to IPv4 only where the machine has no IPv6.
    public var listenHost: String = "::"
    /// 0 picks a free port (printed when the agent starts).
    public var listenPort: Int = AgentConfiguration.defaultPort
    /// `host:port` of peers to dial, for networks where discovery does not reach.
    public var staticPeers: [PeerAddress] = []
    /// Advertise over mDNS and dial the group's nodes found there (through avahi-daemon).
    public var discovery = true
    /// The mDNS instance name; nil picks a neutral one ("LANSync" and a random suffix).
    public var mdnsName: String?
    /// How long one mDNS group tag is advertised before the next (a day, changing at midnight UTC).
    /// `LANSYNC_MDNS_TAG_PERIOD_SECONDS` shortens it, so a test can watch the tag rotate.
    package var mdnsTagPeriodSeconds: Int64 = {
        guard let text = ProcessInfo.processInfo.environment["LANSYNC_MDNS_TAG_PERIOD_SECONDS"],
            let seconds = Int64(text),
            (1...GroupSecret.tagPeriodSeconds).contains(seconds)
        else { return GroupSecret.tagPeriodSeconds }
        return seconds
    }()
    /// A peer whose clock differs from ours by more than this is refused.
    public var maxClockSkewMilliseconds: UInt64 = 2 * 60 * 1000
    /// Connections at once, in and out, per group served; more are refused so memory stays bounded.
    public var maxConnections = 64
    /// A handshake that has not completed by then is dropped.
    public var handshakeTimeout: Duration = .seconds(5)
    /// Rows per delta message while catching a peer up (each also stays under 1 MiB of rows).
    /// Measured on a 1M catch-up back when it took about 6 s: 1,000 rows 6.6 s, 2,000 rows 6.0 s;
    /// 3,000 rows was no faster and pushed the receiving app's append p99 past 5 ms.
    public var deltaBatchRows = 2_000
    /// Keepalive: a ping this often, and a connection with nothing received for three times as long ends.
    /// Short, because a LAN link that comes back (a laptop back on Wi-Fi, a healed partition) should
    /// sync within seconds: a dead connection is noticed after 6 s and redialed. A ping is a few
    /// dozen bytes every 2 s.
    public var keepalive: Duration = .seconds(2)
    /// Keepalive of an idle session: once nothing but pings and pongs went either way for this
    /// long, a ping this often, and three such intervals of silence end the connection. Idle
    /// pings are what an agent spends its idle time on: a node in 50 groups with two peers each
    /// has 100 sessions. A dead idle connection is still noticed soon: an unanswered ping hits
    /// `unacknowledgedTimeout`, a write to the peer too, and a peer that dials again replaces it
    /// (a connection silent past `keepalive` counts as stuck). The side that accepted the
    /// connection waits half as long again, so that only the side that dialed pings. Never below
    /// `keepalive`.
    public var idleKeepalive: Duration = .seconds(60)
    /// Rows merged from one peer are held back from the others this long, because in a group
    /// where everyone is connected they are hearing the rows from their origin already (see
    /// `RelayGrace`); a peer that still lacks them after this gets them relayed. Zero relays at
    /// once. An origin's push plus the peer's announcement take up to about 1.5 s in a 24-node
    /// burst on two cores; 2 s was exceeded when a build shared those cores, and every relay then
    /// adds load (5 s runs, 15× the bytes). Rows from an origin we are not connected to are
    /// relayed at once, so only a peer cut off from an origin we reach waits this long.
    public var relayGrace: Duration = .seconds(3)
    /// A session tells its peer our changed state at most this often (after merges of other
    /// peers' rows; owed states go at once).
    public var announceInterval: Duration = .milliseconds(250)
    /// Dialing backoff: from `minBackoff`, doubling up to `maxBackoff`, with ±20% jitter.
    public var minBackoff: Duration = .milliseconds(250)
    /// Capped low: dialing an absent LAN peer is cheap, and the cap bounds how long a returning
    /// peer waits to be dialed again.
    public var maxBackoff: Duration = .seconds(5)
    /// Unacknowledged data older than this ends a TCP connection (TCP_USER_TIMEOUT), so a peer
    /// that vanished mid-transfer is noticed without waiting for retransmissions to give up.
    public var unacknowledgedTimeout: Duration = .seconds(6)
    /// Rewrites every message a session sends after the handshake, just before it is sealed.
    /// Nil in the product; the namespace cluster's tests set it in `lansync-tamper-relay`, an
    /// agent that alters what it relays, to prove that members refuse what a relay tampered with.
    package var outgoingMessageRewrite: (@Sendable (WireMessage) -> WireMessage)?

    /// The defaults: listen on every address at the default port, discovery on, no static peers.
    public init() {}
}

/// A peer address given by a person: `host:port`, or `[v6]:port`.
public struct PeerAddress: Hashable, Sendable, CustomStringConvertible {
    /// A host name, an IPv4 address, or an IPv6 address without brackets.
    public let host: String
    /// The TCP port (1–65535; 0 in a listen address picks a free one).
    public let port: Int

    /// The names of this machine's loopback, where the local API may listen and which a request
    /// to it may name: localhost, 127.0.0.1 and ::1 (any case).
    package static func isLoopback(host: String) -> Bool {
        ["localhost", "127.0.0.1", "::1"].contains(host.lowercased())
    }

    /// The address `host`:`port`.
    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Parses `host:port`, `[ipv6]:port`, or a bare host (the default port).
    public init?(_ text: String, defaultPort: Int = AgentConfiguration.defaultPort) {
        var host = text
        var port = defaultPort
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            host = String(text[text.index(after: text.startIndex)..<close])
            let rest = text[text.index(after: close)...]
            if !rest.isEmpty {
                guard rest.hasPrefix(":"), let value = Int(rest.dropFirst()) else { return nil }
                port = value
            }
        } else if let colon = text.lastIndex(of: ":"), text.filter({ $0 == ":" }).count == 1 {
            host = String(text[..<colon])
            guard let value = Int(text[text.index(after: colon)...]) else { return nil }
            port = value
        }
        guard !host.isEmpty, (0...65_535).contains(port) else { return nil }
        self.host = host
        self.port = port
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}
