import Foundation
import LANSync
import LANSyncAgent
import LANSyncCore
import LANSyncWire
import Logging
import ServiceLifecycle

/// An agent that tampers with the changes of other replicas it relays: the attacker of the
/// namespace cluster's provenance scenario (a member that is buggy or compromised). It is a real
/// agent — handshake, sessions, store — whose sessions rewrite each delta just before sending it.
/// Never part of a product: `lansync` has no such option.
///
///     LANSYNC_TAMPER=alter|forge|claim lansync-tamper-relay --data-dir DIR run [--log-level L]
///         [--listen HOST:PORT] [--peer HOST:PORT]... [--no-mdns]
///
/// (the shape `scripts/cluster start` runs with `LANSYNC_BIN` set to this program).
/// - `alter`: changes the payload of the first entry of another replica;
/// - `forge`: adds an entry in another replica's name, one counter past its range;
/// - `claim`: keeps another replica's range but leaves out every change in it (coverage claimed
///   without rows).
@main
struct TamperRelay {
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        guard let mode = ProcessInfo.processInfo.environment["LANSYNC_TAMPER"].flatMap(Tampering.Mode.init(rawValue:))
        else {
            fail("set LANSYNC_TAMPER to alter, forge or claim")
        }
        func value(after flag: String) -> [String] {
            arguments.indices.filter { arguments[$0] == flag && $0 + 1 < arguments.count }.map { arguments[$0 + 1] }
        }
        guard let dataDir = value(after: "--data-dir").first else { fail("--data-dir DIR is required") }
        let level = value(after: "--log-level").first.flatMap(Logger.Level.init(rawValue:)) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "lansync-tamper-relay")
        do {
            let node = try LANSyncNode.open(at: DataDirectory(path: dataDir))
            var configuration = AgentConfiguration()
            if let listen = value(after: "--listen").first.flatMap({ PeerAddress($0) }) {
                configuration.listenHost = listen.host
                configuration.listenPort = listen.port
            }
            configuration.staticPeers = value(after: "--peer").compactMap { PeerAddress($0) }
            if arguments.contains("--no-mdns") { configuration.discovery = false }
            let tampering = Tampering(mode: mode, own: node.replicaID)
            configuration.outgoingMessageRewrite = { message in
                let rewritten = tampering.rewrite(message)
                if rewritten != message {
                    logger.notice("tampered with a delta", metadata: ["tamper.mode": "\(mode.rawValue)"])
                }
                return rewritten
            }
            let agent = try Agent(node: node, configuration: configuration, logger: logger)
            logger.notice("tampering with relayed changes", metadata: ["tamper.mode": "\(mode.rawValue)"])
            try await ServiceGroup(services: [agent], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
                .run()
        } catch {
            fail("\(error)")
        }
    }

    static func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("lansync-tamper-relay: \(message)\n".utf8))
        exit(1)
    }
}

/// How the relay rewrites a delta that carries another replica's range (anything else goes as is).
struct Tampering: Sendable {
    enum Mode: String, Sendable {
        case alter, forge, claim
    }

    let mode: Mode
    /// The relay's own replica: its own changes go unaltered.
    let own: ReplicaID

    func rewrite(_ message: WireMessage) -> WireMessage {
        guard case .delta(var delta) = message else { return message }
        let carried = Set(delta.entries.map(\.dot.replica))
        guard
            let range = delta.coverage.first(where: { range in range.replica != own && carried.contains(range.replica) }
            )
        else { return message }
        let victim = range.replica
        switch mode {
        case .alter:
            let index = delta.entries.firstIndex { $0.dot.replica == victim }!
            let entry = delta.entries[index]
            delta.entries[index] = Entry(
                id: entry.id,
                stream: entry.stream,
                originDevice: entry.originDevice,
                dot: entry.dot,
                hlc: entry.hlc,
                wallMilliseconds: entry.wallMilliseconds,
                payload: "{\"tampered\":true}"
            )
        case .forge:
            guard let last = delta.entries.last(where: { $0.dot.replica == victim }), range.through < Dot.maxCounter
            else { return message }
            let counter = range.through + 1
            delta.entries.append(
                Entry(
                    id: "forged-\(victim.description.prefix(8))-\(counter)",
                    stream: last.stream,
                    originDevice: last.originDevice,
                    dot: Dot(replica: victim, counter: counter),
                    hlc: last.hlc,
                    wallMilliseconds: last.wallMilliseconds,
                    payload: "{\"forged\":true}"
                )
            )
            let index = delta.coverage.firstIndex { $0.replica == victim }!
            delta.coverage[index] = .init(
                replica: victim,
                from: range.from,
                through: counter,
                signature: range.signature,
                genesis: range.genesis,
                record: range.record
            )
        case .claim:
            delta.entries.removeAll { $0.dot.replica == victim }
            delta.preferences.removeAll { $0.dot.replica == victim }
            delta.preferenceStubs.removeAll { $0.dot.replica == victim }
            delta.rows.removeAll { $0.dot.replica == victim }
        }
        return .delta(delta)
    }
}
