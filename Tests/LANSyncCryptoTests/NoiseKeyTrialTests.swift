import LANSyncCrypto
import Testing

/// One listener for several groups: the responder finds the initiator's group by the key that
/// opens its first message, and the handshake then completes with that group's key.
@Suite struct NoiseKeyTrialTests {
    static let prologue = Array("LANSync wire protocol".utf8)

    /// An initiator of the group of `psk`, ready to write its first message.
    static func initiator(psk: SecureBytes) -> NoiseHandshake {
        NoiseHandshake(pattern: .xxpsk0, initiator: true, prologue: prologue, staticKey: KeyPair.generate(), psk: psk)
    }

    /// A responder with `psks` opening `message`.
    static func respond(
        to message: [UInt8],
        psks: [SecureBytes],
        staticKey: KeyPair = KeyPair.generate()
    ) -> NoiseKeyTrial.Opened? {
        NoiseKeyTrial.respond(to: message, pattern: .xxpsk0, prologue: prologue, staticKey: staticKey, psks: psks)
    }

    @Test(arguments: [1, 3, 50, 70]) func theGroupWhoseKeyOpensTheFirstMessageIsFoundAndTheHandshakeCompletes(
        groups: Int
    ) throws {
        let psks = (0..<groups).map { _ in SecureBytes(randomCount: 32) }
        let responderKey = KeyPair.generate()
        for chosen in Set([0, groups / 2, groups - 1]) {
            var initiator = Self.initiator(psk: psks[chosen])
            let first = try initiator.writeMessage(payload: [1, 2, 3])
            let opened = try #require(Self.respond(to: first, psks: psks, staticKey: responderKey))
            #expect(opened.index == chosen)
            #expect(opened.payload == [1, 2, 3])
            var responder = opened.handshake
            _ = try initiator.readMessage(try responder.writeMessage(payload: [4]))
            _ = try responder.readMessage(try initiator.writeMessage(payload: [5]))
            #expect(initiator.isComplete && responder.isComplete)
            #expect(initiator.handshakeHash == responder.handshakeHash)
            #expect(initiator.remoteStaticKey == responderKey.publicKey)
        }
    }

    @Test func aMessageNoKeyOpensIsRefusedAndTamperingToo() throws {
        let psks = (0..<5).map { _ in SecureBytes(randomCount: 32) }
        var outsider = Self.initiator(psk: SecureBytes(randomCount: 32))
        let first = try outsider.writeMessage(payload: [1])
        #expect(Self.respond(to: first, psks: psks) == nil)
        var member = Self.initiator(psk: psks[2])
        var tampered = try member.writeMessage(payload: [1])
        tampered[tampered.count - 1] ^= 1
        #expect(Self.respond(to: tampered, psks: psks) == nil)
        #expect(Self.respond(to: [], psks: psks) == nil)
        #expect(Self.respond(to: first, psks: []) == nil)
    }
}
