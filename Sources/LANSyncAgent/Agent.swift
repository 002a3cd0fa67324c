import Foundation
public import LANSync
import LANSyncCrypto
import LANSyncDiscovery
import LANSyncSession
package import LANSyncTransport
import LANSyncWire
public import Logging
import NIOCore
import NIOExtras
import NIOPosix
public import ServiceLifecycle
import Synchronization

/// A running LANSync node: listens for group members, dials static peers, and keeps every
/// connected peer in sync. One per data directory; `lansync run` runs one, and so can an app, in
/// its own process (see Examples/TapLogger).
///
/// Lifecycle: `run()` runs the agent's parts as services of one `ServiceGroup` (`AgentPart`: peer
/// directory, sync listener, control socket, local changes, network watch, discovery, static
/// peers), each with a state `report()` shows, until cancelled or asked to shut down gracefully;
/// then the parts stop in reverse order — peers are told with a goodbye — and it returns. Writes
/// are transactions in the store, so stopping at any point leaves nothing half-written.
///
/// This actor is what the parts share: the registry of sessions (one per peer), dialing, and
/// what `lansync status` and `lansync peers` show.
public actor Agent: Service {
    /// The node this agent syncs: the app's own, when the agent runs in the app's process.
    public let node: LANSyncNode
    /// What it was started with: where it listens, whom it dials, its limits.
    public let configuration: AgentConfiguration
    /// The group's epochs: moved forward by a removal while the agent runs (`GroupState`).
    let groupState: GroupState
    /// The current epoch's secret.
    nonisolated var group: GroupSecret { groupState.current }
    /// The tags mDNS lists: the group's, with this node's decoys (`AdvertisedTags`).
    let advertisedTags: AdvertisedTags
    let logger: Logger
    let directory: PeerDirectory
    /// Rows merged from one peer, held back from the others for a moment (`RelayGrace`).
    let relayGrace: SharedRelayGrace
    /// Our state as sessions announce it, read once per change (`OurStateCache`).
    let ourStateCache = OurStateCache()
    /// Where each of the agent's parts stands (`AgentPart`).
    let partStates = AgentPartStates()
    /// Where each part stands, without the rest of `report()` (peers, the digest read from disk).
    package nonisolated var partStatuses: [AgentPartStatus] { partStates.all }
    /// Lets a service beside the agent (the local API) show where it stands among the parts.
    package nonisolated func reportPart(_ name: String, _ state: AgentPartState, detail: String? = nil) {
        partStates.set(name, state, detail: detail)
    }
    let eventLoops = MultiThreadedEventLoopGroup.singleton

    /// One sync session per connected peer replica (`SessionRegistry`).
    var sessions = SessionRegistry()
    /// The replica last reached through a dial target (an address or a discovered service).
    var targetReplica: [String: ReplicaID] = [:]
    /// mDNS: where discovery stands, the same-group services found, their dialers.
    var discovery = DiscoveryState()
    var connections = 0
    /// Set when a peer presents our own device ID: two machines with one machine-id.
    var sharedDeviceID = false
    /// Keys that admissions pinned and whose records are still being written (`observe` writes
    /// them off the connection's path), by device: a second connection of the same device in
    /// that window is judged against them, so two clones connecting at once are not both let in.
    var pinsBeingWritten: [DeviceID: String] = [:]
    /// The port the sync listener bound, or why it did not: settled once, awaited by
    /// `listeningPort()`.
    nonisolated let listener = OnceKnown<Int>()
    /// The pairing window `lansync group invite` opened, if any (see `Pairing.swift`).
    var pairingWindow: OpenPairingWindow?
    /// The TCP port once listening (useful with port 0).
    public private(set) var port: Int?
    /// Every byte this agent sent and received on sync connections, handshakes included.
    package nonisolated let traffic = TrafficCounter()

    /// An agent for `node`, not running yet: run it in a `ServiceGroup` (or call `run()`).
    /// Throws when the node is in no group (`lansync group create` or `join` first).
    public init(node: LANSyncNode, configuration: AgentConfiguration, logger: Logger) throws(LANSyncError) {
        try self.init(node: node, configuration: configuration, logger: logger, router: nil)
    }

    /// The agent of one of several groups served by one process (`GroupRouter`): the first one
    /// added listens and advertises for all; the others take their connections and what mDNS
    /// finds from it.
    package init(
        node: LANSyncNode,
        configuration: AgentConfiguration,
        logger: Logger,
        router: GroupRouter?
    ) throws(LANSyncError) {
        guard let epochs = try node.groupEpochs() else {
            throw LANSyncError(
                .invalidInput,
                "this device is in no group, so it cannot sync with anyone; run `lansync group create` on the first "
                    + "device and `lansync group join CODE` on the others"
            )
        }
        self.node = node
        self.configuration = configuration
        groupState = GroupState(epochs)
        advertisedTags = AdvertisedTags(staticSecret: node.identity.keyPair.secretKey)
        self.logger = logger
        directory = PeerDirectory(path: node.dataDirectory.path + "/peers.json")
        relayGrace = SharedRelayGrace(grace: configuration.relayGrace)
        self.router = router
        router?.add(self)
    }

    /// The groups served with this one, when one process serves several (`GroupRouter`).
    let router: GroupRouter?
    /// Whether this agent listens and advertises: alone, or as its router's first agent.
    nonisolated var isHost: Bool { router?.host.map { $0 === self } ?? true }

    /// Waits until the agent listens, and returns its TCP port. Throws why it cannot listen
    /// (`ListenError`), `StoppedBeforeListeningError` if it stopped first, and `CancellationError` when the
    /// waiting task is cancelled.
    public func listeningPort() async throws -> Int {
        if let port { return port }
        if !isHost, let host = router?.host {
            let port = try await host.listeningPort()
            self.port = port
            return port
        }
        return try await listener.wait()
    }

    /// Runs the agent's parts (`AgentPart`) in one `ServiceGroup` until cancelled or asked to shut
    /// down gracefully (the parent group's signal handling reaches the parts through it).
    public func run() async throws {
        // Held until every part stopped: `group leave --erase` waits for it.
        let serving = ServingLock.serve(node.dataDirectory)
        defer { withExtendedLifetime(serving) {} }
        let parts = parts()
        partStates.declare(parts.map(\.name))
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(services: parts.map { .init(service: $0) }, logger: logger)
        )
        do {
            try await group.run()
        } catch is CancellationError {
            // Asked to stop (SIGINT/SIGTERM or cancellation): a clean end, not an error.
        }
        // Whoever still waits for the port (the agent stopped before it listened) hears so.
        listener.settle(.failure(StoppedBeforeListeningError(service: "the agent")))
        pairingWindow?.end()
        logger.info("stopped")
    }

    /// The parts, in the order they start (and the reverse of the order they stop).
    private func parts() -> [AgentPart] {
        let states = partStates
        var parts = [
            AgentPart(name: "peer directory", states: states) { ready in
                ready()
                // Nothing to do until the end: then, with every session ended, write peers.json.
                try? await gracefulShutdown()
                // In a task of its own: this one is cancelled, and the write must not be.
                await Task { await self.directory.persist() }.value
            },
            AgentPart(name: "sync listener", states: states) { ready in
                guard self.isHost else {
                    // Another group's agent listens for this one, on the same port.
                    _ = try await self.listeningPort()
                    ready()
                    try await gracefulShutdown()
                    return
                }
                try await self.serveConnections(ready: ready)
            },
            AgentPart(name: "control socket", states: states) { ready in
                let control = try await ControlSocket.bind(self.node.dataDirectory)
                ready()
                try await ControlSocket.serve(control, agent: self)
            },
            AgentPart(name: "local changes", states: states) { ready in
                // This device's own member record, and an epoch a member handed over while the
                // agent was stopped (merged by `lansync import`, say).
                await self.recordSelf()
                await self.reloadGroup()
                ready()
                // While the agent runs, a small commit signs the chain over its own changes, so
                // that they can be pushed at once (`extendChainInCommits`).
                self.node.store.extendChainInCommits(true)
                defer { self.node.store.extendChainInCommits(false) }
                await self.watchChanges()
            },
            AgentPart(name: "network watch", states: states) { ready in
                ready()
                await self.watchNetwork()
            },
        ]
        if configuration.discovery {
            parts.append(
                AgentPart(name: "discovery", states: states) { ready in
                    let port = try await self.listeningPort()
                    ready()
                    // With several groups, the host advertises all and hands the others what it finds.
                    if self.isHost { await self.discover(port: port) } else { try? await gracefulShutdown() }
                }
            )
        }
        if !configuration.staticPeers.isEmpty {
            let peers = configuration.staticPeers
            parts.append(
                AgentPart(name: "static peers", states: states) { ready in
                    ready()
                    await withDiscardingTaskGroup { dialers in
                        for peer in peers { dialers.addTask { await self.dialLoop(.configured(peer)) } }
                    }
                }
            )
        }
        return parts
    }

    /// The sync listener: binds (reporting a failure to whoever waits for the port), then accepts
    /// group members' connections until cancelled; cancelling ends every accepted session with a
    /// goodbye.
    private func serveConnections(ready: @Sendable () -> Void) async throws {
        let server: NIOAsyncChannel<FramedChannel, Never>
        do {
            do {
                server = try await listen(on: configuration.listenHost)
            } catch  where configuration.listenHost == "::" {
                logger.notice("no IPv6 on this machine; listening on IPv4 only", metadata: ["error": "\(error)"])
                server = try await listen(on: "0.0.0.0")
            }
        } catch {
            // Whoever waits for the port hears why there is none, rather than waiting forever.
            let failure = ListenError(host: configuration.listenHost, port: configuration.listenPort, cause: "\(error)")
            listener.settle(.failure(failure))
            throw failure
        }
        let boundPort = server.channel.localAddress?.port ?? configuration.listenPort
        port = boundPort
        listener.settle(.success(boundPort))
        ready()
        logger.info(
            "listening",
            metadata: [
                "listen.address": "\(server.channel.localAddress.map(Self.describe) ?? "\(boundPort)")",
                "group.tag": "\(group.tag)",
            ]
        )
        try await serveUntilCancelled(server) { child in await self.accept(child) }
    }

    private func listen(on host: String) async throws -> NIOAsyncChannel<FramedChannel, Never> {
        try await ServerBootstrap(group: eventLoops)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelOption(.backlog, value: 64)
            .childChannelOption(Self.tcpUserTimeout, value: Self.milliseconds(configuration.unacknowledgedTimeout))
            .bind(host: host, port: configuration.listenPort) { channel in
                channel.eventLoop.makeCompletedFuture { try FramedChannel.framing(channel) }
            }
    }

    static let tcpUserTimeout = ChannelOptions.Types.SocketOption(
        level: .tcp,
        name: NIOBSDSocket.Option(rawValue: CInt(TCP_USER_TIMEOUT))
    )

    static func milliseconds(_ duration: Duration) -> SocketOptionValue {
        SocketOptionValue(TimeAmount(duration).nanoseconds / 1_000_000)
    }

    // MARK: Sessions (one per peer) and the dial loops waiting on them

    /// Dial loops sleeping out their backoff, by waiter number: resumed with true when the network
    /// comes back, false when their time is up.
    var networkWaiters: [Int: CheckedContinuation<Bool, Never>] = [:]
    var nextWaiter = 0

    /// Whether this peer's device ID is ours, or that of another connected replica: machines
    /// cloned from one image share /etc/machine-id and so the derived device ID. Data stays
    /// correct (replicas, not devices, are the CRDT's actors); people need to hear about it.
    func isDuplicateDevice(_ peer: Hello) -> Bool {
        if peer.device == node.deviceID {
            if !sharedDeviceID {
                sharedDeviceID = true
                logger.warning("\(Self.clonedMachineAdvice(peer.device.description)) (the other one: \(peer.name))")
            }
            return true
        }
        let twin = sessions.all.contains {
            $0.session.peer.device == peer.device && $0.session.peer.replica != peer.replica
        }
        if twin {
            logger.warning(
                "two connected machines present the same device ID (a cloned machine-id); `lansync status` on either one says how to fix it",
                metadata: ["peer.device": "\(peer.device)", "peer.name": "\(peer.name)"]
            )
        }
        return twin
    }

    /// What to tell the owner of a machine whose device ID another machine also has.
    package static func clonedMachineAdvice(_ device: String) -> String {
        "another machine has this device ID (\(device)): the two were cloned from one system image and share "
            + "/etc/machine-id. Data stays correct, but peers cannot tell the two apart. Fix, on one of them: "
            + "`sudo rm /etc/machine-id && sudo systemd-machine-id-setup`, then delete identity.json in the LANSync "
            + "data directory and run `lansync init` (the data is kept; peers will show it re-keyed)"
    }

    /// One connection per peer: when two exist (both dialed at once, or a redial), both sides keep
    /// the same one (`SessionRegistry.keepsNewConnection`). Returns whether `session` is kept.
    func register(_ session: SyncSession, replica: ReplicaID, close: @escaping @Sendable () -> Void) async -> Bool {
        if let existing = sessions[replica] {
            let heard = await existing.session.lastReceived
            // Re-read after the suspension: another connection may have registered meanwhile.
            if let current = sessions[replica] {
                let keepNew = SessionRegistry.keepsNewConnection(
                    existingIsStuck: current.session === existing.session && isStuck(lastHeard: heard),
                    existingInitiatedByUs: current.session.initiatedByUs,
                    newInitiatedByUs: session.initiatedByUs,
                    ourReplica: node.replicaID,
                    peerReplica: replica
                )
                guard keepNew else { return false }
            }
        }
        let replaced = sessions.hold(session, replica: replica, close: close)
        if replaced == nil { relayGrace.connected(replica, true) }
        // The older session says goodbye once the new one holds its place: the registry is
        // settled before this waits, whatever runs on the agent meanwhile.
        await replaced?.replaced()
        return true
    }

    func unregister(_ session: SyncSession, replica: ReplicaID) {
        guard sessions.release(session, replica: replica) else { return }
        relayGrace.connected(replica, false)
    }

}

/// A flag set once from any thread.
final class ManagedAtomicFlag: Sendable {
    private let value = Mutex(false)
    func set() { value.withLock { $0 = true } }
    var isSet: Bool { value.withLock { $0 } }
}
