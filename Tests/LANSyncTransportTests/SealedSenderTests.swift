import LANSyncCore
import LANSyncCrypto
import LANSyncWire
import NIOCore
import NIOPosix
import Testing

@testable import LANSyncTransport

/// Messages sent from two tasks at once, while the socket is full, must reach the peer in the
/// order their frames were sealed: a keepalive ping sealed while a catch-up batch waited for the
/// socket, then written before it, made the peer close the connection as tampered with. (Before
/// the fix, this test failed with "a frame failed authentication" in two runs of three.)
@Suite struct SealedSenderTests {
    @Test func concurrentSendsUnderBackpressureArriveSealedInOrder() async throws {
        try await LoopbackConnection.run { client, server in
            try await Self.exchange(client: client, server: server)
        }
    }

    /// Sends large incompressible deltas (megabytes: far more than the socket buffers hold while
    /// nobody reads) from one task and pings from another, then reads it all.
    static func exchange(client: FramedChannel, server: FramedChannel) async throws {
        // The session keys of a Noise handshake run in memory (the wire handshake is tested elsewhere).
        let psk = SecureBytes(randomCount: 32)
        var initiator = NoiseHandshake(
            pattern: .xxpsk0,
            initiator: true,
            prologue: [],
            staticKey: KeyPair.generate(),
            psk: psk
        )
        var responder = NoiseHandshake(
            pattern: .xxpsk0,
            initiator: false,
            prologue: [],
            staticKey: KeyPair.generate(),
            psk: psk
        )
        _ = try responder.readMessage(try initiator.writeMessage())
        _ = try initiator.readMessage(try responder.writeMessage())
        _ = try responder.readMessage(try initiator.writeMessage())
        let (sending, _) = try initiator.split()
        let (_, receiving) = try responder.split()
        try await client.executeThenClose { _, clientOutbound in
            try await server.executeThenClose { serverInbound, _ in
                let sender = SealedSender(cipher: sending, outbound: clientOutbound, traffic: TrafficCounter())
                let batches = 40
                let pings = 2_000
                async let bulk: Void = {
                    for index in 0..<batches {
                        try await sender.send(.delta(Self.incompressibleDelta(index)), inBackground: true)
                    }
                }()
                async let keepalive: Void = {
                    for value in 0..<pings {
                        try await sender.send(.ping(UInt64(value)))
                        try await Task.sleep(for: .microseconds(100))
                    }
                }()
                // Let the socket fill up before anything is read.
                try await Task.sleep(for: .milliseconds(300))
                var receiver = SealedReceiver(
                    cipher: receiving,
                    inbound: serverInbound.makeAsyncIterator(),
                    traffic: TrafficCounter()
                )
                var deltas = 0
                var pingsSeen = 0
                while deltas < batches || pingsSeen < pings {
                    switch try await receiver.next() {
                    case .delta:
                        deltas += 1
                        // A slow reader: the socket fills and drains again and again meanwhile.
                        try await Task.sleep(for: .milliseconds(5))
                    case .ping(let value):
                        #expect(value == UInt64(pingsSeen), "pings arrive in the order they were sent")
                        pingsSeen += 1
                    case nil:
                        Issue.record("the connection closed early")
                        return
                    default: Issue.record("an unexpected message")
                    }
                }
                try await bulk
                try await keepalive
                #expect(deltas == batches)
            }
        }
    }

    /// About 1 MB of entries with random payloads, which Zstandard cannot shrink much.
    static func incompressibleDelta(_ index: Int) -> Delta {
        let replica = ReplicaID(high: 9, low: UInt64(index))
        var random = SplitMix64(seed: UInt64(index))
        let entries = (1...1_000).map { counter in
            let text = (0..<120).map { _ in String(random.next() % 1_000_000, radix: 36) }.joined()
            return Entry(
                id: "e-\(index)-\(counter)",
                stream: "taps",
                originDevice: DeviceID(bytes: [UInt8](repeating: 1, count: 16))!,
                dot: Dot(replica: replica, counter: UInt64(counter)),
                hlc: HybridTimestamp(rawValue: UInt64(counter)),
                wallMilliseconds: 0,
                payload: "\"\(text)\""
            )
        }
        return Delta(entries: entries, coverage: [.init(replica: replica, from: 0, through: 1_000)])
    }
}
