import LANSyncCore
import LANSyncCrypto
import LANSyncWire
import NIOCore
import NIOPosix
import Testing

@testable import LANSyncTransport

/// The responder opens message 1 with every key it holds (its epochs now; its groups later,
/// issue 35) and takes the one that authenticates it, whatever its place among them.
@Suite struct HandshakeDriverTests {
    static func hello(_ name: String) -> @Sendable (UInt16) -> Hello {
        let device = DeviceID(bytes: (0..<16).map { _ in UInt8.random(in: 0...255) })!
        let replica = ReplicaID(high: .random(in: 1...UInt64.max), low: .random(in: 0...UInt64.max))
        return { version in
            Hello(version: version, device: device, name: name, replica: replica, hlc: .zero, wallMilliseconds: 0)
        }
    }

    /// Runs one handshake over loopback: the responder holds `held`, the initiator uses `used`.
    /// Returns the epoch the responder says was used, or the responder's error.
    static func handshake(
        held: [(epoch: UInt64, key: SecureBytes)],
        used: (UInt64, SecureBytes)
    ) async throws
        -> Result<UInt64, ConnectionError>
    {
        try await LoopbackConnection.run { client, serverSide in
            async let initiated: Void = client.executeThenClose { inbound, outbound in
                var frames = inbound.makeAsyncIterator()
                _ = try? await HandshakeDriver.run(
                    initiator: true,
                    psks: [used],
                    staticKey: KeyPair.generate(),
                    hello: Self.hello("initiator"),
                    traffic: TrafficCounter(),
                    inbound: &frames,
                    outbound: outbound
                )
            }
            let result: Result<UInt64, ConnectionError> = try await serverSide.executeThenClose { inbound, outbound in
                var frames = inbound.makeAsyncIterator()
                do {
                    let handshaken = try await HandshakeDriver.run(
                        initiator: false,
                        psks: held,
                        staticKey: KeyPair.generate(),
                        hello: Self.hello("responder"),
                        traffic: TrafficCounter(),
                        inbound: &frames,
                        outbound: outbound
                    )
                    return .success(handshaken.epoch)
                } catch let error as ConnectionError {
                    return .failure(error)
                }
            }
            try await initiated
            return result
        }
    }

    @Test(arguments: [0, 2, 4])
    func theResponderFindsTheKeyTheInitiatorUsedAmongThoseItHolds(place: Int) async throws {
        let held = (0..<5).map { (epoch: UInt64(10 - $0), key: SecureBytes(randomCount: 32)) }
        let result = try await Self.handshake(held: held, used: held[place])
        #expect(result == .success(held[place].epoch))
    }

    @Test func aKeyTheResponderDoesNotHoldIsRefusedAtTheFirstMessage() async throws {
        let held = (0..<3).map { (epoch: UInt64($0), key: SecureBytes(randomCount: 32)) }
        let result = try await Self.handshake(held: held, used: (0, SecureBytes(randomCount: 32)))
        #expect(result == .failure(.handshake(.authenticationFailed)))
    }
}
