/// One replica's changes as a hash chain, so that a relay can neither alter, forge nor hide them
/// and a whole catch-up verifies with one signature check per batch.
///
/// A replica's changes carry counters 1, 2, 3, … (its dots). Each change has a **leaf**: its
/// element hash (`ElementHasher`, the hash the state digest adds; a change other replicas have
/// superseded keeps its leaf as a 32-byte stub). The chain's hash after counter `c` is
/// `h(c) = H(h(c−1) ‖ leaf(c))`, `h(0)` is 32 zero bytes, and `H` is the element hasher
/// (BLAKE2b-256): 64 bytes in, so no two inputs share an encoding. The replica's device signs
/// heads `(replica, c, h(c))` with its Ed25519 key (bound to its device key by the handshake and
/// pinned by the group's members). A receiver that holds a verified head at `a` and receives the
/// leaves of `(a, b]` with a signed head at `b` recomputes `h(b)`: one hash per change (of bytes it
/// hashes already) and one signature check per range, rather than one signature per change.
///
/// Because `h(b)` commits to every change up to `b`, a range whose changes were altered, dropped,
/// reordered or invented, or a claim to cover counters the replica never signed, does not verify.
package struct ChainHead: Hashable, Sendable {
    package static let hashByteCount = 32

    package let replica: ReplicaID
    package let counter: UInt64
    package let hash: [UInt8]

    package init(replica: ReplicaID, counter: UInt64, hash: [UInt8]) {
        precondition(hash.count == Self.hashByteCount, "a chain hash is 32 bytes")
        self.replica = replica
        self.counter = counter
        self.hash = hash
    }

    /// The head before a replica's first change.
    package static func genesis(of replica: ReplicaID) -> ChainHead {
        ChainHead(replica: replica, counter: 0, hash: [UInt8](repeating: 0, count: hashByteCount))
    }

    /// The head after the replica's next change, whose leaf is `leaf`, hashed in `buffer`: what a
    /// store does for every change it makes or receives.
    package func extended(by leaf: [UInt8], hasher: ElementHasher, reusing buffer: inout [UInt8]) -> ChainHead {
        precondition(leaf.count == Self.hashByteCount, "a leaf is a 32-byte element hash")
        buffer.removeAll(keepingCapacity: true)
        buffer.append(contentsOf: hash)
        buffer.append(contentsOf: leaf)
        return ChainHead(replica: replica, counter: counter + 1, hash: hasher.hash(buffer))
    }

    /// The head after the replica's next changes, whose leaves are `leaves` in counter order.
    package func extended(by leaves: some Sequence<[UInt8]>, hasher: ElementHasher) -> ChainHead {
        var hash = self.hash
        var counter = self.counter
        var input = [UInt8]()
        input.reserveCapacity(2 * Self.hashByteCount)
        for leaf in leaves {
            precondition(leaf.count == Self.hashByteCount, "a leaf is a 32-byte element hash")
            input.removeAll(keepingCapacity: true)
            input.append(contentsOf: hash)
            input.append(contentsOf: leaf)
            hash = hasher.hash(input)
            counter += 1
        }
        return ChainHead(replica: replica, counter: counter, hash: hash)
    }

    /// What the replica's device signs: "lansync/v1/head", then the replica's 16 bytes, the
    /// counter (8 bytes, big-endian) and the hash.
    package var signedMessage: [UInt8] {
        var out = Array(Self.signingContext.utf8)
        out.reserveCapacity(out.count + 16 + 8 + Self.hashByteCount)
        out.appendBigEndian(replica.high)
        out.appendBigEndian(replica.low)
        out.appendBigEndian(counter)
        out.append(contentsOf: hash)
        return out
    }

    package static let signingContext = "lansync/v1/head"
}

/// A chain head with its replica's signature (64 bytes, Ed25519 over `head.signedMessage`).
package struct SignedHead: Hashable, Sendable {
    package let head: ChainHead
    package let signature: [UInt8]

    package init(head: ChainHead, signature: [UInt8]) {
        self.head = head
        self.signature = signature
    }
}

/// Checks ranges of a replica's chain. Pure: the signature check is passed in (libsodium's
/// Ed25519 in production), so this runs in unit tests and fuzzers as it does in a session.
package struct ChainVerifier: Sendable {
    /// Why a range does not verify; the session rejects the delta whole and ends the connection.
    package enum Problem: Error, Equatable, Sendable, CustomStringConvertible {
        case otherReplica
        case notAfter(verified: UInt64, claimed: UInt64)
        case leafCount(expected: UInt64, got: Int)
        case hashMismatch(counter: UInt64)
        case badSignature(counter: UInt64)

        package var description: String {
            switch self {
            case .otherReplica: "the signed head names another replica than the changes"
            case .notAfter(let verified, let claimed):
                "a signed head at counter \(claimed) does not follow the verified head at \(verified)"
            case .leafCount(let expected, let got): "expected \(expected) changes before the signed head, got \(got)"
            case .hashMismatch(let counter):
                "the changes do not hash to the signed head at counter \(counter): altered, dropped, reordered or invented"
            case .badSignature(let counter): "the head at counter \(counter) is not signed by the replica's device"
            }
        }
    }

    let hasher: ElementHasher
    let signatureIsValid: @Sendable (SignedHead) -> Bool

    package init(hasher: ElementHasher, signatureIsValid: @escaping @Sendable (SignedHead) -> Bool) {
        self.hasher = hasher
        self.signatureIsValid = signatureIsValid
    }

    /// The new verified head when `leaves` (the replica's changes after `verified`, in counter
    /// order) lead exactly to `signed` and its signature holds.
    package func verify(
        from verified: ChainHead,
        leaves: [[UInt8]],
        to signed: SignedHead
    ) -> Result<ChainHead, Problem> {
        let claimed = signed.head
        guard claimed.replica == verified.replica else { return .failure(.otherReplica) }
        guard claimed.counter > verified.counter else {
            return .failure(.notAfter(verified: verified.counter, claimed: claimed.counter))
        }
        let expected = claimed.counter - verified.counter
        guard UInt64(leaves.count) == expected, leaves.allSatisfy({ $0.count == ChainHead.hashByteCount }) else {
            return .failure(.leafCount(expected: expected, got: leaves.count))
        }
        // The hash first: it is cheap and says what is wrong more precisely than the signature.
        guard verified.extended(by: leaves, hasher: hasher) == claimed else {
            return .failure(.hashMismatch(counter: claimed.counter))
        }
        guard signatureIsValid(signed) else { return .failure(.badSignature(counter: claimed.counter)) }
        return .success(claimed)
    }
}
