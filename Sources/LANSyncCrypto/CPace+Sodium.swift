import CSodium

/// CPace over ristretto255 with SHA-512 (draft-irtf-cfrg-cpace, "CPACE-RISTR255-SHA512"): a
/// balanced PAKE. Two parties that share a short code derive a strong key; an attacker who
/// talks to one of them learns whether one guess of the code was right, and nothing else — no
/// offline dictionary attack on what it saw. Built from libsodium 1.0.18's ristretto255
/// primitives; checked against the draft's test vectors (`CPaceTests`).
///
/// Each party computes the generator from the code (`prs`), a channel identifier and a session
/// ID, sends `Y = y·g` with its associated data, and derives the intermediate session key
/// `ISK = SHA-512(lv_cat(DSI_ISK, sid, K) ‖ transcript)` from `K = y·Y_peer`. The transcript is
/// ordered by role (initiator first, `transcript_ir`), as in the draft.
package enum CPace {
    package static let dsi = Array("CPaceRistretto255".utf8)
    package static let dsiISK = Array("CPaceRistretto255_ISK".utf8)
    /// SHA-512's input block size: the generator string is padded to fill it.
    static let hashBlockBytes = 128
    package static let elementBytes = 32
    package static let scalarBytes = 32
    package static let keyBytes = 64

    /// `prepend_len`: the length of `data` as LEB128, then `data`.
    package static func prependLength(_ data: [UInt8]) -> [UInt8] {
        var out = [UInt8]()
        var length = data.count
        repeat {
            var byte = UInt8(length & 0x7F)
            length >>= 7
            if length > 0 { byte |= 0x80 }
            out.append(byte)
        } while length > 0
        return out + data
    }

    /// `lv_cat`: each part with its length prepended, concatenated.
    package static func lengthValueConcatenation(_ parts: [[UInt8]]) -> [UInt8] {
        parts.reduce(into: []) { $0 += prependLength($1) }
    }

    /// `generator_string(DSI, PRS, CI, sid, s_in_bytes)`: the code is padded with zeros so that the
    /// first hash block holds the DSI and the code only.
    package static func generatorString(prs: [UInt8], channel: [UInt8], session: [UInt8]) -> [UInt8] {
        let padding = max(0, hashBlockBytes - 1 - prependLength(prs).count - prependLength(dsi).count)
        return lengthValueConcatenation([dsi, prs, [UInt8](repeating: 0, count: padding), channel, session])
    }

    /// The generator: SHA-512 of the generator string, mapped to the group (ristretto255's
    /// one-way map, `crypto_core_ristretto255_from_hash`).
    package static func generator(prs: [UInt8], channel: [UInt8], session: [UInt8]) -> [UInt8] {
        Sodium.ensureReady()
        let hash = SHA512.hash(generatorString(prs: prs, channel: channel, session: session))
        var point = [UInt8](repeating: 0, count: elementBytes)
        _ = crypto_core_ristretto255_from_hash(&point, hash)
        return point
    }

    /// A fresh secret scalar (uniform modulo the group order).
    package static func randomScalar() -> SecureBytes {
        Sodium.ensureReady()
        var scalar = [UInt8](repeating: 0, count: scalarBytes)
        crypto_core_ristretto255_scalar_random(&scalar)
        defer { sodium_memzero(&scalar, scalar.count) }
        return SecureBytes(copying: scalar)
    }

    /// `scalar_mult_vfy(y, X)`: `y·X`, refusing an encoding that is not a group element and a
    /// result that is the identity (which a peer sending a low-order or crafted point would force).
    package static func multiply(_ scalar: SecureBytes, _ point: [UInt8]) throws(CryptoError) -> [UInt8] {
        Sodium.ensureReady()
        guard point.count == elementBytes else {
            throw CryptoError.invalidKeyLength(expected: elementBytes, actual: point.count)
        }
        guard crypto_core_ristretto255_is_valid_point(point) == 1 else {
            throw CryptoError.operationFailed("a point that is not a ristretto255 element")
        }
        var out = [UInt8](repeating: 0, count: elementBytes)
        let code = scalar.withUnsafeBytes { scalar in crypto_scalarmult_ristretto255(&out, scalar.bytes, point) }
        guard code == 0 else {
            throw CryptoError.operationFailed("crypto_scalarmult_ristretto255 (an identity result)")
        }
        return out
    }

    /// `transcript_ir(Ya, ADa, Yb, ADb)`: the initiator's message, then the responder's.
    package static func transcript(
        initiator: (element: [UInt8], data: [UInt8]),
        responder: (element: [UInt8], data: [UInt8])
    )
        -> [UInt8]
    {
        lengthValueConcatenation([initiator.element, initiator.data])
            + lengthValueConcatenation([responder.element, responder.data])
    }

    /// `ISK = SHA-512(lv_cat(DSI_ISK, sid, K) ‖ transcript)`.
    package static func sessionKey(session: [UInt8], secret: [UInt8], transcript: [UInt8]) -> SecureBytes {
        var input = lengthValueConcatenation([dsiISK, session, secret]) + transcript
        defer { sodium_memzero(&input, input.count) }
        var key = SHA512.hash(input)
        defer { sodium_memzero(&key, key.count) }
        return SecureBytes(copying: key)
    }
}

/// One side of a CPace run: holds its secret scalar, sends its message, and derives the session
/// key from the peer's. A run is single-use; a new one gets a new scalar.
package struct CPaceParty: Sendable {
    package enum Role: Sendable { case initiator, responder }

    package let role: Role
    let session: [UInt8]
    let scalar: SecureBytes
    /// This side's message: its element `Y = y·g`.
    package let element: [UInt8]
    package let associatedData: [UInt8]

    /// `scalar` is for known-answer tests; a real run takes a fresh random one.
    package init(
        role: Role,
        code: [UInt8],
        channel: [UInt8],
        session: [UInt8],
        associatedData: [UInt8],
        scalar: SecureBytes = CPace.randomScalar()
    ) throws(CryptoError) {
        self.role = role
        self.session = session
        self.scalar = scalar
        self.associatedData = associatedData
        element = try CPace.multiply(scalar, CPace.generator(prs: code, channel: channel, session: session))
    }

    /// The session key from the peer's message; throws when the peer's element is not valid.
    /// Both sides get the same key exactly when they used the same code, channel and session.
    package func sessionKey(peerElement: [UInt8], peerData: [UInt8]) throws(CryptoError) -> SecureBytes {
        var secret = try CPace.multiply(scalar, peerElement)
        defer { sodium_memzero(&secret, secret.count) }
        let mine = (element, associatedData)
        let theirs = (peerElement, peerData)
        let transcript =
            role == .initiator
            ? CPace.transcript(initiator: mine, responder: theirs)
            : CPace.transcript(initiator: theirs, responder: mine)
        return CPace.sessionKey(session: session, secret: secret, transcript: transcript)
    }
}

/// SHA-512, from libsodium's `crypto_hash_sha512`.
package enum SHA512 {
    package static func hash(_ bytes: some ContiguousBytes) -> [UInt8] {
        Sodium.ensureReady()
        var out = [UInt8](repeating: 0, count: 64)
        bytes.withUnsafeBytes { input in _ = crypto_hash_sha512(&out, input.bytes, UInt64(input.count)) }
        return out
    }
}
