import Foundation
import LANSyncCrypto
import Testing

/// One published Noise test vector (cacophony format).
struct NoiseVector: Decodable, CustomTestStringConvertible {
    struct Message: Decodable {
        let payload: String
        let ciphertext: String
    }

    let protocol_name: String
    let init_prologue: String
    let init_psks: [String]?
    let init_static: String?
    let init_ephemeral: String
    let resp_prologue: String
    let resp_psks: [String]?
    let resp_static: String?
    let resp_ephemeral: String
    let handshake_hash: String
    let messages: [Message]

    var testDescription: String { protocol_name }

    static let all: [NoiseVector] = {
        struct File: Decodable { let vectors: [NoiseVector] }
        let url = Bundle.module.url(forResource: "noise-vectors", withExtension: "json")!
        return try! JSONDecoder().decode(File.self, from: Data(contentsOf: url)).vectors
    }()

    var pattern: NoisePattern {
        [NoisePattern.xx, .xxpsk0, .xxpsk3, .nnpsk0].first { $0.protocolName == protocol_name }!
    }
}

func bytes(_ hex: String) -> [UInt8] { [UInt8](hexString: hex)! }
func keyPair(_ hex: String?) throws -> KeyPair? {
    try hex.map { try KeyPair(secretKey: SecureBytes(copying: bytes($0))) }
}

@Suite struct NoiseVectorTests {
    @Test func vectorsCoverEveryToken() {
        #expect(
            Set(NoiseVector.all.map(\.protocol_name)) == [
                "Noise_XX_25519_ChaChaPoly_SHA256", "Noise_NNpsk0_25519_ChaChaPoly_SHA256",
                "Noise_XXpsk3_25519_ChaChaPoly_SHA256",
            ]
        )
    }

    /// Every handshake and transport message matches the published ciphertext byte for byte.
    @Test(arguments: NoiseVector.all)
    func publishedVectors(vector: NoiseVector) throws {
        var initiator = NoiseHandshake(
            pattern: vector.pattern,
            initiator: true,
            prologue: bytes(vector.init_prologue),
            staticKey: try keyPair(vector.init_static),
            psk: vector.init_psks?.first.map { SecureBytes(copying: bytes($0)) },
            ephemeral: try keyPair(vector.init_ephemeral)
        )
        var responder = NoiseHandshake(
            pattern: vector.pattern,
            initiator: false,
            prologue: bytes(vector.resp_prologue),
            staticKey: try keyPair(vector.resp_static),
            psk: vector.resp_psks?.first.map { SecureBytes(copying: bytes($0)) },
            ephemeral: try keyPair(vector.resp_ephemeral)
        )
        let handshakeCount = vector.pattern.messages.count
        for (index, message) in vector.messages.prefix(handshakeCount).enumerated() {
            let fromInitiator = index % 2 == 0
            let ciphertext =
                fromInitiator
                ? try initiator.writeMessage(payload: bytes(message.payload))
                : try responder.writeMessage(payload: bytes(message.payload))
            #expect(ciphertext.hexString == message.ciphertext, "handshake message \(index)")
            let payload = fromInitiator ? try responder.readMessage(ciphertext) : try initiator.readMessage(ciphertext)
            #expect(payload.hexString == message.payload)
        }
        #expect(initiator.isComplete && responder.isComplete)
        #expect(initiator.handshakeHash.hexString == vector.handshake_hash)
        #expect(responder.handshakeHash == initiator.handshakeHash)
        var (initiatorSend, initiatorReceive) = try initiator.split()
        var (responderSend, responderReceive) = try responder.split()
        for (index, message) in vector.messages.enumerated().dropFirst(handshakeCount) {
            let fromInitiator = index % 2 == 0
            let ciphertext =
                fromInitiator
                ? try initiatorSend.encrypt(plaintext: bytes(message.payload))
                : try responderSend.encrypt(plaintext: bytes(message.payload))
            #expect(ciphertext.hexString == message.ciphertext, "transport message \(index)")
            let payload =
                fromInitiator
                ? try responderReceive.decrypt(ciphertext: ciphertext)
                : try initiatorReceive.decrypt(ciphertext: ciphertext)
            #expect(payload.hexString == message.payload)
        }
    }
}

@Suite struct NoiseBehaviourTests {
    let psk = SecureBytes(randomCount: 32)
    let prologue = Array("LANSync/1".utf8)

    func pair(initiatorPSK: SecureBytes? = nil, responderPSK: SecureBytes? = nil) -> (NoiseHandshake, NoiseHandshake) {
        (
            NoiseHandshake(
                pattern: .xxpsk0,
                initiator: true,
                prologue: prologue,
                staticKey: .generate(),
                psk: initiatorPSK ?? psk
            ),
            NoiseHandshake(
                pattern: .xxpsk0,
                initiator: false,
                prologue: prologue,
                staticKey: .generate(),
                psk: responderPSK ?? psk
            )
        )
    }

    @Test func xxpsk0AuthenticatesBothStaticKeys() throws {
        let initiatorKey = KeyPair.generate()
        let responderKey = KeyPair.generate()
        var a = NoiseHandshake(pattern: .xxpsk0, initiator: true, prologue: prologue, staticKey: initiatorKey, psk: psk)
        var b = NoiseHandshake(
            pattern: .xxpsk0,
            initiator: false,
            prologue: prologue,
            staticKey: responderKey,
            psk: psk
        )
        _ = try b.readMessage(try a.writeMessage(payload: Array("hello".utf8)))
        _ = try a.readMessage(try b.writeMessage())
        _ = try b.readMessage(try a.writeMessage())
        #expect(a.remoteStaticKey == responderKey.publicKey)
        #expect(b.remoteStaticKey == initiatorKey.publicKey)
        #expect(a.handshakeHash == b.handshakeHash)
    }

    /// A stranger without the group secret fails on the very first message: the responder learns
    /// nothing and never reveals its static key.
    @Test func wrongGroupSecretFailsAtTheFirstMessage() throws {
        var (stranger, member) = pair(initiatorPSK: SecureBytes(randomCount: 32))
        let first = try stranger.writeMessage(payload: Array("let me in".utf8))
        #expect(throws: NoiseError.authenticationFailed) { try member.readMessage(first) }
        #expect(member.remoteStaticKey == nil)
        #expect(throws: NoiseError.outOfTurn) { try member.writeMessage() }
    }

    @Test func tamperedTruncatedOrReplayedMessagesFail() throws {
        var (a, b) = pair()
        var first = try a.writeMessage()
        first[first.count - 1] ^= 1
        #expect(throws: NoiseError.self) { try b.readMessage(first) }

        var (c, d) = pair()
        let message = try c.writeMessage()
        #expect(throws: NoiseError.self) { try d.readMessage(Array(message.prefix(20))) }

        // Transport: replaying or reordering a frame breaks the nonce sequence.
        var (e, f) = pair()
        _ = try f.readMessage(try e.writeMessage())
        _ = try e.readMessage(try f.writeMessage())
        _ = try f.readMessage(try e.writeMessage())
        var (send, _) = try e.split()
        var (_, receive) = try f.split()
        let one = try send.encrypt(plaintext: [1])
        let two = try send.encrypt(plaintext: [2])
        #expect(try receive.decrypt(ciphertext: one) == [1])
        #expect(throws: NoiseError.authenticationFailed) { try receive.decrypt(ciphertext: one) }
        var fresh = receive
        #expect(try fresh.decrypt(ciphertext: two) == [2])
    }

    @Test func lowOrderEphemeralKeyIsRefused() throws {
        var (a, b) = pair()
        _ = try b.readMessage(try a.writeMessage())
        var reply = try b.writeMessage()
        for index in 0..<32 { reply[index] = 0 }  // the responder's ephemeral key: the zero point
        #expect(throws: NoiseError.self) { try a.readMessage(reply) }
    }
}

/// Completes Noise_XXpsk0 handshakes with an independent implementation, the `noiseprotocol`
/// package from PyPI (installed by scripts/setup), in both roles.
@Suite(.serialized) struct NoiseInteroperabilityTests {
    final class Peer {
        let process = Process()
        let input = Pipe()
        let output = Pipe()
        var buffer = Data()

        init(role: String, psk: [UInt8], secret: [UInt8], prologue: [UInt8]) throws {
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
                .appendingPathComponent("../Interop/noise_peer.py").standardizedFileURL.path
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["python3", script, role, psk.hexString, secret.hexString, prologue.hexString]
            process.standardInput = input
            process.standardOutput = output
            try process.run()
        }

        func send(_ bytes: [UInt8]) { input.fileHandleForWriting.write(Data((bytes.hexString + "\n").utf8)) }

        func line() -> String {
            while true {
                if let newline = buffer.firstIndex(of: 0x0A) {
                    let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                    buffer.removeSubrange(buffer.startIndex...newline)
                    return line
                }
                let chunk = output.fileHandleForReading.availableData
                if chunk.isEmpty { return "" }
                buffer.append(chunk)
            }
        }

        func receive() -> [UInt8] { [UInt8](hexString: line()) ?? [] }

        func finish() {
            try? input.fileHandleForWriting.close()
            process.waitUntilExit()
        }
    }

    @Test(arguments: [true, false])
    func handshakeAndTransportWithPython(weInitiate: Bool) throws {
        let psk = randomBytes(32)
        let ours = KeyPair.generate()
        let theirs = KeyPair.generate()
        let prologue = Array("LANSync/1".utf8)
        let peer = try Peer(
            role: weInitiate ? "responder" : "initiator",
            psk: psk,
            secret: theirs.secretKey.withUnsafeBytes { [UInt8]($0) },
            prologue: prologue
        )
        defer { peer.finish() }
        var handshake = NoiseHandshake(
            pattern: .xxpsk0,
            initiator: weInitiate,
            prologue: prologue,
            staticKey: ours,
            psk: SecureBytes(copying: psk)
        )
        while !handshake.isComplete {
            if handshake.isOurTurn {
                peer.send(try handshake.writeMessage(payload: Array("swift payload".utf8)))
            } else {
                let payload = try handshake.readMessage(peer.receive())
                #expect(payload == Array("python payload".utf8))
            }
        }
        let summary = try JSONSerialization.jsonObject(with: Data(peer.line().utf8)) as? [String: String]
        #expect(summary?["remote_static"] == ours.publicKey.hexString, "python must learn our static key")
        #expect(summary?["handshake_hash"] == handshake.handshakeHash.hexString)
        #expect(handshake.remoteStaticKey == theirs.publicKey)
        var (send, receive) = try handshake.split()
        for text in ["first", "second", String(repeating: "x", count: 5_000)] {
            peer.send(try send.encrypt(plaintext: Array(text.utf8)))
            #expect(try receive.decrypt(ciphertext: peer.receive()) == Array(("echo:" + text).utf8))
        }
    }
}
