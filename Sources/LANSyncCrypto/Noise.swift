/// The Noise Protocol Framework (revision 34) with X25519, ChaChaPoly and SHA-256, as a pure
/// state machine: it takes and returns bytes and never touches a socket, so it is tested with the
/// published vectors and against another implementation without any networking.
///
/// LANSync speaks `Noise_XXpsk0_25519_ChaChaPoly_SHA256`; `XX`, `XXpsk3` and `NNpsk0` exist so
/// the same code is checked against the published vectors, which exercise every token.

/// A handshake pattern: the tokens of each message, alternating initiator → responder → ….
package struct NoisePattern: Sendable, Equatable {
    package enum Token: Sendable, Equatable { case e, s, ee, es, se, ss, psk }

    package let name: String
    package let messages: [[Token]]

    package var hasPSK: Bool { messages.contains { $0.contains(.psk) } }
    package var protocolName: String { "Noise_\(name)_25519_ChaChaPoly_SHA256" }

    /// `-> psk, e` · `<- e, ee, s, es` · `-> s, se`: LANSync's handshake. The group secret (the PSK)
    /// is mixed in before anything else, so a stranger fails at the first message, before any
    /// Diffie-Hellman, and never learns either side's static key.
    package static let xxpsk0 = NoisePattern(name: "XXpsk0", messages: [[.psk, .e], [.e, .ee, .s, .es], [.s, .se]])
    package static let xx = NoisePattern(name: "XX", messages: [[.e], [.e, .ee, .s, .es], [.s, .se]])
    package static let xxpsk3 = NoisePattern(name: "XXpsk3", messages: [[.e], [.e, .ee, .s, .es], [.s, .se, .psk]])
    package static let nnpsk0 = NoisePattern(name: "NNpsk0", messages: [[.psk, .e], [.e, .ee]])
}

/// Why a Noise operation failed. Any failure ends the handshake or the connection.
package enum NoiseError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A message failed authentication: wrong group secret, tampering, truncation, replay, reordering.
    case authenticationFailed
    /// A message was too short or too long for what the pattern expects.
    case malformedMessage(String)
    /// The peer's key is a low-order point (no shared secret).
    case invalidPublicKey
    /// A call out of turn (writing when it is the peer's turn, or after completion).
    case outOfTurn
    /// 2^64 - 1 messages were sent with one key.
    case nonceExhausted

    package var description: String {
        switch self {
        case .authenticationFailed: return "authentication failed (wrong group secret, or the message was altered)"
        case .malformedMessage(let reason): return "malformed handshake message: \(reason)"
        case .invalidPublicKey: return "the peer sent an invalid package key"
        case .outOfTurn: return "handshake message out of turn"
        case .nonceExhausted: return "too many messages under one key"
        }
    }
}

/// The largest Noise message, handshake or transport.
package let noiseMaxMessageBytes = 65_535

/// A Noise CipherState: a key and a counter nonce that goes up by one per message.
package struct NoiseCipherState: Sendable {
    var key: SecureBytes?
    package private(set) var nonce: UInt64 = 0

    init(key: SecureBytes? = nil) { self.key = key }

    package var hasKey: Bool { key != nil }

    package mutating func encrypt(ad: [UInt8] = [], plaintext: [UInt8]) throws(NoiseError) -> [UInt8] {
        guard let key else { return plaintext }
        guard nonce < UInt64.max else { throw .nonceExhausted }
        defer { nonce += 1 }
        return ChaChaPoly.seal(key: key, nonce: nonce, ad: ad, plaintext: plaintext)
    }

    package mutating func decrypt(ad: [UInt8] = [], ciphertext: [UInt8]) throws(NoiseError) -> [UInt8] {
        guard let key else { return ciphertext }
        guard nonce < UInt64.max else { throw .nonceExhausted }
        guard let plaintext = ChaChaPoly.open(key: key, nonce: nonce, ad: ad, ciphertext: ciphertext) else {
            throw .authenticationFailed
        }
        nonce += 1
        return plaintext
    }
}

/// Noise's SymmetricState: the chaining key, the handshake hash and the current cipher.
struct NoiseSymmetricState {
    var chainingKey: SecureBytes
    var hash: [UInt8]
    var cipher = NoiseCipherState()

    init(protocolName: String) {
        let name = Array(protocolName.utf8)
        hash =
            name.count <= SHA256.byteCount
            ? name + [UInt8](repeating: 0, count: SHA256.byteCount - name.count)
            : SHA256.hash(name)
        chainingKey = SecureBytes(copying: hash)
    }

    /// HKDF with HMAC-SHA256 as Noise defines it (section 4.3), two or three outputs.
    static func hkdf(chainingKey: SecureBytes, input: some ContiguousBytes, outputs: Int) -> [SecureBytes] {
        var temporaryKey = SHA256.hmac(key: chainingKey, message: input)
        defer { wipe(&temporaryKey) }
        var results = [SecureBytes]()
        var previous = [UInt8]()
        for index in 1...outputs {
            var output = SHA256.hmac(key: temporaryKey, message: previous + [UInt8(index)])
            results.append(SecureBytes(copying: output))
            wipe(&previous)
            previous = output
            wipe(&output)
        }
        wipe(&previous)
        return results
    }

    mutating func mixHash(_ data: [UInt8]) { hash = SHA256.hash(hash + data) }

    mutating func mixKey(_ input: some ContiguousBytes) {
        let outputs = Self.hkdf(chainingKey: chainingKey, input: input, outputs: 2)
        chainingKey = outputs[0]
        cipher = NoiseCipherState(key: outputs[1])
    }

    mutating func mixKeyAndHash(_ input: some ContiguousBytes) {
        let outputs = Self.hkdf(chainingKey: chainingKey, input: input, outputs: 3)
        chainingKey = outputs[0]
        mixHash(outputs[1].withUnsafeBytes { [UInt8]($0) })
        cipher = NoiseCipherState(key: outputs[2])
    }

    mutating func encryptAndHash(_ plaintext: [UInt8]) throws(NoiseError) -> [UInt8] {
        let ciphertext = try cipher.encrypt(ad: hash, plaintext: plaintext)
        mixHash(ciphertext)
        return ciphertext
    }

    mutating func decryptAndHash(_ ciphertext: [UInt8]) throws(NoiseError) -> [UInt8] {
        let plaintext = try cipher.decrypt(ad: hash, ciphertext: ciphertext)
        mixHash(ciphertext)
        return plaintext
    }

    func split() -> (NoiseCipherState, NoiseCipherState) {
        let outputs = Self.hkdf(chainingKey: chainingKey, input: [UInt8](), outputs: 2)
        return (NoiseCipherState(key: outputs[0]), NoiseCipherState(key: outputs[1]))
    }
}

/// A Noise HandshakeState for one side.
///
/// States: it is the initiator's turn first; each `writeMessage` or `readMessage` consumes one
/// pattern message and passes the turn; after the last message `isComplete` is true and `split()`
/// gives the transport ciphers. Any error leaves the handshake unusable: the caller drops the
/// connection.
package struct NoiseHandshake: Sendable {
    package let pattern: NoisePattern
    package let isInitiator: Bool
    private var symmetric: NoiseSymmetricState
    private let staticKey: KeyPair?
    private var ephemeral: KeyPair?
    private let psk: SecureBytes?
    package private(set) var remoteStaticKey: [UInt8]?
    private var remoteEphemeral: [UInt8]?
    private var messageIndex = 0
    private var failed = false

    /// - Parameters:
    ///   - prologue: bytes both sides must agree on (LANSync: protocol name and version), bound into the hash.
    ///   - staticKey: this side's long-term key pair, for patterns with `s`.
    ///   - psk: the 32-byte pre-shared key, for `psk` patterns.
    ///   - ephemeral: a fixed ephemeral key, for known-answer tests only; fresh and random otherwise.
    package init(
        pattern: NoisePattern,
        initiator: Bool,
        prologue: [UInt8],
        staticKey: KeyPair? = nil,
        psk: SecureBytes? = nil,
        ephemeral: KeyPair? = nil
    ) {
        self.pattern = pattern
        isInitiator = initiator
        self.staticKey = staticKey
        self.psk = psk
        self.ephemeral = ephemeral
        symmetric = NoiseSymmetricState(protocolName: pattern.protocolName)
        symmetric.mixHash(prologue)
    }

    package var isComplete: Bool { messageIndex == pattern.messages.count }

    /// True when the next message is ours to write.
    package var isOurTurn: Bool { !isComplete && (messageIndex % 2 == 0) == isInitiator }

    /// The handshake hash: identical on both sides after a successful handshake (channel binding).
    package var handshakeHash: [UInt8] { symmetric.hash }

    /// Writes the next handshake message, carrying `payload` (encrypted once a key is established).
    package mutating func writeMessage(payload: [UInt8] = []) throws(NoiseError) -> [UInt8] {
        guard !failed, isOurTurn else { throw .outOfTurn }
        var message = [UInt8]()
        do throws(NoiseError) {
            for token in pattern.messages[messageIndex] {
                switch token {
                case .e:
                    let pair = ephemeral ?? KeyPair.generate()
                    ephemeral = pair
                    message += pair.publicKey
                    symmetric.mixHash(pair.publicKey)
                    if pattern.hasPSK { symmetric.mixKey(pair.publicKey) }
                case .s:
                    guard let staticKey else { throw .malformedMessage("no static key to send") }
                    message += try symmetric.encryptAndHash(staticKey.publicKey)
                case .psk:
                    guard let psk else { throw .malformedMessage("no pre-shared key") }
                    symmetric.mixKeyAndHash(psk)
                default:
                    try mixDiffieHellman(token)
                }
            }
            message += try symmetric.encryptAndHash(payload)
        } catch {
            failed = true
            throw error
        }
        guard message.count <= noiseMaxMessageBytes else {
            failed = true
            throw .malformedMessage("message of \(message.count) bytes exceeds \(noiseMaxMessageBytes)")
        }
        messageIndex += 1
        return message
    }

    /// Reads the peer's next handshake message and returns its payload. Throws, and becomes
    /// unusable, on any malformed or unauthentic message.
    package mutating func readMessage(_ message: [UInt8]) throws(NoiseError) -> [UInt8] {
        guard !failed, !isComplete, !isOurTurn else { throw .outOfTurn }
        guard message.count <= noiseMaxMessageBytes else {
            failed = true
            throw .malformedMessage("message of \(message.count) bytes exceeds \(noiseMaxMessageBytes)")
        }
        var rest = message[...]
        func take(_ count: Int) throws(NoiseError) -> [UInt8] {
            guard rest.count >= count else { throw .malformedMessage("message is \(message.count) bytes, too short") }
            defer { rest = rest.dropFirst(count) }
            return Array(rest.prefix(count))
        }
        do throws(NoiseError) {
            for token in pattern.messages[messageIndex] {
                switch token {
                case .e:
                    let key = try take(KeyPair.publicKeyByteCount)
                    remoteEphemeral = key
                    symmetric.mixHash(key)
                    if pattern.hasPSK { symmetric.mixKey(key) }
                case .s:
                    let length = KeyPair.publicKeyByteCount + (symmetric.cipher.hasKey ? ChaChaPoly.tagByteCount : 0)
                    remoteStaticKey = try symmetric.decryptAndHash(try take(length))
                case .psk:
                    guard let psk else { throw .malformedMessage("no pre-shared key") }
                    symmetric.mixKeyAndHash(psk)
                default:
                    try mixDiffieHellman(token)
                }
            }
            let payload = try symmetric.decryptAndHash(Array(rest))
            messageIndex += 1
            return payload
        } catch {
            failed = true
            throw error
        }
    }

    /// The transport ciphers `(send, receive)` once the handshake is complete.
    package func split() throws(NoiseError) -> (send: NoiseCipherState, receive: NoiseCipherState) {
        guard isComplete, !failed else { throw .outOfTurn }
        let (first, second) = symmetric.split()
        return isInitiator ? (first, second) : (second, first)
    }

    private mutating func mixDiffieHellman(_ token: NoisePattern.Token) throws(NoiseError) {
        // Which of our keys meets which of theirs, seen from this side (Noise section 5.3).
        let local: KeyPair?
        let remote: [UInt8]?
        switch (token, isInitiator) {
        case (.ee, _): (local, remote) = (ephemeral, remoteEphemeral)
        case (.ss, _): (local, remote) = (staticKey, remoteStaticKey)
        case (.es, true), (.se, false): (local, remote) = (ephemeral, remoteStaticKey)
        case (.es, false), (.se, true): (local, remote) = (staticKey, remoteEphemeral)
        default: return
        }
        guard let local, let remote else { throw .malformedMessage("a key needed for \(token) is missing") }
        guard let shared = X25519.sharedSecret(secretKey: local.secretKey, publicKey: remote) else {
            throw .invalidPublicKey
        }
        symmetric.mixKey(shared)
    }
}
