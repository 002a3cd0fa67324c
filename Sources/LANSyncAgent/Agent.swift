import Foundation
public import LANSync
import LANSyncCrypto
import LANSyncDiscovery
import LANSyncSession
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
    public let node: LANSyncNode
    public let configuration: AgentConfiguration
    let group: GroupSecret
    let psk: SecureBytes
    let logger: Logger
    let directory: PeerDirectory
    /// Rows merged from one peer, held back from the others for a moment (`RelayGrace`).
    let relayGrace: SharedRelayGrace
    /// Our state as sessions announce it, read once per change (`OurStateCache`).
    let ourStateCache = OurStateCache()
    /// Where each of the agent's parts stands (`AgentPart`).
    let partStates = AgentPartStates()
    private let eventLoops = MultiThreadedEventLoopGroup.singleton

    private struct Registered {
        let session: SyncSession
        let close: @Sendable () -> Void
    }

    private var sessions: [ReplicaID: Registered] = [:]
    /// The replica last reached through a dial target (an address or a discovered service).
    private var targetReplica: [String: ReplicaID] = [:]
    /// mDNS: where discovery stands, the same-group services found, their dialers.
    var discovery = DiscoveryState()
    private var connections = 0
    /// Set when a peer presents our own device ID: two machines with one machine-id.
    private var sharedDeviceID = false
    private var listening: [CheckedContinuation<Int, any Error>] = []
    /// Why the agent could not listen, once that happened.
    private var bindFailure: ListenError?
    /// The TCP port once listening (useful with port 0).
    public private(set) var port: Int?
    /// Every byte this agent sent and received on sync connections, handshakes included.
    package nonisolated let traffic = TrafficCounter()

    public init(node: LANSyncNode, configuration: AgentConfiguration, logger: Logger) throws(LANSyncError) {
        guard let group = try node.group() else {
            throw LANSyncError(
                .invalidInput,
                "this device is in no group, so it cannot sync with anyone; run `lansync group create` on the first "
                    + "device and `lansync group join CODE` on the others")
        }
        self.node = node
        self.configuration = configuration
        self.group = group
        psk = group.noisePSK
        self.logger = logger
        directory = PeerDirectory(path: node.dataDirectory.path + "/peers.json")
        relayGrace = SharedRelayGrace(grace: configuration.relayGrace)
    }

    /// Waits until the agent listens, and returns its TCP port.
    public func listeningPort() async throws -> Int {
        if let port { return port }
        if let bindFailure { throw bindFailure }
        return try await withCheckedThrowingContinuation { listening.append($0) }
    }

    /// Runs the agent's parts (`AgentPart`) in one `ServiceGroup` until cancelled or asked to shut
    /// down gracefully (the parent group's signal handling reaches the parts through it).
    public func run() async throws {
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(services: parts().map { .init(service: $0) }, logger: logger))
        do {
            try await group.run()
        } catch is CancellationError {
            // Asked to stop (SIGINT/SIGTERM or cancellation): a clean end, not an error.
        }
        logger.info("stopped")
    }

    /// The parts, in the order they start (and the reverse of the order they stop).
    private func parts() -> [AgentPart] {
        let states = partStates
        var parts = [
            AgentPart(name: "peer directory", states: states) { ready in
                ready()
                // Nothing to do until the end: then, with every session ended, write peers.json.
                try? await Task.sleep(for: .seconds(365 * 86_400))
                // In a task of its own: this one is cancelled, and the write must not be.
                await Task { await self.directory.persist() }.value
            },
            AgentPart(name: "sync listener", states: states) { ready in try await self.serveConnections(ready: ready) },
            AgentPart(name: "control socket", states: states) { ready in
                let control = try await ControlSocket.bind(self.node.dataDirectory)
                ready()
                try await ControlSocket.serve(control, agent: self)
            },
            AgentPart(name: "local changes", states: states) { ready in
                ready()
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
                    await self.discover(port: port)
                })
        }
        if !configuration.staticPeers.isEmpty {
            let peers = configuration.staticPeers
            parts.append(
                AgentPart(name: "static peers", states: states) { ready in
                    ready()
                    await withDiscardingTaskGroup { dialers in
                        for peer in peers { dialers.addTask { await self.dialLoop(.configured(peer)) } }
                    }
                })
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
            } catch where configuration.listenHost == "::" {
                logger.notice("no IPv6 on this machine; listening on IPv4 only", metadata: ["error": "\(error)"])
                server = try await listen(on: "0.0.0.0")
            }
        } catch {
            // Whoever waits for the port hears why there is none, rather than waiting forever.
            let failure = ListenError(host: configuration.listenHost, port: configuration.listenPort, cause: "\(error)")
            for waiter in listening { waiter.resume(throwing: failure) }
            listening.removeAll()
            bindFailure = failure
            throw failure
        }
        let boundPort = server.channel.localAddress?.port ?? configuration.listenPort
        port = boundPort
        for waiter in listening { waiter.resume(returning: boundPort) }
        listening.removeAll()
        ready()
        logger.info(
            "listening",
            metadata: [
                "listen.address": "\(server.channel.localAddress.map(Self.describe) ?? "\(boundPort)")", "group.tag": "\(group.tag)",
            ])
        try await server.executeThenClose { inbound in
            try await withThrowingDiscardingTaskGroup { children in
                for try await child in inbound {
                    children.addTask { await self.accept(child) }
                }
            }
        }
    }

    private func listen(on host: String) async throws -> NIOAsyncChannel<FramedChannel, Never> {
        try await ServerBootstrap(group: eventLoops)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelOption(.backlog, value: 64)
            .childChannelOption(Self.tcpUserTimeout, value: Self.milliseconds(configuration.unacknowledgedTimeout))
            .bind(host: host, port: configuration.listenPort) { channel in
                channel.eventLoop.makeCompletedFuture { try Self.framed(channel) }
            }
    }

    static let tcpUserTimeout = ChannelOptions.Types.SocketOption(
        level: .tcp, name: NIOBSDSocket.Option(rawValue: CInt(TCP_USER_TIMEOUT)))

    static func milliseconds(_ duration: Duration) -> SocketOptionValue {
        SocketOptionValue(TimeAmount(duration).nanoseconds / 1_000_000)
    }

    static func framed(_ channel: any Channel) throws -> FramedChannel {
        try channel.pipeline.syncOperations.addHandlers(
            ByteToMessageHandler(LengthFieldBasedFrameDecoder(lengthFieldBitLength: .twoBytes)),
            LengthFieldPrepender(lengthFieldBitLength: .twoBytes))
        return try FramedChannel(wrappingChannelSynchronously: channel)
    }

    // MARK: Connections

    private func accept(_ channel: FramedChannel) async {
        let address = channel.channel.remoteAddress.map(Self.describe) ?? "unknown"
        guard connections < configuration.maxConnections else {
            logger.warning("refused a connection: too many", metadata: ["peer.address": "\(address)"])
            try? await channel.channel.close()
            return
        }
        await run(channel, initiator: false, address: address, dialed: nil)
    }

    /// Keeps a peer connected: dial, sync until the connection ends, wait, dial again, with
    /// exponential backoff and jitter while it cannot be reached. A discovered peer's loop ends
    /// once the peer has left mDNS and its connection has ended.
    func dialLoop(_ target: DialTarget) async {
        var backoff = configuration.minBackoff
        while !Task.isCancelled, let endpoints = dialEndpoints(target), !endpoints.isEmpty {
            if let replica = targetReplica[target.key], sessions[replica] != nil {
                // Already connected (perhaps the peer dialed us): dial again once that connection ends.
                await waitUntilDisconnected(replica)
                continue
            }
            let started = ContinuousClock.now
            var outcome: (any Error)? = nil
            for endpoint in endpoints {
                await directory.address(endpoint.description, state: .dialing)
                do {
                    let bootstrap = ClientBootstrap(group: eventLoops).connectTimeout(.seconds(5))
                        .channelOption(Self.tcpUserTimeout, value: Self.milliseconds(configuration.unacknowledgedTimeout))
                    let channel = try await endpoint.connect(bootstrap) { channel in
                        channel.eventLoop.makeCompletedFuture { try Self.framed(channel) }
                    }
                    dialing(target, connected: true)
                    outcome = await run(channel, initiator: true, address: endpoint.description, dialed: target)
                    dialing(target, connected: false)
                    if ContinuousClock.now - started > .seconds(10) { backoff = configuration.minBackoff }
                    break
                } catch {
                    outcome = error
                    await directory.address(endpoint.description, state: .unreachable, error: "\(error)")
                    logger.debug("peer unreachable", metadata: ["peer.address": "\(endpoint)", "error": "\(error)"])
                }
            }
            if case .connectedToSelf = outcome as? ConnectionError, case .discovered(let name) = target {
                // Our own advertisement, seen through another interface: never dial it again.
                discovery.ownServices.insert(name)
                return
            }
            let jitter = Double.random(in: 0.8...1.2)
            if await sleepUnlessWoken(backoff * jitter) {
                backoff = configuration.minBackoff
            } else {
                backoff = min(backoff * 2, configuration.maxBackoff)
            }
        }
    }

    /// Handshake, checks, registration, then the sync session until the connection ends. Returns
    /// why it ended.
    @discardableResult
    private nonisolated func run(_ channel: FramedChannel, initiator: Bool, address: String, dialed: DialTarget?) async
        -> (any Error)?
    {
        await countConnection(+1)
        let timedOut = ManagedAtomicFlag()
        let timeout = channel.channel.eventLoop.scheduleTask(in: TimeAmount(configuration.handshakeTimeout)) {
            timedOut.set()
            channel.channel.close(promise: nil)
        }
        var peerDevice: (id: String, name: String)?
        var outcome: (any Error)? = nil
        do {
            try await channel.executeThenClose { inbound, outbound in
                var iterator = inbound.makeAsyncIterator()
                let identity = node.identity
                let replica = node.replicaID
                let clock = node.clock
                let store = node.store
                let handshaken: Handshaken
                do {
                    handshaken = try await HandshakeDriver.run(
                        initiator: initiator, psk: psk, staticKey: identity.keyPair,
                        hello: { version in
                            Hello(
                                version: version, device: identity.deviceID, name: identity.name, replica: replica,
                                hlc: (try? store.syncSummary().hlc) ?? .zero, wallMilliseconds: clock.now())
                        }, traffic: traffic, inbound: &iterator, outbound: outbound)
                } catch {
                    throw timedOut.isSet ? ConnectionError.handshakeTimeout : error
                }
                timeout.cancel()
                peerDevice = (handshaken.peer.device.description, handshaken.peer.name)
                try await self.established(
                    channel: channel, handshaken: handshaken, inbound: iterator, outbound: outbound,
                    initiator: initiator, address: address, dialed: dialed)
            }
        } catch {
            timeout.cancel()
            outcome = error
            await ended(device: peerDevice, address: address, error: error)
        }
        await countConnection(-1)
        return outcome
    }

    private func countConnection(_ change: Int) { connections += change }

    private nonisolated func established(
        channel: FramedChannel, handshaken: Handshaken,
        inbound: NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator, outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>,
        initiator: Bool, address: String, dialed: DialTarget?
    ) async throws {
        let peer = handshaken.peer
        let sender = SealedSender(cipher: handshaken.send, outbound: outbound, traffic: traffic)
        if peer.replica == node.replicaID { throw ConnectionError.connectedToSelf }
        let offset = Int64(bitPattern: peer.wallMilliseconds) - Int64(node.clock.now())
        if offset.magnitude > configuration.maxClockSkewMilliseconds {
            let error = ConnectionError.clockSkew(aheadMilliseconds: offset, bound: configuration.maxClockSkewMilliseconds)
            try? await sender.send(.goodbye(code: .clockSkew, reason: error.description))
            throw error
        }
        if let dialed { await remember(dialed, replica: peer.replica) }
        let duplicateDevice = await isDuplicateDevice(peer)
        let session = SyncSession(
            peer: peer, node: node, sender: sender, configuration: configuration, directory: directory, relayGrace: relayGrace,
            ourStateCache: ourStateCache, logger: logger, initiatedByUs: initiator, close: { channel.channel.close(promise: nil) })
        guard await register(session, replica: peer.replica, close: { channel.channel.close(promise: nil) }) else {
            // The address led to a peer already connected: not a peer of its own in `lansync peers`.
            await directory.forget(address: address)
            try? await sender.send(.goodbye(code: .duplicateConnection, reason: "a connection to this peer exists already"))
            throw ConnectionError.duplicate
        }
        // Recorded as connected only once registered: the end of a connection this one replaces
        // is reported after `register`, and then sees this one and records nothing.
        let rekeyed = await directory.connected(
            device: peer.device.description, name: peer.name, address: address,
            publicKey: handshaken.peerStaticKey.hexString, clockOffset: offset, now: Int64(node.clock.now()))
        // Set while a twin is seen, cleared by the next connection without one (a reinstalled
        // device's old connection can still be open for a moment when the new one arrives).
        await directory.update(device: peer.device.description) { $0.duplicateDevice = duplicateDevice ? true : nil }
        if rekeyed && !duplicateDevice {
            logger.notice(
                "peer re-keyed: its device key changed (a reinstall); accepted through group membership",
                metadata: ["peer.device": "\(peer.device)", "peer.name": "\(peer.name)"])
        }
        logger.info(
            "peer connected",
            metadata: ["peer.device": "\(peer.device)", "peer.name": "\(peer.name)", "peer.address": "\(address)"])
        try await sender.send(try await session.opening())
        var receiver = SealedReceiver(cipher: handshaken.receive, inbound: inbound, traffic: traffic)
        // Unregistered before this returns, so that when the connection's end is reported, a session
        // still registered for the peer is a newer connection that replaced this one.
        do {
            try await serve(session, channel: channel, sender: sender, receiver: &receiver)
        } catch {
            await unregister(session, replica: peer.replica)
            throw error
        }
        await unregister(session, replica: peer.replica)
        if Task.isCancelled {
            // Bounded: a peer that is not reading holds up shutting down for a second at most.
            await session.shutDown()
            await session.farewellSaid()
        }
        throw ConnectionError.session(await session.ending ?? .peerClosed)
    }

    /// The sync session's three loops: receive (never writes), push, keepalive. Returns once the
    /// connection has closed; the session says why.
    private nonisolated func serve(
        _ session: SyncSession, channel: FramedChannel, sender: SealedSender, receiver: inout SealedReceiver
    ) async throws {
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask {
                // The only task that writes. If it fails, the connection must not live on half-dead.
                do {
                    for await _ in session.wakes { try await session.pushMissing() }
                } catch {
                    channel.channel.close(promise: nil)
                }
            }
            tasks.addTask { [configuration] in
                while !Task.isCancelled {
                    try await Task.sleep(for: configuration.keepalive)
                    // The receiving task never writes; a ping is sent from here, in turn with other messages.
                    switch await session.tick() {
                    case .ping(let counter): try await sender.send(.ping(counter))
                    case .nothing: continue
                    case .end: return
                    }
                }
            }
            defer { tasks.cancelAll() }
            do {
                while let message = try await receiver.next() { await session.handle(message) }
                await session.peerClosed()
            } catch let error as ConnectionError {
                if case .malformed(let reason) = error { await session.receiveFailed(reason) }
            } catch is CancellationError {
                // Shutting down: `established` says goodbye.
            }
            await session.finishMerging()
            await session.farewellSaid()
        }
    }

    private func remember(_ target: DialTarget, replica: ReplicaID) { targetReplica[target.key] = replica }

    /// A connection that has heard nothing for longer than a ping interval: it is stuck (in an
    /// outage, or in TCP retransmission backoff after one), though not yet closed by keepalive.
    private func isStuck(lastHeard: ContinuousClock.Instant) -> Bool {
        ContinuousClock.now - lastHeard > configuration.keepalive + .milliseconds(500)
    }

    /// Sleeps for `duration`; returns true early when the network came back meanwhile.
    private func sleepUnlessWoken(_ duration: Duration) async -> Bool {
        let id = nextWaiter
        nextWaiter += 1
        let timer = Task {
            try? await Task.sleep(for: duration)
            self.resumeWaiter(id, woken: false)
        }
        defer { timer.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                if Task.isCancelled { continuation.resume(returning: false) } else { networkWaiters[id] = continuation }
            }
        } onCancel: {
            Task { await self.resumeWaiter(id, woken: false) }
        }
    }

    /// Dial loops sleeping out their backoff, by waiter number: resumed with true when the network
    /// comes back, false when their time is up.
    private var networkWaiters: [Int: CheckedContinuation<Bool, Never>] = [:]
    private var nextWaiter = 0

    private func resumeWaiter(_ id: Int, woken: Bool) {
        networkWaiters.removeValue(forKey: id)?.resume(returning: woken)
    }

    /// Dial loops waiting for a connection (to the replica they reach) to end.
    private var disconnectWaiters: [ReplicaID: [CheckedContinuation<Void, Never>]] = [:]

    /// Returns once no connection to `replica` is registered (or the task is cancelled).
    private func waitUntilDisconnected(_ replica: ReplicaID) async {
        guard sessions[replica] != nil else { return }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                if Task.isCancelled { continuation.resume() } else { disconnectWaiters[replica, default: []].append(continuation) }
            }
        } onCancel: {
            Task { await self.resumeDisconnectWaiters(replica) }
        }
    }

    private func resumeDisconnectWaiters(_ replica: ReplicaID) {
        for waiter in disconnectWaiters.removeValue(forKey: replica) ?? [] { waiter.resume() }
    }

    /// A network interface came up: close connections silent for longer than a ping interval
    /// (stuck since the outage) and wake every dial loop so it dials now.
    func networkCameBack() async {
        for waiter in networkWaiters.values { waiter.resume(returning: true) }
        networkWaiters.removeAll()
        redialPeersThatLeft()
        for registered in sessions.values {
            let heard = await registered.session.lastReceived
            if isStuck(lastHeard: heard) { registered.close() }
        }
    }

    /// Closes the connection to the peer last reached through `target`, if one is open (its dial
    /// loop then dials again at once). Returns whether there was one.
    @discardableResult
    func closeConnection(to target: DialTarget) -> Bool {
        guard let replica = targetReplica[target.key], let registered = sessions[replica] else { return false }
        registered.close()
        return true
    }

    /// Whether this peer's device ID is ours, or that of another connected replica: machines
    /// cloned from one image share /etc/machine-id and so the derived device ID. Data stays
    /// correct (replicas, not devices, are the CRDT's actors); people need to hear about it.
    private func isDuplicateDevice(_ peer: Hello) -> Bool {
        if peer.device == node.deviceID {
            if !sharedDeviceID {
                sharedDeviceID = true
                logger.warning("\(Self.clonedMachineAdvice(peer.device.description)) (the other one: \(peer.name))")
            }
            return true
        }
        let twin = sessions.values.contains { $0.session.peer.device == peer.device && $0.session.peer.replica != peer.replica }
        if twin {
            logger.warning(
                "two connected machines present the same device ID (a cloned machine-id); `lansync status` on either one says how to fix it",
                metadata: ["peer.device": "\(peer.device)", "peer.name": "\(peer.name)"])
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
    /// the one initiated by the smaller replica ID; a newer one from the same side replaces the older.
    private func register(_ session: SyncSession, replica: ReplicaID, close: @escaping @Sendable () -> Void) async -> Bool {
        if let existing = sessions[replica] {
            let heard = await existing.session.lastReceived
            // Re-read after the suspension: another connection may have registered meanwhile.
            if let current = sessions[replica] {
                // A connection silent for longer than a ping interval is stuck (an outage just ended):
                // the new one wins whoever dialed, so both sides keep the fresh connection.
                let stale = current.session === existing.session && isStuck(lastHeard: heard)
                let keepNew: Bool
                if stale || current.session.initiatedByUs == session.initiatedByUs {
                    keepNew = true
                } else {
                    let preferredIsOurs = node.replicaID < replica
                    keepNew = session.initiatedByUs == preferredIsOurs
                }
                guard keepNew else { return false }
                Task { await current.session.replaced() }
            }
        }
        if sessions[replica] == nil { relayGrace.connected(replica, true) }
        sessions[replica] = Registered(session: session, close: close)
        return true
    }

    private func unregister(_ session: SyncSession, replica: ReplicaID) {
        guard sessions[replica]?.session === session else { return }
        sessions.removeValue(forKey: replica)
        relayGrace.connected(replica, false)
        resumeDisconnectWaiters(replica)
    }

    private func ended(device: (id: String, name: String)?, address: String, error: any Error) async {
        let reason = error is CancellationError ? "the agent stopped" : (error as? ConnectionError)?.description ?? "\(error)"
        let refused: Bool
        switch error as? ConnectionError {
        case .handshake, .versionMismatch, .clockSkew, .handshakeTimeout: refused = true
        case .session(.peerSaidGoodbye(.clockSkew, _)), .session(.clockSkew): refused = true
        default: refused = false
        }
        if case .connectedToSelf = error as? ConnectionError {
            // Our own advertisement (or our own address as a static peer): nothing to tell anyone.
            await directory.forget(address: address)
            logger.debug("dialed ourselves; not dialing that address again", metadata: ["peer.address": "\(address)"])
            return
        }
        if let device {
            switch error as? ConnectionError {
            case .duplicate?, .session(.replaced)?,
                .session(.peerSaidGoodbye(.duplicateConnection, _))?:
                // Both sides dialed at once; the other connection is the one kept.
                logger.debug("a duplicate connection closed", metadata: ["peer.device": "\(device.id)"])
                return
            default: break
            }
            if sessions.values.contains(where: { $0.session.peer.device.description == device.id }) {
                // A newer connection to the same peer replaced this one: the peer is still connected.
                logger.debug("a replaced connection closed", metadata: ["peer.device": "\(device.id)", "reason": "\(reason)"])
                return
            }
            await directory.disconnected(device: device.id, name: device.name, address: address, error: reason, refused: refused)
            logger.info(
                refused ? "peer refused" : "peer disconnected",
                metadata: ["peer.device": "\(device.id)", "peer.name": "\(device.name)", "reason": "\(reason)"])
        } else {
            await directory.address(address, state: refused ? .refused : .unreachable, error: reason)
            logger.notice("connection refused", metadata: ["peer.address": "\(address)", "reason": "\(reason)"])
        }
    }

    // MARK: Local changes

    /// Pushes to every peer as soon as this replica changes: through the library (change feed),
    /// or through another process (the CLI kicks the agent over the control socket after writing;
    /// any other writer is noticed through the replica's files changing, `FileWatch`). Nothing here
    /// wakes on a timer.
    private func watchChanges() async {
        await withDiscardingTaskGroup { tasks in
            tasks.addTask {
                for await _ in self.node.changes() { await self.pushAll() }
            }
            tasks.addTask { await self.watchOtherWriters() }
        }
    }

    /// Writes by other processes to this replica: each commit writes the WAL file, which inotify
    /// reports; the store's change marker (digest and clock) then says whether the replica changed.
    /// Where inotify is unavailable, the marker is read every second instead.
    private nonisolated func watchOtherWriters() async {
        let (changes, changed) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let watch = FileWatch.directory(node.dataDirectory.path)
        if let watch {
            let replicaFile = URL(fileURLWithPath: node.dataDirectory.replicaPath).lastPathComponent
            let thread = Thread {
                while let names = watch.waitForChanges() {
                    if names.contains(where: { $0.hasPrefix(replicaFile) }) { changed.yield() }
                    // At most 20 looks a second while the replica is busy (a catch-up writes
                    // constantly, and every one of our own commits shows here too); none while it
                    // is idle. The CLI's writes are announced at once over the control socket.
                    usleep(50_000)
                }
                changed.finish()
            }
            thread.name = "lansync-replica-watch"
            thread.start()
        } else {
            logger.notice("inotify is unavailable; checking the replica for other writers every second")
            Task {
                while !Task.isCancelled {
                    try? await Task.sleep(for: .seconds(1))
                    changed.yield()
                }
            }
        }
        await withTaskCancellationHandler {
            var marker = try? node.store.changeMarker()
            for await _ in changes {
                let current = try? node.store.changeMarker()
                if current != marker {
                    marker = current
                    await pushAll()
                }
            }
        } onCancel: {
            watch?.stop()
            changed.finish()
        }
    }

    private func pushAll() {
        ourStateCache.changed()
        for registered in sessions.values { registered.session.push() }
    }

    /// Pushes whatever each connected peer lacks (after a write by another process, say).
    public func pushToAllPeers() { pushAll() }

    // MARK: Inspection

    /// What `lansync status` and `lansync peers` show about the running agent.
    public func report() async -> AgentReport {
        var connected = [String: String]()
        for (_, registered) in sessions {
            if let state = await registered.session.announced { connected[registered.session.peer.device.description] = state.digest.description }
        }
        // Who is connected is what is registered now; the directory's record of it can trail a
        // connection that replaced another by a moment.
        let registered = Set(sessions.values.map { $0.session.peer.device.description })
        let peers = await directory.all.map { record in
            var record = record
            if let device = record.deviceID {
                if registered.contains(device) {
                    record.state = .connected
                } else if record.state == .connected {
                    record.state = .disconnected
                }
            }
            return record
        }
        return AgentReport(
            port: port ?? 0, groupTag: group.tag, peers: peers, connectedDigests: connected,
            digest: (try? node.store.syncSummary().digest.description) ?? "", discovery: discoveryReport,
            duplicateDeviceID: sharedDeviceID ? Self.clonedMachineAdvice(node.deviceID.description) : nil,
            parts: partStates.all)
    }

    static func describe(_ address: SocketAddress) -> String {
        switch address {
        case .v4: return "\(address.ipAddress ?? "?"):\(address.port ?? 0)"
        case .v6:
            let ip = address.ipAddress ?? "?"
            // A dual-stack listener sees IPv4 peers as IPv4-mapped IPv6 addresses: show them as IPv4.
            if ip.hasPrefix("::ffff:"), ip.contains(".") { return "\(ip.dropFirst(7)):\(address.port ?? 0)" }
            return "[\(ip)]:\(address.port ?? 0)"
        case .unixDomainSocket: return "local"
        }
    }
}

/// The agent could not listen (the port is taken, the address is not this machine's, ...).
public struct ListenError: Error, CustomStringConvertible, Sendable {
    public let host: String
    public let port: Int
    public let cause: String

    public var description: String {
        "cannot listen on \(PeerAddress(host: host, port: port)): \(cause); is another agent (or program) using "
            + "that port? Choose another with --listen HOST:PORT"
    }
}

/// The running agent's view, for the control socket.
public struct AgentReport: Codable, Sendable {
    public let port: Int
    public let groupTag: String
    public let peers: [PeerRecord]
    /// Connected peers' last announced digests, by device ID.
    public let connectedDigests: [String: String]
    public let digest: String
    public let discovery: DiscoveryReport?
    /// Set, with the fix, when another machine presented this device's own ID.
    public let duplicateDeviceID: String?
    /// The agent's parts and where each stands, in the order they start.
    public let parts: [AgentPartStatus]

    enum CodingKeys: String, CodingKey {
        case port, groupTag = "group_tag", peers, connectedDigests = "connected_digests", digest, discovery
        case duplicateDeviceID = "duplicate_device_id", parts
    }
}

/// A flag set once from any thread.
final class ManagedAtomicFlag: Sendable {
    private let value = Mutex(false)
    func set() { value.withLock { $0 = true } }
    var isSet: Bool { value.withLock { $0 } }
}
