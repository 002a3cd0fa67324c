package import LANSyncCrypto
package import LANSyncSession
package import LANSyncWire
package import NIOCore
import NIOExtras
import Synchronization

/// Bytes on the wire (frame headers included), for the benchmark's efficiency figures.
package final class TrafficCounter: Sendable {
    private let counts = Mutex<(sent: Int, received: Int)>((0, 0))

    package init() {}

    package func add(sent: Int = 0, received: Int = 0) {
        counts.withLock {
            $0.sent += sent
            $0.received += received
        }
    }

    package var sent: Int { counts.withLock { $0.sent } }
    package var received: Int { counts.withLock { $0.received } }
}

/// A TCP connection after framing: whole frames in, whole frames out.
package typealias FramedChannel = NIOAsyncChannel<ByteBuffer, ByteBuffer>

extension NIOAsyncChannel where Inbound == ByteBuffer, Outbound == ByteBuffer {
    /// `channel` with u16 BE length-prefixed frames each way (protocol §3), wrapped for async use
    /// (`wrapping`). Called in a bootstrap's channel initializer, on the channel's event loop.
    package static func framing(_ channel: any Channel) throws -> FramedChannel {
        try channel.pipeline.syncOperations.addHandlers(
            ByteToMessageHandler(LengthFieldBasedFrameDecoder(lengthFieldBitLength: .twoBytes)),
            LengthFieldPrepender(lengthFieldBitLength: .twoBytes)
        )
        return try FramedChannel.wrapping(channel)
    }
}

/// Why a connection ended. Shown in logs and in `lansync peers` as the peer's last error.
package enum ConnectionError: Error, Equatable, Sendable, CustomStringConvertible {
    case handshake(NoiseError)
    case handshakeTimeout
    case closedByPeer
    case malformed(String)
    /// No protocol version in common; `theirs` when the peer told us what it speaks.
    case versionMismatch(theirs: ClosedRange<UInt16>?)
    case clockSkew(aheadMilliseconds: Int64, bound: UInt64)
    case connectedToSelf
    case duplicate
    /// We refused the peer: the group's member records do not let it in (removed, or a new key
    /// nobody vouched for), and why.
    case notAMember(String)
    /// The peer was away during a removal: we handed it the group's new epoch and closed.
    case handedOver(epoch: UInt64)
    /// The sync session ended (after the handshake), and why.
    case session(SessionEnd)

    package var description: String {
        switch self {
        case .handshake(.authenticationFailed):
            return "handshake failed: not in our group (wrong group secret) or not a LANSync peer"
        case .handshake(let error): return "handshake failed: \(error)"
        case .handshakeTimeout: return "handshake timed out"
        case .closedByPeer: return "connection closed by the peer"
        case .malformed(let reason): return "malformed data from the peer: \(reason)"
        case .versionMismatch(let theirs):
            let ours = WireProtocol.versions
            func text(_ versions: ClosedRange<UInt16>) -> String {
                versions.count == 1 ? "\(versions.lowerBound)" : "\(versions.lowerBound)–\(versions.upperBound)"
            }
            guard let theirs else { return "no protocol version in common; upgrade the older lansync" }
            let spoken = "the peer speaks protocol \(text(theirs)), this node \(text(ours))"
            if theirs.upperBound < ours.lowerBound {
                return
                    "no protocol version in common (\(spoken)): upgrade lansync on the peer (versions before 4 do not "
                    + "check changes' signatures, and 4 keeps rows a parent's cascade deleted; all devices of a group run 5)"
            }
            return "no protocol version in common (\(spoken)): upgrade lansync on this node"
        case .clockSkew(let ahead, let bound):
            return "clock skew: the peer's clock is \(ahead / 1000) s \(ahead > 0 ? "ahead of" : "behind") ours "
                + "(bound \(bound / 1000) s); fix the wrong clock (timedatectl, NTP)"
        case .connectedToSelf: return "connected to itself"
        case .duplicate: return "a connection to this peer exists already"
        case .notAMember(let reason): return "refused: \(reason)"
        case .handedOver(let epoch):
            return
                "handed the peer the group's epoch \(epoch) (it was away during a removal); it reconnects with its key"
        case .session(let why): return why.description
        }
    }
}

/// What the handshake established: who the peer is, and the keys for this connection.
package struct Handshaken {
    package let peer: Hello
    /// The group epoch whose key the handshake used (an earlier one: the peer was away during a removal).
    package let epoch: UInt64
    package let peerStaticKey: [UInt8]
    package let send: NoiseCipherState
    package let receive: NoiseCipherState
    /// Which of the keys given the handshake used (the responder's trial; 0 for an initiator):
    /// a listener serving several groups finds the peer's group by it.
    package let keyIndex: Int
}

/// The handshake as a sequence of frames: Noise_XXpsk0 with the group's PSK; the first message
/// carries the initiator's protocol versions, the second and third each side's `Hello`.
package enum HandshakeDriver {
    package static func run(
        initiator: Bool,
        psks: [(epoch: UInt64, key: SecureBytes)],
        staticKey: KeyPair,
        hello: @Sendable (UInt16) -> Hello,
        traffic: TrafficCounter,
        inbound: inout NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator,
        outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>
    ) async throws -> Handshaken {
        try await run(
            initiator: initiator,
            psks: psks,
            staticKey: staticKey,
            helloForKey: { version, _ in hello(version) },
            traffic: traffic,
            inbound: &inbound,
            outbound: outbound
        )
    }

    /// The same, with our `Hello` chosen by the key the handshake uses (`helloForKey(version,
    /// index into psks)`): a responder serving several groups answers as the member of the group
    /// whose key opened the first message.
    package static func run(
        initiator: Bool,
        psks: [(epoch: UInt64, key: SecureBytes)],
        staticKey: KeyPair,
        helloForKey hello: @Sendable (UInt16, Int) -> Hello,
        traffic: TrafficCounter,
        inbound: inout NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator,
        outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>
    ) async throws -> Handshaken {
        precondition(!psks.isEmpty, "a handshake needs a group key")
        func handshake(_ psk: SecureBytes) -> NoiseHandshake {
            NoiseHandshake(
                pattern: .xxpsk0,
                initiator: initiator,
                prologue: WireProtocol.prologue,
                staticKey: staticKey,
                psk: psk
            )
        }
        // An initiator uses the epoch it chose. A responder opens message 1 with each key it
        // holds, newest epoch first (its payload decrypts only under the key the initiator used),
        // and always makes `NoiseKeyTrial.trials` trials at least, so the time it takes does not
        // tell a peer how many keys it holds (protocol §3).
        var noise = handshake(psks[0].key)
        var epoch = psks[0].epoch
        var keyIndex = 0
        var firstRead = !initiator
        func receive() async throws -> [UInt8] {
            guard let frame = try await inbound.next() else { throw ConnectionError.closedByPeer }
            traffic.add(received: frame.readableBytes + 2)
            let bytes = Array(frame.readableBytesView)
            if firstRead {
                firstRead = false
                guard
                    let opened = NoiseKeyTrial.respond(
                        to: bytes,
                        pattern: .xxpsk0,
                        prologue: WireProtocol.prologue,
                        staticKey: staticKey,
                        psks: psks.map(\.key)
                    )
                else { throw ConnectionError.handshake(.authenticationFailed) }
                noise = opened.handshake
                epoch = psks[opened.index].epoch
                keyIndex = opened.index
                return opened.payload
            }
            do {
                return try noise.readMessage(bytes)
            } catch {
                throw ConnectionError.handshake(error)
            }
        }
        func send(_ payload: [UInt8]) async throws {
            let message: [UInt8]
            do { message = try noise.writeMessage(payload: payload) } catch { throw ConnectionError.handshake(error) }
            traffic.add(sent: message.count + 2)
            try await outbound.write(ByteBuffer(bytes: message))
        }
        let peer: Hello
        do {
            if initiator {
                try await send(VersionOffer().encoded())
                let reply = try await receive()
                if let refusal = try VersionRefusal.decode(reply) {
                    throw ConnectionError.versionMismatch(theirs: refusal.versions)
                }
                peer = try Hello.decode(reply)
                guard WireProtocol.versions.contains(peer.version) else {
                    throw ConnectionError.versionMismatch(theirs: peer.version...peer.version)
                }
                try await send(hello(peer.version, keyIndex).encoded())
            } else {
                let offer = try VersionOffer.decode(try await receive())
                guard let version = offer.agreed() else {
                    // Said in message 2, so the initiator can tell this from a wrong group secret.
                    try await send(VersionRefusal().encoded())
                    throw ConnectionError.versionMismatch(theirs: offer.versions)
                }
                try await send(hello(version, keyIndex).encoded())
                let payload = try await receive()
                do {
                    peer = try Hello.decode(payload)
                } catch {
                    // Message 3 was read, so the handshake is complete: the goodbye goes sealed
                    // like any transport message, and the peer learns why it was refused.
                    let sender = SealedSender(cipher: try noise.split().send, outbound: outbound, traffic: traffic)
                    try? await sender.send(.goodbye(code: .malformed, reason: error.description))
                    throw error
                }
                guard peer.version == version else {
                    throw ConnectionError.versionMismatch(theirs: peer.version...peer.version)
                }
            }
        } catch let error as WireError {
            throw ConnectionError.malformed(error.reason)
        }
        guard let key = noise.remoteStaticKey else { throw ConnectionError.handshake(.outOfTurn) }
        let (send, receive) = try noise.split()
        return Handshaken(
            peer: peer,
            epoch: epoch,
            peerStaticKey: key,
            send: send,
            receive: receive,
            keyIndex: keyIndex
        )
    }
}

/// The sending half of an established connection: seals and chunks messages, one at a time.
///
/// One at a time includes the wait for the socket: a message's frames take the next nonces when
/// they are sealed, so the next message is sealed only once these are handed to the channel.
/// Otherwise, while a catch-up's batch waited for a full socket (backpressure), the actor let a
/// keepalive ping in, which sealed the following nonce and could be written first: the peer then
/// saw nonces out of order and closed the connection as tampered with ("a frame failed
/// authentication"), and the catch-up started over from what was merged.
package actor SealedSender {
    private var cipher: NoiseCipherState
    private let outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>
    private let traffic: TrafficCounter
    /// Whether a message is being sealed and written; others wait their turn in `waiting`.
    private var writing = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    package init(cipher: NoiseCipherState, outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>, traffic: TrafficCounter)
    {
        self.cipher = cipher
        self.outbound = outbound
        self.traffic = traffic
    }

    /// Sends `message`; a bulk batch (`inBackground`) is encoded and compressed on a bulk-work thread.
    package func send(_ message: WireMessage, inBackground: Bool = false) async throws {
        try await send(encoded: inBackground ? try await BulkWork.run { message.wireBytes() } : message.wireBytes())
    }

    /// Sends a message already encoded (tests send bytes no encoder would write).
    package func send(encoded bytes: [UInt8]) async throws {
        while writing { await withCheckedContinuation { waiting.append($0) } }
        writing = true
        defer {
            writing = false
            if !waiting.isEmpty { waiting.removeFirst().resume() }
        }
        var frames = [ByteBuffer]()
        for chunk in Framing.chunks(of: bytes) {
            let sealed = try cipher.encrypt(plaintext: chunk)
            frames.append(ByteBuffer(bytes: sealed))
        }
        traffic.add(sent: frames.reduce(0) { $0 + $1.readableBytes + 2 })
        // Written together, so frames of two messages never interleave; suspends while the
        // socket is not writable (backpressure).
        try await outbound.write(contentsOf: frames)
    }
}

/// The receiving half: opens frames in order (any tampering, replay or reordering fails
/// authentication) and reassembles messages within the size limit.
package struct SealedReceiver {
    var cipher: NoiseCipherState
    var inbound: NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator
    var reassembler = Framing.Reassembler()
    let traffic: TrafficCounter

    package init(
        cipher: NoiseCipherState,
        inbound: NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator,
        traffic: TrafficCounter
    ) {
        self.cipher = cipher
        self.inbound = inbound
        self.traffic = traffic
    }

    /// The next message, or nil when the peer closed the connection cleanly.
    package mutating func next() async throws -> WireMessage? {
        while let frame = try await inbound.next() {
            traffic.add(received: frame.readableBytes + 2)
            let plaintext: [UInt8]
            do {
                plaintext = try cipher.decrypt(ciphertext: Array(frame.readableBytesView))
            } catch {
                throw ConnectionError.malformed("a frame failed authentication (tampered, replayed or reordered)")
            }
            let message: [UInt8]
            do throws(WireError) {
                guard let complete = try reassembler.add(plaintext) else { continue }
                message = complete
            } catch {
                throw ConnectionError.malformed(error.reason)
            }
            do {
                // A catch-up's batch takes a millisecond or more to decompress and decode: on a
                // bulk-work thread, not on the cooperative pool the app's own tasks resume on.
                if message.count >= Self.decodedInBackground {
                    return try await BulkWork.run { try WireMessage.decode(message) }
                }
                return try WireMessage.decode(message)
            } catch let error as WireError {
                throw ConnectionError.malformed(error.reason)
            }
        }
        return nil
    }

    /// Messages at least this large are decoded on a bulk-work thread (a live push is ~300 bytes).
    package static let decodedInBackground = 16 * 1024
}
