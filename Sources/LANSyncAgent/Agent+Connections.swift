import Foundation
import LANSync
import LANSyncCrypto
import LANSyncDiscovery
import LANSyncSession
import LANSyncTransport
import LANSyncWire
import Logging
import NIOCore
import NIOExtras
import NIOPosix
import ServiceLifecycle
import Synchronization

/// Connections: accepting, the handshake, registration, the sync session until the end, and
/// what is recorded when a connection ends.
extension Agent {
    func accept(_ channel: FramedChannel) async {
        let address = channel.channel.remoteAddress.map(Self.describe) ?? "unknown"
        // The limit is per group: the listener of a node in several groups takes every group's.
        guard connections < configuration.maxConnections * max(1, router?.all.count ?? 1) else {
            logger.warning("refused a connection: too many", metadata: ["peer.address": "\(address)"])
            // Closed through its async wrapper: released unfinished, NIO would trap.
            try? await channel.executeThenClose { _, _ in }
            return
        }
        await run(channel, keys: nil, address: address, dialed: nil)
    }

    /// Handshake, checks, registration, then the sync session until the connection ends. Returns
    /// why it ended. `keys`: the group key to dial with (we initiate), or nil when the peer dialed
    /// us (any epoch's key we hold is accepted, then checked against the member records).
    @discardableResult
    nonisolated func run(
        _ channel: FramedChannel,
        keys: [(epoch: UInt64, key: SecureBytes)]?,
        address: String,
        dialed: DialTarget?
    ) async -> (any Error)? {
        let initiator = keys != nil
        // A listener serving several groups tries every group's keys; the session then runs in the
        // group whose key opened the first message (`owner`).
        let routed = keys == nil ? router?.responderKeys() : nil
        let psks = keys ?? routed?.map { (epoch: $0.epoch, key: $0.key) } ?? groupState.psks
        var owner = self
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
                let node = node
                let signingKey = identity.signingKey.publicKey
                let handshaken: Handshaken
                do {
                    handshaken = try await HandshakeDriver.run(
                        initiator: initiator,
                        psks: psks,
                        staticKey: identity.keyPair,
                        helloForKey: { version, index in
                            // The device and its key are the node's; the replica is the group's.
                            let node = routed?[index].agent.node ?? node
                            return Hello(
                                version: version,
                                device: identity.deviceID,
                                name: identity.name,
                                replica: node.replicaID,
                                hlc: (try? node.store.syncSummary().hlc) ?? .zero,
                                wallMilliseconds: node.clock.now(),
                                signingKey: signingKey
                            )
                        },
                        traffic: traffic,
                        inbound: &iterator,
                        outbound: outbound
                    )
                } catch {
                    throw timedOut.isSet ? ConnectionError.handshakeTimeout : error
                }
                timeout.cancel()
                if let routed { owner = routed[handshaken.keyIndex].agent }
                peerDevice = (handshaken.peer.device.description, handshaken.peer.name)
                try await owner.established(
                    channel: channel,
                    handshaken: handshaken,
                    inbound: iterator,
                    outbound: outbound,
                    initiator: initiator,
                    address: address,
                    dialed: dialed
                )
            }
        } catch {
            timeout.cancel()
            outcome = error
            await owner.ended(device: peerDevice, address: address, error: error)
        }
        await countConnection(-1)
        return outcome
    }

    func countConnection(_ change: Int) { connections += change }

    /// How long a refused or handed-over peer has to read our last messages and close. A busy
    /// peer merging a hand-over's records can take more than a second to get there, and closing
    /// first resets the connection: its kernel then drops the records it had not read yet, and it
    /// stays in the old epoch.
    nonisolated static let peerReadGrace = TimeAmount.seconds(10)

    /// Ends a connection right after the handshake without losing what we just sent (a refusal,
    /// or a hand-over's records): the peer has sent its opening state meanwhile, and closing with
    /// that unread makes the kernel reset the connection, which can discard our last messages
    /// before the peer reads them. So: half-close (the peer reads everything, then end of stream),
    /// read until the peer closes too, at most `peerReadGrace`.
    nonisolated static func closeAfterPeerRead(
        _ channel: FramedChannel,
        inbound: NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator
    ) async {
        channel.channel.close(mode: .output, promise: nil)
        let deadline = channel.channel.eventLoop.scheduleTask(in: peerReadGrace) { channel.channel.close(promise: nil) }
        var rest = inbound
        while (try? await rest.next()) != nil {}
        deadline.cancel()
    }

    nonisolated func established(
        channel: FramedChannel,
        handshaken: Handshaken,
        inbound: NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator,
        outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>,
        initiator: Bool,
        address: String,
        dialed: DialTarget?
    ) async throws {
        let peer = handshaken.peer
        let sender = SealedSender(cipher: handshaken.send, outbound: outbound, traffic: traffic)
        if peer.replica == node.replicaID { throw ConnectionError.connectedToSelf }
        let offset = Int64(bitPattern: peer.wallMilliseconds) - Int64(node.clock.now())
        if offset.magnitude > configuration.maxClockSkewMilliseconds {
            let error = ConnectionError.clockSkew(
                aheadMilliseconds: offset,
                bound: configuration.maxClockSkewMilliseconds
            )
            try? await sender.send(.goodbye(code: .clockSkew, reason: error.description))
            throw error
        }
        if let dialed { await remember(dialed, replica: peer.replica) }
        let duplicateDevice = await isDuplicateDevice(peer)
        switch await admission(peer, key: handshaken.peerStaticKey, epoch: handshaken.epoch) {
        case .admit: break
        case .handOver:
            try await handOver(to: peer, sender: sender)
            await Self.closeAfterPeerRead(channel, inbound: inbound)
            throw ConnectionError.handedOver(epoch: groupState.epoch)
        case .refuse(let reason):
            try? await sender.send(.goodbye(code: .notAMember, reason: reason))
            await Self.closeAfterPeerRead(channel, inbound: inbound)
            throw ConnectionError.notAMember(reason)
        }
        let session = SyncSession(
            peer: peer,
            node: node,
            sender: sender,
            configuration: configuration,
            directory: directory,
            relayGrace: relayGrace,
            ourStateCache: ourStateCache,
            logger: logger,
            initiatedByUs: initiator,
            close: { channel.channel.close(promise: nil) }
        )
        guard await register(session, replica: peer.replica, close: { channel.channel.close(promise: nil) }) else {
            // The address led to a peer already connected: not a peer of its own in `lansync peers`.
            await directory.forget(address: address)
            try? await sender.send(
                .goodbye(code: .duplicateConnection, reason: "a connection to this peer exists already")
            )
            throw ConnectionError.duplicate
        }
        // Recorded as connected only once registered: the end of a connection this one replaces
        // is reported after `register`, and then sees this one and records nothing.
        let rekeyed = await directory.connected(
            device: peer.device.description,
            name: peer.name,
            address: address,
            publicKey: handshaken.peerStaticKey.hexString,
            clockOffset: offset,
            now: Int64(node.clock.now())
        )
        // Set while a twin is seen, cleared by the next connection without one (a reinstalled
        // device's old connection can still be open for a moment when the new one arrives).
        await directory.update(device: peer.device.description) { $0.duplicateDevice = duplicateDevice ? true : nil }
        if rekeyed && !duplicateDevice {
            logger.notice(
                "peer re-keyed: its device key changed (a reinstall); accepted through group membership",
                metadata: ["peer.device": "\(peer.device)", "peer.name": "\(peer.name)"]
            )
        }
        logger.info(
            "peer connected",
            metadata: ["peer.device": "\(peer.device)", "peer.name": "\(peer.name)", "peer.address": "\(address)"]
        )
        var receiver = SealedReceiver(cipher: handshaken.receive, inbound: inbound, traffic: traffic)
        // Unregistered before this returns, so that when the connection's end is reported, a session
        // still registered for the peer is a newer connection that replaced this one. (Also when the
        // opening state cannot be sent: a peer that refuses us closes right after the handshake,
        // and a registration left behind kept the dial loop waiting for good.)
        do {
            do {
                try await sender.send(try await session.opening())
            } catch {
                // A peer that refuses us, or hands us a new epoch, closes right after its goodbye:
                // what it sent is in what we received (the channel is closed, so this reads only
                // what arrived). A hand-over's records are merged even so.
                while let message = try? await receiver.next() {
                    switch message {
                    case .records: await session.handle(message)
                    case .goodbye(let code, let reason):
                        throw ConnectionError.session(.peerSaidGoodbye(code: code, reason: reason))
                    default: throw error
                    }
                }
                throw error
            }
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

    /// The sync session's two loops: receive (never writes) and send (pings included: the
    /// session's timer queues them). Returns once the connection has closed; the session says why.
    nonisolated func serve(
        _ session: SyncSession,
        channel: FramedChannel,
        sender: SealedSender,
        receiver: inout SealedReceiver
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

    func ended(device: (id: String, name: String)?, address: String, error: any Error) async {
        let reason =
            error is CancellationError ? "the agent stopped" : (error as? ConnectionError)?.description ?? "\(error)"
        let refused: Bool
        switch error as? ConnectionError {
        case .handshake, .versionMismatch, .clockSkew, .handshakeTimeout, .notAMember: refused = true
        case .session(.peerSaidGoodbye(.clockSkew, _)), .session(.clockSkew),
            .session(.peerSaidGoodbye(.notAMember, _)):
            refused = true
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
            if sessions.all.contains(where: { $0.session.peer.device.description == device.id }) {
                // A newer connection to the same peer replaced this one: the peer is still connected.
                logger.debug(
                    "a replaced connection closed",
                    metadata: ["peer.device": "\(device.id)", "reason": "\(reason)"]
                )
                return
            }
            await directory.disconnected(
                device: device.id,
                name: device.name,
                address: address,
                error: reason,
                refused: refused
            )
            logger.info(
                refused ? "peer refused" : "peer disconnected",
                metadata: ["peer.device": "\(device.id)", "peer.name": "\(device.name)", "reason": "\(reason)"]
            )
        } else {
            await directory.address(address, state: refused ? .refused : .unreachable, error: reason)
            logger.notice("connection refused", metadata: ["peer.address": "\(address)", "reason": "\(reason)"])
        }
    }
}
